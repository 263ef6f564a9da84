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

test("--self-test --json prints one object with every check, and the same exit status as the text", () =>
  withHome(async (home) => {
    const r = await run(["--self-test", "--json"], { home, timeoutMs: 60_000 });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split("\n")).toHaveLength(1);
    const report = JSON.parse(r.stdout) as { ok: boolean; passed: number; total: number; python: { version: string } | null; checks: { name: string; ok: boolean; ms: number; detail?: string }[] };
    expect(report.ok).toBe(true);
    expect(report.checks.length).toBeGreaterThanOrEqual(9);
    expect(report.passed).toBe(report.checks.length);
    expect(report.total).toBe(report.checks.length);
    expect(report.python?.version).toMatch(/^3\.\d+/);
    for (const check of report.checks) {
      expect(check).toEqual({ name: expect.any(String), ok: true, ms: expect.any(Number) });
      expect(Math.round(check.ms * 10) / 10).toBe(check.ms);
    }
    expect(report.checks.map((c) => c.name)).toContain("Variables persist across calls");
    expect(await waitForNoProcesses(home)).toEqual([]);
  }), 90_000);

test("--self-test --json with an interpreter that cannot start: ok false, each failure's detail, exit 1", () =>
  withHome(async (home) => {
    const r = await run(["--self-test", "--json", "--python", "/nonexistent/python3"], { home, timeoutMs: 60_000 });
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as { ok: boolean; passed: number; python: unknown; checks: { ok: boolean; detail?: string }[] };
    expect(report.ok).toBe(false);
    expect(report.python).toBeNull();
    expect(report.passed).toBeLessThan(report.checks.length);
    const failed = report.checks.filter((c) => !c.ok);
    expect(failed.length).toBeGreaterThan(0);
    for (const check of failed) expect(check.detail).toEqual(expect.any(String));
    expect(await waitForNoProcesses(home)).toEqual([]);
  }), 90_000);

test("--json is taken beside --self-test only: another unknown option there, or --json alone, is a usage error", () =>
  withHome(async (home) => {
    const bogus = await run(["--self-test", "--bogus"], { home });
    expect(bogus.code).toBe(2);
    expect(bogus.stderr).toContain("unknown option '--bogus'");
    const alone = await run(["--json"], { home });
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain("unknown option '--json'");
  }), 30_000);
