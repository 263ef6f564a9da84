// `awrepl --session NAME run` through the supervisor, end to end: state across processes, the ways to
// name a session, live output, and Ctrl-C that interrupts the cell but keeps the session.
import { describe, expect, test } from "bun:test";
import { run, start, withHome } from "../harness/mod.ts";

describe("awrepl --session NAME run", () => {
  test("a variable survives between separate awrepl processes; -s before or after run; AWREPL_SESSION", () =>
    withHome(async (home) => {
      const set = await run(["-s", "agent", "run", "x = 41"], { home });
      expect(set.code).toBe(0);
      expect(set.stdout).toBe("");
      const after = await run(["run", "x + 1", "--session", "agent"], { home });
      expect(after.stdout).toBe("42\n");
      const viaEnv = await run(["run", "x"], { home, env: { AWREPL_SESSION: "agent" } });
      expect(viaEnv.stdout).toBe("41\n");
      // Another name is another namespace; no name at all is a throwaway interpreter.
      const other = await run(["-s", "other", "run", "x"], { home });
      expect(other.code).toBe(1);
      expect(other.stderr.trimEnd().split("\n").at(-1)).toBe("NameError: name 'x' is not defined");
      const ephemeral = await run(["run", "'x' in globals()"], { home });
      expect(ephemeral.stdout).toBe("False\n");
    }), 30_000);

  test("--json reports the session's name", () =>
    withHome(async (home) => {
      const r = await run(["-s", "named", "run", "--json", "1 + 1"], { home });
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ status: "ok", value: "2", session: "named" });
    }), 30_000);

  test("output streams live while the cell runs", () =>
    withHome(async (home) => {
      const p = await start(["-s", "live", "run", "import time\nprint('first', flush=True)\ntime.sleep(30)\nprint('never')"], { home, timeoutMs: 40_000 });
      // "first" arrives long before the cell could end: it was streamed, not printed with the result.
      await p.waitForStdout("first\n", 15_000);
      p.child.kill("SIGINT");
      const r = await p.result;
      expect(r.code).toBe(130);
      expect(r.stdout).toBe("first\n");
    }), 30_000);

  test("Ctrl-C interrupts the cell, exits 130, and the session keeps its state", () =>
    withHome(async (home) => {
      expect((await run(["-s", "keep", "run", "kept = 'yes'"], { home })).code).toBe(0);
      const p = await start(["-s", "keep", "run", "print('spinning', flush=True)\nwhile True: pass"], { home, timeoutMs: 20_000 });
      await p.waitForStdout("spinning\n", 15_000);
      p.child.kill("SIGINT");
      const r = await p.result;
      expect(r.timedOut).toBe(false);
      expect(r.code).toBe(130);
      expect(r.stderr).toContain("KeyboardInterrupt");
      const after = await run(["-s", "keep", "run", "kept"], { home });
      expect(after.stdout).toBe("'yes'\n");
    }), 30_000);

  test("a timeout in a named session exits 124 and the session answers the next call", () =>
    withHome(async (home) => {
      const r = await run(["-s", "slow", "run", "--timeout", "300", "sum(range(10**12))"], { home, timeoutMs: 20_000 });
      expect(r.code).toBe(124);
      const next = await run(["-s", "slow", "run", "2 + 2"], { home });
      expect(next.code).toBe(0);
      expect(next.stdout).toBe("4\n");
    }), 30_000);

  test("live output under --max-output shows exactly the text the result keeps", () =>
    withHome(async (home) => {
      const cell = "import sys\nfor i in range(200):\n    print(f'line {i}')\n    if i % 50 == 0: print(f'warn {i}', file=sys.stderr)";
      const text = await run(["-s", "trunc", "run", "--max-output", "300", cell], { home });
      const json = JSON.parse((await run(["-s", "trunc", "run", "--json", "--max-output", "300", cell], { home })).stdout);
      expect(json.truncated).toBe(true);
      expect(text.code).toBe(0);
      // The same cell twice: the same kept text, whether streamed live (text) or returned (JSON).
      expect(text.stdout).toBe(json.stdout);
      expect(text.stderr).toBe(json.stderr);
      expect(text.stdout).toContain("bytes truncated]");
      expect(text.stdout).toStartWith("line 0\n");
      expect(text.stdout).toEndWith("line 199\n");
    }), 30_000);
});
