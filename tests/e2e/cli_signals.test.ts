// Timeouts and Ctrl-C through the compiled binary: exit statuses 124 and 130, and nothing left running.
import { describe, expect, test } from "bun:test";
import { processesOf, run, start, waitForNoProcesses, withHome } from "../harness/mod.ts";

describe("awrepl run: stopping a cell", () => {
  test("--timeout stops a runaway C loop: exit 124, quickly, no process left", () =>
    withHome(async (home) => {
      const r = await run(["run", "--timeout", "500", "sum(range(10**12))"], { home, timeoutMs: 20_000 });
      expect(r.code).toBe(124);
      // Deadline 0.5 s + grace 2 s + start-up; far below the minutes the loop would take.
      expect(r.ms).toBeLessThan(15_000);
      expect(r.stderr.toLowerCase()).toContain("timeout");
      expect(await waitForNoProcesses(home)).toEqual([]);
    }), 30_000);

  test("--timeout in --json mode: status timeout", () =>
    withHome(async (home) => {
      const r = await run(["run", "--json", "--timeout", "300", "import time\nwhile True: time.sleep(0.01)"], { home, timeoutMs: 20_000 });
      expect(r.code).toBe(124);
      expect(JSON.parse(r.stdout).status).toBe("timeout");
    }), 30_000);

  test("Ctrl-C (SIGINT to awrepl) interrupts `while True: pass`: exit 130, no process left", () =>
    withHome(async (home) => {
      const p = await start(["run", "print('started', flush=True)\nwhile True: pass"], { home, timeoutMs: 20_000 });
      await p.waitForStdout("started\n", 15_000);
      expect(processesOf(home).length).toBeGreaterThan(0);
      p.child.kill("SIGINT");
      const r = await p.result;
      expect(r.timedOut).toBe(false);
      expect(r.code).toBe(130);
      expect(r.stderr).toContain("KeyboardInterrupt");
      expect(await waitForNoProcesses(home)).toEqual([]);
    }), 30_000);

  test("Ctrl-C on a C loop that ignores it: the ephemeral worker is ended after the grace period", () =>
    withHome(async (home) => {
      const p = await start(["run", "import time\nprint('busy', flush=True)\ntime.sleep(0.3)  # lets the runtime ship the line before C code holds the GIL\nsum(range(10**12))"], {
        home,
        timeoutMs: 25_000,
      });
      await p.waitForStdout("busy\n", 15_000);
      await Bun.sleep(800); // past the sleep: the cell is now inside sum()
      const sent = performance.now();
      p.child.kill("SIGINT");
      const r = await p.result;
      expect(r.timedOut).toBe(false);
      expect(r.code).toBe(130);
      expect(r.stderr).toContain("did not stop within");
      // Grace 2 s + close ≤ 1 s, with room for a loaded machine; the cell's own timeout is 30 s.
      expect(performance.now() - sent).toBeLessThan(15_000);
      expect(await waitForNoProcesses(home)).toEqual([]);
    }), 30_000);

  test("--json: a cell ended after ignoring Ctrl-C is still one JSON object, status interrupted", () =>
    withHome(async (home) => {
      const p = await start(["run", "--json", "import time\ntime.sleep(0.3)\nsum(range(10**12))"], { home, timeoutMs: 25_000 });
      await Bun.sleep(1500); // start-up and the sleep are over: the cell is inside sum()
      p.child.kill("SIGINT");
      const r = await p.result;
      expect(r.code).toBe(130);
      expect(r.stdout.trimEnd().split("\n")).toHaveLength(1);
      const result = JSON.parse(r.stdout) as { duration_ms: number };
      expect(result).toMatchObject({ status: "interrupted", session: null });
      // Rounded to 0.1 ms like every result the worker's cells get (lib/core/units.ts durationMs).
      expect(result.duration_ms).toBeGreaterThan(1000);
      expect(Math.round(result.duration_ms * 10) / 10).toBe(result.duration_ms);
      expect(await waitForNoProcesses(home)).toEqual([]);
    }), 30_000);

  test("a second Ctrl-C stops waiting at once and leaves no process", () =>
    withHome(async (home) => {
      const p = await start(["run", "import time\nprint('busy', flush=True)\ntime.sleep(0.3)  # lets the runtime ship the line before C code holds the GIL\nsum(range(10**12))"], {
        home,
        timeoutMs: 25_000,
      });
      await p.waitForStdout("busy\n", 15_000);
      await Bun.sleep(800);
      p.child.kill("SIGINT");
      await Bun.sleep(200);
      p.child.kill("SIGINT");
      const r = await p.result;
      expect(r.code).toBe(130);
      expect(await waitForNoProcesses(home)).toEqual([]);
    }), 30_000);
});
