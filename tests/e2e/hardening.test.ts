// The hardening round (issue 15), end to end through the compiled binary: what an outside tester found
// wrong in text-mode output, in the reports of a lost worker, in calls queued behind a busy session,
// in what 0 means, and in the errors and exit statuses of oversized cells, closed sessions, a --python
// a live session ignores, a missing working directory and a full disk.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExecResult } from "../../lib/protocol/result.ts";
import { CAN_MOUNT_TMPFS, run, type Running, start, waitFor, withFullDisk, withHome } from "../harness/mod.ts";

/** A cell that prints a coloured line, pauses, then prints a plain one, on `stream`. */
function colourCell(stream: "stdout" | "stderr"): string {
  return `import sys, time\nprint('\\x1b[1mA\\x1b[0m', file=sys.${stream}, flush=True); time.sleep(0.1); print('B', file=sys.${stream})`;
}

describe("text-mode output holds every chunk once, in order (item 1)", () => {
  for (const stream of ["stdout", "stderr"] as const) {
    test(`an ANSI escape on ${stream}: ephemeral and named`, () =>
      withHome(async (home) => {
        for (const args of [["run"], ["-s", "colour", "run"]]) {
          const r = await run([...args, colourCell(stream)], { home });
          expect(r.code).toBe(0);
          expect(r[stream]).toBe("\x1b[1mA\x1b[0m\nB\n");
        }
      }), 30_000);
  }

  test("a NUL and other control characters", () =>
    withHome(async (home) => {
      const r = await run(["-s", "ctl", "run", "import time\nprint('a\\x00b\\x07', flush=True); time.sleep(0.05); print('c')"], { home });
      expect(r.stdout).toBe("a\x00b\x07\nc\n");
    }), 30_000);
});

test("output a background thread wrote between cells opens the next cell's output once (item 2)", () =>
  withHome(async (home) => {
    const go = join(home, "go");
    const done = join(home, "done");
    const first = await run(
      [
        "-s",
        "bg",
        "run",
        `import os, threading, time\ndef later():\n    while not os.path.exists(${JSON.stringify(go)}): time.sleep(0.01)\n    print('BG', flush=True)\n    open(${
          JSON.stringify(done)
        }, 'w').close()\nthreading.Thread(target=later, daemon=True).start()`,
      ],
      { home },
    );
    expect(first.code).toBe(0);
    writeFileSync(go, "");
    await waitFor(() => existsSync(done), 10_000, "the thread to print");
    const next = await run(["-s", "bg", "run", "print('cell')"], { home });
    expect(next.stdout).toBe("BG\ncell\n");
  }), 30_000);

describe("a worker death is reported once (item 4)", () => {
  test("--json: the loss in notice and restored only; the exception names the death; stderr is the cell's", () =>
    withHome(async (home) => {
      await run(["-s", "d", "run", "n = 10"], { home });
      expect((await run(["-s", "d", "snapshot"], { home })).code).toBe(0);
      const r = await run(["-s", "d", "run", "--json", "import sys, os\nprint('last words', file=sys.stderr, flush=True)\nos._exit(3)"], { home });
      expect(r.code).toBe(125);
      const result = JSON.parse(r.stdout) as ExecResult;
      expect(result.status).toBe("died");
      expect(result.stderr).toBe("last words\n");
      expect(result.exception).toBe("WorkerDied: The Python worker exited with code 3");
      expect(result.notice).toContain("went back to its snapshot of");
      expect(result.restored?.restored).toEqual(["n"]);
      expect(JSON.stringify(result).split("snapshot of").length - 1).toBe(1);
    }), 30_000);

  test("text: the restore is said once, the death once, the exception last", () =>
    withHome(async (home) => {
      await run(["-s", "d", "run", "n = 10"], { home });
      await run(["-s", "d", "snapshot"], { home });
      const r = await run(["-s", "d", "run", "import os; os._exit(3)"], { home });
      expect(r.code).toBe(125);
      const lines = r.stderr.trimEnd().split("\n");
      expect(lines.filter((l) => l.includes("restored")).length).toBe(1);
      expect(lines.filter((l) => l.includes("exited with code 3")).length).toBe(1);
      expect(lines.at(-1)).toBe("WorkerDied: The Python worker exited with code 3");
      expect((await run(["-s", "d", "run", "n"], { home })).stdout).toBe("10\n");
    }), 30_000);

  test("without a snapshot: the state's loss is said once", () =>
    withHome(async (home) => {
      const r = await run(["-s", "d", "run", "import os; os._exit(3)"], { home });
      expect(r.code).toBe(125);
      expect(r.stderr.split("state was lost").length - 1).toBe(1);
      const json = JSON.parse((await run(["-s", "d", "run", "--json", "import os; os._exit(4)"], { home })).stdout) as ExecResult;
      expect(json.stderr).toBe("");
      expect(json.exception).toBe("WorkerDied: The Python worker exited with code 4");
      expect(json.notice).toContain("state was lost");
    }), 30_000);
});

/**
 * Runs `args` (a call to session `busy`) while another cell holds that session, after `act` (given the
 * queued process once its call waits in the queue; none: the call runs to its end meanwhile); then
 * lets the holding cell end. Resolves the queued call's result.
 */
async function queuedBehindBusy(home: string, args: string[], act?: (queued: Running) => Promise<void>) {
  const release = join(home, "release");
  const code = `import os, time\nprint('holding', flush=True)\nwhile not os.path.exists(${JSON.stringify(release)}): time.sleep(0.02)`;
  const holder = await start(["-s", "busy", "run", "--timeout", "0", code], { home, timeoutMs: 60_000 });
  try {
    await holder.waitForStdout("holding\n", 20_000);
    const queued = await start(["-s", "busy", "run", ...args], { home, timeoutMs: 20_000 });
    if (act) {
      await waitFor(() => listQueued(home) === 1, 10_000, "the call to queue");
      await act(queued);
    }
    return await queued.result;
  } finally {
    writeFileSync(release, "");
    await holder.result;
  }
}

/** Whether the cell `ran = True` ran in session `busy`. */
async function ran(home: string): Promise<boolean> {
  return (await run(["-s", "busy", "run", "'ran' in globals()"], { home })).stdout === "True\n";
}

describe("a call queued behind a busy session (items 12, 16)", () => {
  test("its --timeout covers the wait: status timeout, exit 124, and the cell never ran", () =>
    withHome(async (home) => {
      const queued = await queuedBehindBusy(home, ["--json", "--timeout", "500", "ran = True"]);
      expect(queued.code).toBe(124);
      const result = JSON.parse(queued.stdout) as ExecResult;
      expect(result.status).toBe("timeout");
      expect(result.exception).toContain("never ran");
      expect(result.exception).toContain("500 ms");
      expect(await ran(home)).toBe(false);
    }), 60_000);

  test("text mode says it too", () =>
    withHome(async (home) => {
      const queued = await queuedBehindBusy(home, ["--timeout", "300", "1"]);
      expect(queued.code).toBe(124);
      expect(queued.stdout).toBe("");
      expect(queued.stderr).toContain("never ran");
    }), 60_000);

  test("Ctrl-C on a queued call exits 130 and the cell never runs", () =>
    withHome(async (home) => {
      const r = await queuedBehindBusy(home, ["--json", "ran = True"], async (queued) => void queued.child.kill("SIGINT"));
      expect(r.code).toBe(130);
      const result = JSON.parse(r.stdout) as ExecResult;
      expect(result.status).toBe("interrupted");
      expect(result.exception).toContain("never ran");
      expect(await ran(home)).toBe(false);
    }), 60_000);

  test("a queued call whose session is closed under it is not a usage error", () =>
    withHome(async (home) => {
      const r = await queuedBehindBusy(home, ["--json", "1"], async () => {
        expect((await run(["close", "busy"], { home })).code).toBe(0);
      });
      expect(r.code).toBe(125);
      const error = (JSON.parse(r.stdout) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("session_closed");
      expect(error.message).toContain("closed before this call ran");
    }), 60_000);
});

/** Calls queued in session `busy`, from `sessions --json`, synchronously (for waitFor). */
function listQueued(home: string): number {
  const r = Bun.spawnSync([join(import.meta.dir, "../../dist/awrepl"), "sessions", "--json"], { env: { ...process.env, AWREPL_HOME: home, AWREPL_E2E_HOME: home } });
  const rows = JSON.parse(r.stdout.toString() || "[]") as { name: string; queued: number }[];
  return rows.find((row) => row.name === "busy")?.queued ?? 0;
}

describe("0 means no limit, for --max-output too (item 14)", () => {
  test("--max-output 0 keeps everything, ephemeral and named, live and in --json", () =>
    withHome(async (home) => {
      for (const args of [["run"], ["-s", "zero", "run"]]) {
        const text = await run([...args, "--max-output", "0", "print('x' * 100000)\n'v' * 70000"], { home });
        expect(text.code).toBe(0);
        expect(text.stdout).toBe(`${"x".repeat(100000)}\n'${"v".repeat(70000)}'\n`);
        const json = JSON.parse((await run([...args, "--json", "--max-output", "0", "print('hi')"], { home })).stdout) as ExecResult;
        expect(json).toMatchObject({ stdout: "hi\n", truncated: false, truncated_bytes: 0 });
      }
    }), 30_000);
});

test("a cell over the supervisor's line limit gets its clear error, exit 2 (item 15)", () =>
  withHome(async (home) => {
    const file = join(home, "big.py");
    writeFileSync(file, `x = "${"a".repeat(65 * 1024 * 1024)}"\n`);
    try {
      const r = await run(["-s", "big", "run", "-f", file], { home, timeoutMs: 60_000 });
      expect(r.stderr).toContain("longer than 67108864 bytes");
      expect(r.stderr).not.toContain("unreachable");
      expect(r.code).toBe(2);
      // The supervisor lives on.
      expect((await run(["-s", "big", "run", "1 + 1"], { home })).stdout).toBe("2\n");
    } finally {
      rmSync(file, { force: true });
    }
  }), 60_000);

test("--python for a live session is not ignored silently (item 17)", () =>
  withHome(async (home) => {
    expect((await run(["-s", "py", "run", "1"], { home })).code).toBe(0);
    const r = await run(["-s", "py", "--python", "/nonexistent/python9", "run", "2"], { home });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("2\n");
    expect(r.stderr).toContain("/nonexistent/python9");
    expect(r.stderr).toContain("Session py keeps its interpreter");
    expect(r.stderr).toContain("awrepl close py");
    const json = JSON.parse((await run(["-s", "py", "--python", "/nonexistent/python9", "run", "--json", "3"], { home })).stdout) as ExecResult;
    expect(json.notice).toContain("Session py keeps its interpreter");
    // The same interpreter again, or none given: nothing to say.
    const plain = await run(["-s", "py", "run", "4"], { home });
    expect(plain.stderr).toBe("");
  }), 30_000);

// A real full disk is a tiny tmpfs, which only root on Linux can mount (CI runs as root).
describe.skipIf(!CAN_MOUNT_TMPFS)("a full disk at start-up (item 19)", () => {
  test("a clear error, and no lock, temporary or log file left behind", () =>
    withFullDisk(async (home) => {
      for (const args of [["-s", "full", "run", "1"], ["run", "1"]]) {
        const r = await run(args, { home, timeoutMs: 30_000 });
        expect(r.code).toBe(125);
        expect(r.stderr).toContain("no space left on device");
        // (An empty runtime cache directory may stay: it is the state directory's own.)
        expect(readdirSync(home).filter((n) => n !== "runtime")).toEqual([]);
      }
    }), 60_000);
});
