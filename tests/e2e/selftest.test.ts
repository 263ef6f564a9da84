// `awrepl --self-test` passes on this machine and cleans up after itself.
import { expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { run, waitForNoProcesses, withHome } from "../harness/mod.ts";

test("--self-test passes every check and leaves nothing behind", () =>
  withHome(async (home) => {
    const before = new Set(readdirSync(tmpdir()).filter((n) => n.startsWith("awrepl-self-test-")));
    const r = await run(["--self-test"], { home, timeoutMs: 60_000 });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    const checks = lines.filter((l) => /^\s+(PASS|FAIL)\s/.test(l));
    expect(checks.length).toBeGreaterThanOrEqual(9);
    expect(checks.filter((l) => l.includes("FAIL"))).toEqual([]);
    expect(lines.at(-1)).toBe(`SELF-TEST: awrepl ok (${checks.length}/${checks.length})`);
    // Its private state directory is gone, and so is every process it started.
    const after = readdirSync(tmpdir()).filter((n) => n.startsWith("awrepl-self-test-") && !before.has(n));
    expect(after).toEqual([]);
    expect(await waitForNoProcesses(home)).toEqual([]);
  }), 90_000);
