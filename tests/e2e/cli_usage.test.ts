// Usage errors: exit 2 with exactly one line on stderr, whatever produced them (commander or awrepl).
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ROOT, run, withHome } from "../harness/mod.ts";

function expectUsageError(r: { code: number | null; stdout: string; stderr: string }, mentions: string): void {
  expect(r.code).toBe(2);
  expect(r.stdout).toBe("");
  expect(r.stderr.endsWith("\n")).toBe(true);
  expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(r.stderr).toStartWith("awrepl: ");
  expect(r.stderr).toContain(mentions);
}

describe("usage errors", () => {
  test("AWREPL_HOME that others can write (/tmp, a 0775 directory) is refused and left unchanged", () =>
    withHome(async (home) => {
      for (const args of [["run", "1"], ["-s", "x", "run", "1"]]) {
        expectUsageError(await run(args, { home: "/tmp" }), "Directory /tmp can be written by other users");
      }
      expect(statSync("/tmp").mode & 0o7777).toBe(0o1777);
      const open = join(home, "open");
      mkdirSync(open);
      chmodSync(open, 0o775);
      expectUsageError(await run(["-s", "x", "run", "1"], { home: open }), `chmod go-w ${open}`);
      expect(statSync(open).mode & 0o777).toBe(0o775);
    }), 30_000);

  test("a bad session name, before or after the subcommand", () =>
    withHome(async (home) => {
      expectUsageError(await run(["--session", "no spaces", "run", "1"], { home }), '"no spaces"');
      expectUsageError(await run(["run", "-s", "-bad", "1"], { home }), "-bad");
      expectUsageError(await run(["run", "-s", "x".repeat(65), "1"], { home }), "x".repeat(65));
    }), 30_000);

  test("a bad AWREPL_SESSION", () =>
    withHome(async (home) => {
      expectUsageError(await run(["run", "1"], { home, env: { AWREPL_SESSION: "a/b" } }), "AWREPL_SESSION");
    }), 30_000);

  test("an unknown flag, with a suggestion on the same line", () =>
    withHome(async (home) => {
      const r = await run(["run", "--jsn", "1"], { home });
      expectUsageError(r, "--jsn");
      expect(r.stderr).toContain("--json");
      expectUsageError(await run(["--bogus"], { home }), "--bogus");
    }), 30_000);

  test("daemon without a subcommand", () =>
    withHome(async (home) => {
      expectUsageError(await run(["daemon"], { home }), "daemon needs a subcommand");
    }), 30_000);

  test("a timeout a timer cannot hold is refused instead of firing at once", () =>
    withHome(async (home) => {
      expectUsageError(await run(["run", "--timeout", "3000000000", "1"], { home }), "at most 2147483647");
      expectUsageError(await run(["run", "1"], { home, env: { AWREPL_TIMEOUT_MS: "3000000000" } }), "at most 2147483647");
      const ok = await run(["run", "--timeout", "2147483647", "'fine'"], { home });
      expect(ok.code).toBe(0);
      expect(ok.stdout).toBe("'fine'\n");
    }), 30_000);

  test("a missing -f file", () =>
    withHome(async (home) => {
      expectUsageError(await run(["run", "-f", join(home, "missing.py")], { home }), "missing.py");
    }), 30_000);

  test("a bad --timeout value, a missing option value, too many arguments, an unknown command", () =>
    withHome(async (home) => {
      expectUsageError(await run(["run", "--timeout", "soon", "1"], { home }), "soon");
      expectUsageError(await run(["run", "1", "--max-output"], { home }), "--max-output");
      expectUsageError(await run(["run", "print", "(1)"], { home }), "too many arguments");
      expectUsageError(await run(["frobnicate"], { home }), "frobnicate");
      expectUsageError(await run([], { home }), "--help");
    }), 30_000);

  test("CODE and -f together", () =>
    withHome(async (home) => {
      expectUsageError(await run(["run", "1", "-f", "x.py"], { home }), "not both");
    }), 30_000);
});

describe("--json failures that are not a cell's result: one error object on stdout", () => {
  function expectJsonError(r: { code: number | null; stdout: string; stderr: string }, code: string, exitCode: number): void {
    expect(r.code).toBe(exitCode);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    const parsed = JSON.parse(lines[0] as string);
    expect(Object.keys(parsed)).toEqual(["error"]);
    expect(parsed.error.code).toBe(code);
    expect(parsed.error.exit_code).toBe(exitCode);
    // The stderr line says the same thing.
    expect(r.stderr).toBe(`awrepl: ${parsed.error.message}\n`);
  }

  test("usage errors (commander's and awrepl's), no interpreter, an unreachable supervisor", () =>
    withHome(async (home) => {
      expectJsonError(await run(["run", "--json", "--timeout", "abc", "1"], { home }), "usage", 2);
      expectJsonError(await run(["-s", "bad name", "run", "--json", "1"], { home }), "usage", 2);
      expectJsonError(await run(["run", "--json", "-f", "/nonexistent/cell.py"], { home }), "usage", 2);
      expectJsonError(await run(["run", "--json", "1"], { home, env: { AWREPL_PYTHON: "/nonexistent/python" } }), "no_interpreter", 125);
      mkdirSync(join(home, "supervisor.sock"));
      expectJsonError(await run(["-s", "a", "run", "--json", "1"], { home }), "supervisor_unreachable", 125);
      // After `--`, "--json" is the cell's text, not the flag.
      const cell = await run(["run", "--", "--json"], { home });
      expect(cell.code).toBe(1);
      expect(cell.stdout).toBe("");
    }), 60_000);
});

describe("--version and --help", () => {
  test("--version prints the package version", () =>
    withHome(async (home) => {
      const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
      const r = await run(["--version"], { home });
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`${version}\n`);
    }), 30_000);

  test("--help shows the commands and copyable examples, heredoc included", () =>
    withHome(async (home) => {
      const r = await run(["--help"], { home });
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("run [options] [code]");
      expect(r.stdout).toContain("<<'EOF'");
      expect(r.stdout).toContain("Exit status");
      const sub = await run(["run", "--help"], { home });
      expect(sub.code).toBe(0);
      expect(sub.stdout).toContain("--max-output");
    }), 30_000);
});
