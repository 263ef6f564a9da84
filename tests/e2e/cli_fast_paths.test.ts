// The commands main() answers without commander (lib/cli/program.ts: --version, the help texts built
// at build time, vars, sessions) print exactly what commander prints for the same command. `-s x`
// (or `--python` naming the session's own interpreter) in front keeps a command off the fast paths (lib/cli/program.test.ts pins which forms
// are fast), so each pair below is "fast path" against "commander" in the compiled binary.
import { describe, expect, test } from "bun:test";
import { PYTHON, run, withHome } from "../harness/mod.ts";

/** Every command of the program, as `awrepl --help` lists it (not commander's own `help`). */
function commandsOf(help: string): string[] {
  const section = help.slice(help.indexOf("Commands:")).split("\n\n")[0] as string;
  const names = section
    .split("\n")
    .slice(1)
    .map((l) => /^ {2}([a-z][\w-]*)/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined && n !== "help");
  return [...new Set(names)];
}

describe("fast paths print what commander prints", () => {
  test("--help, -h, help, help CMD, CMD --help, CMD -h: the help texts made at build time are commander's", () =>
    withHome(async (home) => {
      const viaCommander = await run(["-s", "x", "--help"], { home });
      expect(viaCommander.code).toBe(0);
      for (const form of [["--help"], ["-h"], ["help"]]) {
        const fast = await run(form, { home });
        expect({ form, code: fast.code, stdout: fast.stdout, stderr: fast.stderr }).toEqual({ form, code: 0, stdout: viaCommander.stdout, stderr: "" });
      }
      const commands = commandsOf(viaCommander.stdout);
      expect(commands).toEqual(expect.arrayContaining(["run", "vars", "sessions", "daemon", "mcp", "wait", "completion", "trust"]));
      for (const cmd of commands) {
        const expected = await run(["-s", "x", cmd, "--help"], { home });
        expect(expected.code).toBe(0);
        for (const form of [[cmd, "--help"], [cmd, "-h"], ["help", cmd]]) {
          const fast = await run(form, { home });
          expect({ form, code: fast.code, stdout: fast.stdout }).toEqual({ form, code: 0, stdout: expected.stdout });
        }
      }
    }), 240_000);

  test("--version and -V", () =>
    withHome(async (home) => {
      const expected = await run(["-s", "x", "--version"], { home });
      expect(expected.code).toBe(0);
      for (const form of [["--version"], ["-V"]]) expect(await run(form, { home })).toMatchObject({ code: 0, stdout: expected.stdout, stderr: "" });
    }), 30_000);

  test("vars and sessions, and their errors", () =>
    withHome(async (home) => {
      expect((await run(["-s", "a", "run", "x = 41\nname = 'awrepl'"], { home })).code).toBe(0);
      // The session's age, idle time and memory tick between two calls: compared without them.
      const steady = (stdout: string) => stdout.replace(/"(age_ms|idle_ms|rss_bytes)":\d+/g, '"$1":0');
      for (
        const [fast, viaCommander] of [
          [["-s", "a", "vars"], ["--python", PYTHON, "-s", "a", "vars"]],
          [["vars", "--session=a", "--json"], ["--python", PYTHON, "vars", "--session=a", "--json"]],
          [["sessions", "--json"], ["--python", PYTHON, "sessions", "--json"]],
          [["vars"], ["--python", PYTHON, "vars"]], // no session: a usage error
          [["-s", "nosuch", "vars"], ["--python", PYTHON, "-s", "nosuch", "vars"]], // session_not_found
        ]
      ) {
        const a = await run(fast as string[], { home });
        const b = await run(viaCommander as string[], { home });
        expect({ argv: fast, code: a.code, stdout: steady(a.stdout), stderr: a.stderr }).toEqual({ argv: fast, code: b.code, stdout: steady(b.stdout), stderr: b.stderr });
      }
      const vars = await run(["-s", "a", "vars", "--json"], { home });
      expect(JSON.parse(vars.stdout)).toMatchObject({ x: "int: 41", name: "str: 'awrepl'" });
      // The table's ages and idle times tick: compare its shape, not the numbers.
      const table = await run(["sessions"], { home });
      expect(table.code).toBe(0);
      expect(table.stdout).toMatch(/^NAME +PID +STATE .*\na +\d+ +idle /);
      await run(["daemon", "stop"], { home });
    }), 120_000);
});
