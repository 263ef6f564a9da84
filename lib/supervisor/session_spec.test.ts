import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { SessionSpec } from "../protocol/supervisor.ts";
import { defaultSnapshotPath, writeSessionSpec } from "../session/snapshot_files.ts";
import { tempHome } from "../../tests/harness/mod.ts";
import { savedSpec, specFor } from "./session_spec.ts";

const homes: { remove(): void }[] = [];
function home(): string {
  const h = tempHome("awrepl-spec-");
  homes.push(h);
  return h.home;
}
afterEach(() => {
  for (const h of homes.splice(0)) h.remove();
});

/** A snapshot payload on disk: a spec is used only for a session that has one. */
function snapshotOf(h: string, name: string): void {
  mkdirSync(dirname(defaultSnapshotPath(h, name)), { recursive: true });
  writeFileSync(defaultSnapshotPath(h, name), "payload");
}

const quiet = () => {};

describe("specFor", () => {
  test("a session with no snapshot is made as requested, whatever spec was saved", () => {
    const h = home();
    writeSessionSpec(h, "a", { python: "/saved/python", cwd: h });
    const requested: SessionSpec = { python: "/asked/python", cwd: "/" };
    expect(specFor(h, "a", requested, quiet)).toBe(requested);
  });

  test("one re-created from its snapshot is made as saved: only an explicit python wins, a missing cwd falls back", () => {
    const h = home();
    snapshotOf(h, "a");
    writeSessionSpec(h, "a", { python: "/saved/python", cwd: h, timeout_ms: 5, env: { A: "1" } });
    const lines: string[] = [];
    expect(specFor(h, "a", { python: "/default/python", cwd: "/" }, (l) => lines.push(l))).toMatchObject({ python: "/saved/python", cwd: h, timeout_ms: 5, env: { A: "1" } });
    expect(lines[0]).toContain("re-created as it was saved");
    const explicit = specFor(h, "a", { python: "/asked/python", python_given: true, cwd: "/", autosave: true }, quiet);
    expect(explicit).toMatchObject({ python: "/asked/python", cwd: h, autosave: true });
    expect(explicit.python_given).toBeUndefined();
    writeSessionSpec(h, "a", { python: "/saved/python", cwd: `${h}/gone` });
    expect(specFor(h, "a", { cwd: "/" }, quiet).cwd).toBe("/");
  });
});

describe("savedSpec", () => {
  test("reads a spec saved by a protocol 1 supervisor (camelCase limits) as this protocol's", () => {
    const h = home();
    writeSessionSpec(h, "old", { python: "p", timeoutMs: 1000, maxOutputBytes: 2000, graceMs: 300 } as SessionSpec);
    expect(savedSpec(h, "old")).toEqual({ python: "p", timeout_ms: 1000, max_output_bytes: 2000, grace_ms: 300 });
    writeSessionSpec(h, "new", { python: "p", timeout_ms: 7 });
    expect(savedSpec(h, "new")).toEqual({ python: "p", timeout_ms: 7 });
    expect(savedSpec(h, "none")).toBeNull();
  });
});
