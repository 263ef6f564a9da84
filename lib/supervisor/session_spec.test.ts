import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { SessionSpec } from "../protocol/supervisor.ts";
import { defaultSnapshotPath, writeSessionSpec } from "../session/snapshot_files.ts";
import { tempHome } from "../../tests/harness/mod.ts";
import { builtinConfig } from "../settings/config.ts";
import { describeSandbox, sameSandbox, savedSpec, specFor, specLimits, specMismatch } from "./session_spec.ts";

const homes: { remove(): void }[] = [];
function home(): string {
  const h = tempHome("awrepl-spec-");
  homes.push(h);
  return h.home;
}
afterEach(() => {
  for (const h of homes.splice(0)) h.remove();
});

function snapshotOf(h: string, name: string): void {
  mkdirSync(dirname(defaultSnapshotPath(h, name)), { recursive: true });
  writeFileSync(defaultSnapshotPath(h, name), "payload");
}

const quiet = () => {};

describe("specFor", () => {
  test("a new session (nothing saved) is made as requested", () => {
    const h = home();
    const requested: SessionSpec = { python: "/asked/python", python_given: true, cwd: "/", existing: true };
    expect(specFor(h, "a", requested, quiet)).toEqual({ spec: { python: "/asked/python", cwd: "/" }, notices: [], recreated: false });
  });

  test("a saved spec is used whether or not a snapshot exists: a failed stop snapshot never means the caller's interpreter", () => {
    const h = home();
    const sandbox = { network: false, writable: [h] };
    writeSessionSpec(h, "a", { python: "ssh box python3", sandbox, cwd: h, env: { A: "1" } });
    const { spec, notices } = specFor(h, "a", { python: "/usr/bin/python3", cwd: "/" }, quiet);
    expect(spec).toEqual({ python: "ssh box python3", sandbox, cwd: h, env: { A: "1" } });
    expect(notices).toEqual([]);
    // With a snapshot the same.
    snapshotOf(h, "a");
    expect(specFor(h, "a", { cwd: "/" }, quiet).spec.python).toBe("ssh box python3");
  });

  test("an explicit --python wins and is said; the saved sandbox always stays, and a different ask is said", () => {
    const h = home();
    writeSessionSpec(h, "a", { python: "/saved/python", sandbox: { network: false }, cwd: h, timeout_ms: 5 });
    const lines: string[] = [];
    const explicit = specFor(h, "a", { python: "/asked/python", python_given: true, sandbox: false, cwd: "/", autosave: true }, (l) => lines.push(l));
    expect(explicit.spec).toMatchObject({ python: "/asked/python", sandbox: { network: false }, cwd: h, autosave: true, timeout_ms: 5 });
    expect(explicit.spec.python_given).toBeUndefined();
    expect(explicit.notices).toEqual([
      "Session a was re-created with --python /asked/python instead of /saved/python, the one it was created with.",
      "Session a keeps its sandbox (sandbox: no network); --no-sandbox was not applied.",
    ]);
    expect(lines[0]).toContain("re-created as it was saved");
    // A caller with no preference hears nothing; a caller asking for a sandbox of an unsandboxed one does.
    writeSessionSpec(h, "b", { python: "/saved/python", cwd: h });
    expect(specFor(h, "b", { cwd: "/" }, quiet).notices).toEqual([]);
    const asked = specFor(h, "b", { cwd: "/", sandbox: { network: true } }, quiet);
    expect(asked.spec.sandbox).toBeUndefined();
    expect(asked.notices[0]).toContain("runs WITHOUT a sandbox");
  });

  test("a saved directory that is gone refuses the re-creation with a clear error (never another directory)", () => {
    const h = home();
    const gone = `${h}/gone`;
    mkdirSync(gone);
    writeSessionSpec(h, "a", { python: "/saved/python", cwd: gone });
    rmSync(gone, { recursive: true });
    expect(() => specFor(h, "a", { cwd: "/" }, quiet)).toThrow(`Session a was created in ${gone}, which no longer exists`);
  });

  test("a snapshot with no spec at all is re-created as asked, and that is said", () => {
    const h = home();
    snapshotOf(h, "a");
    const { spec, notices } = specFor(h, "a", { python: "p", cwd: "/" }, quiet);
    expect(spec).toEqual({ python: "p", cwd: "/" });
    expect(notices[0]).toContain("had no saved spec");
  });
});

describe("specMismatch (a live session asked for something else)", () => {
  test("says what the session keeps and how to change it; silence when nothing different was asked", () => {
    const has: SessionSpec = { python: "/usr/bin/python3", sandbox: { network: false, env: ["A", "B"] } };
    expect(specMismatch("s", has, undefined)).toBeNull();
    expect(specMismatch("s", has, { python: "python3" })).toBeNull(); // a default, not --python
    expect(specMismatch("s", has, { python: "/usr/bin/python3", python_given: true, sandbox: { env: ["B", "A"] } })).toBeNull();
    const both = specMismatch("s", has, { python: "/other", python_given: true, sandbox: { network: true } });
    expect(both).toBe(
      "Session s keeps its interpreter (/usr/bin/python3); --python /other was not used. Session s keeps its sandbox (sandbox: no network, env A B); the profile asked for (sandbox: network) was not applied. A session keeps what it was created with: `awrepl close s` first to change it.",
    );
    expect(specMismatch("s", { python: "p" }, { sandbox: {} })).toContain("runs WITHOUT a sandbox");
  });

  test("sameSandbox and describeSandbox", () => {
    expect(sameSandbox(undefined, false)).toBe(true);
    expect(sameSandbox({}, { network: false, env: [] })).toBe(true);
    expect(sameSandbox({}, undefined)).toBe(false);
    expect(describeSandbox(false)).toBe("no sandbox");
    expect(describeSandbox({ network: true, writable: ["/d"] })).toBe("sandbox: network, writable /d");
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

describe("specLimits", () => {
  test("the limits the creating client sent, over the supervisor's config, every other one the config's", () => {
    const config = { ...builtinConfig, timeoutMs: 9_000, graceMs: 500, displayMaxEntries: 7 };
    expect(specLimits(config, {})).toMatchObject({ timeoutMs: 9_000, maxOutputBytes: builtinConfig.maxOutputBytes, graceMs: 500, displayMaxEntries: 7 });
    expect(specLimits(config, { timeout_ms: 0, max_output_bytes: 10, grace_ms: 1 })).toMatchObject({ timeoutMs: 0, maxOutputBytes: 10, graceMs: 1, displayMaxEntries: 7 });
  });
});

describe("resource limits and the allow list in the spec", () => {
  const MiB = 1024 * 1024;

  test("a saved spec's limits stay when the session is re-created; a caller asking for others is told", () => {
    const h = home();
    writeSessionSpec(h, "a", { python: "p", cwd: h, limits: { memory_bytes: 256 * MiB, max_procs: 32 } });
    expect(specFor(h, "a", { cwd: "/" }, quiet)).toMatchObject({ spec: { limits: { memory_bytes: 256 * MiB, max_procs: 32 } }, notices: [] });
    const asked = specFor(h, "a", { cwd: "/", limits: { memory_bytes: 2 * 1024 * MiB } }, quiet);
    expect(asked.spec.limits).toEqual({ memory_bytes: 256 * MiB, max_procs: 32 });
    expect(asked.notices).toEqual(["Session a keeps its limits (memory 256 MiB, max procs 32); the limits asked for (memory 2 GiB) were not applied."]);
    // The same limits in another order, or none asked: nothing to say.
    expect(specFor(h, "a", { cwd: "/", limits: { max_procs: 32, memory_bytes: 256 * MiB } }, quiet).notices).toEqual([]);
  });

  test("a live session asked for other limits keeps its own, and says so", () => {
    const has: SessionSpec = { python: "p", limits: { max_file_bytes: MiB } };
    expect(specMismatch("s", has, { python: "p" })).toBeNull();
    expect(specMismatch("s", has, { limits: { max_file_bytes: MiB } })).toBeNull();
    expect(specMismatch("s", has, { limits: { cpu_percent: 50, best_effort: true } })).toBe(
      "Session s keeps its limits (max file size 1 MiB); the limits asked for (cpu 50%, best effort) were not applied. A session keeps what it was created with: `awrepl close s` first to change it.",
    );
    expect(specMismatch("s", { python: "p" }, { limits: { max_procs: 64 } })).toContain("keeps its limits (none)");
  });

  test("the allow list is part of the sandbox profile", () => {
    expect(sameSandbox({ allow: ["a.org", "b.org"] }, { allow: ["b.org", "a.org"] })).toBe(true);
    expect(sameSandbox({ allow: ["a.org"] }, {})).toBe(false);
    expect(describeSandbox({ allow: ["pypi.org", "127.0.0.1:8080"] })).toBe("sandbox: no network, allow pypi.org 127.0.0.1:8080");
  });
});
