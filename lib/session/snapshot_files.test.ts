import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  defaultSnapshotPath,
  forgetSnapshot,
  isDefaultSnapshot,
  knownSessionNames,
  manifestPath,
  migrateLegacyLayout,
  readSessionSpec,
  readUnsaved,
  recordUnsaved,
  savedSessionNames,
  sessionDir,
  specPath,
  unsavedNotice,
  writeSessionSpec,
} from "./snapshot_files.ts";

const homes: string[] = [];
function home(): string {
  const h = mkdtempSync(join(tmpdir(), "awrepl-store-"));
  homes.push(h);
  return h;
}
afterEach(() => {
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});

/** Every file under `dir`, as relative paths. */
function tree(dir: string, prefix = ""): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? tree(join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`]))
    .sort();
}

describe("a session's saved spec", () => {
  test("is written private, read back, and forgotten with the snapshot", () => {
    const h = home();
    const spec = { python: "/usr/bin/python3", cwd: "/tmp", env: { SECRET: "s3" }, timeout_ms: 5 };
    writeSessionSpec(h, "a", spec);
    expect(statSync(specPath(h, "a")).mode & 0o777).toBe(0o600);
    expect(statSync(sessionDir(h, "a")).mode & 0o777).toBe(0o700);
    expect(readSessionSpec(h, "a")).toEqual(spec);
    // No temp file left behind.
    expect(tree(join(h, "snapshots"))).toEqual(["a/spec.json"]);
    writeFileSync(defaultSnapshotPath(h, "a"), "payload");
    expect(forgetSnapshot(h, "a")).toBe(true);
    expect(existsSync(sessionDir(h, "a"))).toBe(false);
  });

  test("a missing or unreadable spec is null", () => {
    const h = home();
    expect(readSessionSpec(h, "none")).toBeNull();
    writeSessionSpec(h, "b", {});
    writeFileSync(specPath(h, "b"), "[1, 2");
    expect(readSessionSpec(h, "b")).toBeNull();
    writeFileSync(specPath(h, "b"), "[1, 2]");
    expect(readSessionSpec(h, "b")).toBeNull();
  });
});

describe("on-disk names are disjoint by construction (issue 15 item 10)", () => {
  test("sessions x and x.spec (and x.json, x.pkl) share no file; closing one leaves the others whole", () => {
    const h = home();
    const names = ["x", "x.spec", "x.json", "x.pkl", "x.spec.json"];
    for (const n of names) {
      writeSessionSpec(h, n, { cwd: `/${n}` });
      writeFileSync(defaultSnapshotPath(h, n), n);
      writeFileSync(manifestPath(defaultSnapshotPath(h, n)), "{}");
    }
    const files = names.flatMap((n) => [specPath(h, n), defaultSnapshotPath(h, n), manifestPath(defaultSnapshotPath(h, n))]);
    expect(new Set(files).size).toBe(files.length);
    expect(forgetSnapshot(h, "x.spec")).toBe(true);
    for (const n of names.filter((n) => n !== "x.spec")) {
      expect(readSessionSpec(h, n)).toEqual({ cwd: `/${n}` });
      expect(readFileSync(defaultSnapshotPath(h, n), "utf8")).toBe(n);
    }
    expect(savedSessionNames(h)).toEqual(["x", "x.json", "x.pkl", "x.spec.json"]);
    expect(isDefaultSnapshot(h, defaultSnapshotPath(h, "x.pkl"))).toBe(true);
    expect(isDefaultSnapshot(h, join(h, "snapshots", "x.pkl"))).toBe(false);
  });

  test("a session known only by its spec (its stop snapshot failed) is known, not saved; close forgets it", () => {
    const h = home();
    writeSessionSpec(h, "lost", { cwd: "/" });
    recordUnsaved(h, "lost", { at: 1000, stop: "stop requested", error: "disk full", kept: null });
    expect(savedSessionNames(h)).toEqual([]);
    expect(knownSessionNames(h)).toEqual(["lost"]);
    expect(readUnsaved(h, "lost")).toMatchObject({ error: "disk full" });
    expect(forgetSnapshot(h, "lost")).toBe(true);
    expect(knownSessionNames(h)).toEqual([]);
    expect(forgetSnapshot(h, "lost")).toBe(false);
  });

  test("files kept aside stay when a session is forgotten", () => {
    const h = home();
    writeSessionSpec(h, "k", {});
    writeFileSync(`${defaultSnapshotPath(h, "k")}.corrupt-20260102T030405Z`, "bad");
    expect(forgetSnapshot(h, "k")).toBe(true);
    expect(tree(join(h, "snapshots"))).toEqual(["k/snapshot.pkl.corrupt-20260102T030405Z"]);
  });
});

describe("unsavedNotice", () => {
  test("says the stop, its age, the error, and which older state came back (or that it is gone)", () => {
    const now = Date.parse("2026-01-01T12:00:00Z");
    const kept = { path: "/s/a/snapshot.pkl", taken_at: now - 3 * 3600_000 };
    const restored = unsavedNotice("a", { at: now - 60_000, stop: "idle for 60000 ms", error: "disk full", kept }, { path: kept.path, takenAt: kept.taken_at }, now);
    expect(restored).toBe(
      "The snapshot of session a when its supervisor stopped (idle for 60000 ms) 60 s ago failed: disk full. It was restored from an OLDER snapshot, of 2026-01-01 09:00:00 UTC (3 h old, /s/a/snapshot.pkl): anything done after that is lost.",
    );
    const lost = unsavedNotice("a", { at: now - 60_000, stop: "stop requested", error: "disk full", kept: null }, null, now);
    expect(lost).toContain("Its state was lost; this call ran in a fresh worker made as the session was created.");
  });
});

describe("migrating the flat layout of awrepl 0.1", () => {
  test("payloads, manifests, specs and kept-aside files move into per-session directories; x.spec.json goes where its content says", () => {
    const h = home();
    const dir = join(h, "snapshots");
    mkdirSync(dir, { recursive: true });
    const manifest = (bytes: number) => JSON.stringify({ version: 1, savedNames: ["v"], skipped: [], pruned: [], bytes, pythonVersion: "3.11.2", timestamp: 1 });
    writeFileSync(join(dir, "a.pkl"), "AAAA");
    writeFileSync(join(dir, "a.json"), manifest(4));
    writeFileSync(join(dir, "a.spec.json"), JSON.stringify({ python: "/py/a", cwd: "/a" }));
    // Session b.spec's manifest took the name b's spec would have had: it is a manifest.
    writeFileSync(join(dir, "b.spec.pkl"), "BB");
    writeFileSync(join(dir, "b.spec.json"), manifest(2));
    writeFileSync(join(dir, "c.pkl.corrupt-20260102T030405Z"), "bad");
    writeFileSync(join(dir, "c.json.corrupt-20260102T030405Z"), manifest(3));
    writeFileSync(join(dir, "only-spec.spec.json"), JSON.stringify({ cwd: "/o" }));
    writeFileSync(join(dir, ".a.pkl.999999999.tmp"), "half");
    writeFileSync(join(dir, "notes.txt"), "mine");
    const result = migrateLegacyLayout(h);
    expect(tree(dir)).toEqual([
      "a/snapshot.json",
      "a/snapshot.pkl",
      "a/spec.json",
      "b.spec/snapshot.json",
      "b.spec/snapshot.pkl",
      "c/snapshot.json.corrupt-20260102T030405Z",
      "c/snapshot.pkl.corrupt-20260102T030405Z",
      "notes.txt",
      "only-spec/spec.json",
    ]);
    expect(result.left).toEqual(["notes.txt"]);
    expect(readSessionSpec(h, "a")).toEqual({ python: "/py/a", cwd: "/a" });
    expect(savedSessionNames(h)).toEqual(["a", "b.spec"]);
    expect(knownSessionNames(h)).toEqual(["a", "b.spec", "only-spec"]);
    // Once per process and home; a second run finds nothing to do.
    expect(migrateLegacyLayout(h)).toEqual({ moved: [], left: [] });
  });

  test("a file whose new place is taken stays where it is", () => {
    const fresh = home();
    mkdirSync(join(fresh, "snapshots", "a"), { recursive: true, mode: 0o700 });
    writeFileSync(join(fresh, "snapshots", "a", "spec.json"), JSON.stringify({ cwd: "/new" }));
    writeFileSync(join(fresh, "snapshots", "a.spec.json"), JSON.stringify({ cwd: "/old" }));
    expect(migrateLegacyLayout(fresh).left).toEqual(["a.spec.json"]);
    expect(readSessionSpec(fresh, "a")).toEqual({ cwd: "/new" });
  });
});
