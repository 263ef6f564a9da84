// Long cells from a shell: `run --detach` prints the cell's id at once and the cell runs on after the
// command exits; `status ID` says running or finished and for how long; `wait ID` prints its result
// with run's exit status. Units, --json on the verbs that print, and `sessions` showing the real
// interpreter are checked here too (the command line of issue 25).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, realpathSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExitCode } from "../../lib/core/errors.ts";
import { PYTHON, run, withHome } from "../harness/mod.ts";

const cwd = tmpdir();

describe("run --detach, status, wait", () => {
  test("the id comes back at once; status says running, then finished; wait prints the result; an unknown id is refused", async () => {
    await withHome(async (home) => {
      const started = await run(["-s", "d", "run", "--detach", "import time\ntime.sleep(1.5)\nprint('slept')\n6*7"], { home, cwd });
      expect(started.code).toBe(0);
      const id = started.stdout.trim();
      expect(id).toMatch(/^c[a-z0-9]+$/);
      const running = await run(["-s", "d", "status", id, "--json"], { home, cwd });
      expect(JSON.parse(running.stdout)).toMatchObject({ id, state: "running" });
      const waited = await run(["-s", "d", "wait", id, "--timeout", "20s"], { home, cwd });
      expect(waited).toMatchObject({ code: 0, stdout: "slept\n42\n" });
      const done = await run(["-s", "d", "status", id], { home, cwd });
      expect(done.stdout).toContain(`${id}: finished (ok)`);
      // The result stays (within the key's bounds): a second wait gets it again.
      expect((await run(["-s", "d", "wait", id, "--json"], { home, cwd })).stdout).toContain('"value":"42"');
      const json = await run(["-s", "d", "run", "--detach", "--json", "--id", "mine", "1/0"], { home, cwd });
      expect(JSON.parse(json.stdout)).toMatchObject({ id: "mine", state: "running" });
      expect((await run(["-s", "d", "wait", "mine"], { home, cwd })).code).toBe(ExitCode.cellRaised);
      // The output so far, while it runs (bounded), from another process.
      const printing = await run(["-s", "d", "run", "--detach", "--id", "loud", "import time\nfor i in range(3): print('line', i, flush=True)\ntime.sleep(2)\n'end'"], { home, cwd });
      expect(printing.stdout).toBe("loud\n");
      let soFar = "";
      for (const giveUpAt = Date.now() + 10_000; !soFar.includes("line 2") && Date.now() < giveUpAt; await Bun.sleep(100)) {
        soFar = (await run(["-s", "d", "status", "loud", "--output"], { home, cwd })).stdout;
      }
      expect(soFar).toContain("loud: running for");
      expect(soFar).toContain("line 0\nline 1\nline 2\n");
      expect((await run(["-s", "d", "status", "--output"], { home, cwd })).code).toBe(ExitCode.usage);
      expect((await run(["-s", "d", "wait", "loud"], { home, cwd })).stdout).toBe("line 0\nline 1\nline 2\n'end'\n");
      const unknown = await run(["-s", "d", "status", "nope"], { home, cwd });
      expect(unknown.code).toBe(ExitCode.usage);
      expect(unknown.stderr).toContain('"nope"');
      expect((await run(["run", "--detach", "1"], { home, cwd })).code).toBe(ExitCode.usage);
    });
  });
});

describe("the command line", () => {
  test("durations and sizes take units; a bad one is named", async () => {
    await withHome(async (home) => {
      const slow = await run(["run", "--timeout", "1s", "import time; time.sleep(30)"], { home, cwd });
      expect(slow.code).toBe(ExitCode.timeout);
      const cut = await run(["-s", "u", "run", "--max-output", "1K", "print('x' * 5000)"], { home, cwd });
      expect(cut.code).toBe(0);
      expect(cut.stdout.length).toBeLessThan(2000);
      const bad = await run(["-s", "u", "run", "--timeout", "5 parsecs", "1"], { home, cwd });
      expect(bad.code).toBe(ExitCode.usage);
      expect(bad.stderr).toContain('"5 parsecs"');
      expect((await run(["run", "--max-output", "30s", "1"], { home, cwd })).stderr).toContain("must be a size");
    });
  });

  test("--json on reset, interrupt, close, daemon logs, trust; refused on completion with the reason", async () => {
    await withHome(async (home) => {
      expect((await run(["-s", "j", "run", "x = 1"], { home, cwd })).code).toBe(0);
      expect(JSON.parse((await run(["-s", "j", "reset", "--json"], { home, cwd })).stdout)).toEqual({ session: "j", reset: true });
      expect(JSON.parse((await run(["-s", "j", "interrupt", "--json"], { home, cwd })).stdout)).toEqual({ session: "j", interrupted: false });
      const logs = JSON.parse((await run(["daemon", "logs", "--json", "-n", "3"], { home, cwd })).stdout) as { path: string; lines: string[] };
      expect(logs.path).toBe(join(home, "supervisor.log"));
      expect(logs.lines.length).toBeGreaterThan(0);
      expect(JSON.parse((await run(["close", "j", "--json"], { home, cwd })).stdout)).toEqual({ closed: ["j"], unsaved: [] });
      const project = mkdtempSync(join(tmpdir(), "awrepl-trust-"));
      await Bun.write(join(project, "awrepl.jsonc"), "{}");
      expect(JSON.parse((await run(["trust", project, "--json"], { home, cwd })).stdout)).toMatchObject({ file: join(project, "awrepl.jsonc"), trusted: true });
      expect(JSON.parse((await run(["trust", project, "--revoke", "--json"], { home, cwd })).stdout)).toMatchObject({ revoked: true });
      const completion = await run(["completion", "bash", "--json"], { home, cwd });
      expect(completion.code).toBe(ExitCode.usage);
      expect(completion.stderr).toContain("shell script");
    });
  });

  test("sessions shows the interpreter the worker runs, symlinks resolved, not the command it came from", async () => {
    await withHome(async (home) => {
      const dir = mkdtempSync(join(tmpdir(), "awrepl-shim-"));
      const link = join(dir, "python3");
      symlinkSync(PYTHON, link);
      expect((await run(["-s", "i", "--python", link, "run", "1"], { home, cwd })).code).toBe(0);
      const [row] = JSON.parse((await run(["sessions", "--json"], { home, cwd })).stdout) as { python: string; python_command: string }[];
      expect(row?.python.startsWith(`${realpathSync(PYTHON)} (`)).toBe(true);
      expect(row?.python).not.toContain(dir);
      expect(row?.python_command).toBe(link);
    });
  });
});
