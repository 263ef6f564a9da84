// Persistence through the compiled binary: a session's state outlives its supervisor (daemon stop,
// SIGTERM), comes back on the next use and says so; what cannot be pickled is reported; a corrupt
// snapshot is moved aside; autosave brings a session back to its last good state after a timeout kill;
// close forgets, close --keep keeps; snapshot and restore to paths of the caller's choosing.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExecResult } from "../../lib/protocol/result.ts";
import { processesOf, PYTHON, run, waitForNoProcesses, withHome } from "../harness/mod.ts";

/** The test interpreter without site-packages, so without dill: the stdlib pickle fallback, on any machine. */
const NO_DILL_PYTHON = `${PYTHON} -S`;

async function ok(args: string[], home: string, env?: Record<string, string>): Promise<string> {
  const r = await run(args, { home, env });
  if (r.code !== 0) throw new Error(`awrepl ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

async function json(args: string[], home: string, env?: Record<string, string>): Promise<ExecResult> {
  const r = await run([...args, "--json"], { home, env });
  return JSON.parse(r.stdout) as ExecResult;
}

/** What every restore at start says (its snapshot's age), and all it says when the state was saved at the session's end. */
const cameBack = (name: string) =>
  new RegExp(`^Session ${name} came back from its snapshot of \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC \\(\\d+ s old\\): cells run after that snapshot are not in it\\.$`);

/** `daemon stop` that saved every session (names it could not save are listed, and are no failure). */
async function stopDaemon(home: string): Promise<void> {
  const r = await run(["daemon", "stop"], { home });
  expect(r.stderr).toStartWith("Supervisor stopped\n");
  expect(r.stderr).not.toContain("NOT saved");
  expect(r.code).toBe(0);
}

describe("state survives the supervisor", () => {
  test("variables survive daemon stop; the next use restores them and says so on stderr", () =>
    withHome(async (home) => {
      await ok(["-s", "a", "run", "x = 41\nimport json\ndata = json.loads('{\"k\": [1, 2]}')"], home);
      await stopDaemon(home);
      expect(existsSync(join(home, "snapshots", "a", "snapshot.pkl"))).toBe(true);
      expect(existsSync(join(home, "snapshots", "a", "snapshot.json"))).toBe(true);
      expect(await ok(["sessions"], home)).toBe("No sessions running\nSaved, restored on next use: a\n");
      const r = await run(["-s", "a", "run", "x + 1, data['k']"], { home });
      expect(r.code).toBe(0);
      expect(r.stdout).toBe("(42, [1, 2])\n");
      // The restore's line, and the snapshot's age: whoever reads it knows what may be missing.
      const [restored, age, ...rest] = r.stderr.split("\n");
      expect(restored).toBe(`awrepl: restored 3 name(s) from ${join(home, "snapshots", "a", "snapshot.pkl")}`);
      expect(age?.replace(/^awrepl: /, "")).toMatch(cameBack("a"));
      expect(rest).toEqual([""]);
      // Said once.
      expect((await run(["-s", "a", "run", "x"], { home })).stderr).toBe("");
    }), 60_000);

  test("--json has the restored field; functions, lambdas and classes come back (dill)", () =>
    withHome(async (home) => {
      await ok(["-s", "fn", "run", "def square(n):\n    return n * n\ninc = lambda n: n + 1\nclass Box:\n    def __init__(self, v): self.v = v\nb = Box(5)"], home);
      await stopDaemon(home);
      const r = await json(["-s", "fn", "run", "square(inc(b.v))"], home);
      expect(r.value).toBe("36");
      expect(r.restored).toEqual({ source: join(home, "snapshots", "fn", "snapshot.pkl"), restored: ["Box", "b", "inc", "square"], failed: [] });
    }), 60_000);

  test("without dill, pickle saves the data and the cell's functions are reported as not saved", () =>
    withHome(async (home) => {
      const env = { AWREPL_PYTHON: NO_DILL_PYTHON };
      await ok(["-s", "nodill", "run", "import math\nnums = [1, 2]\ndef f(): return 1"], home, env);
      await stopDaemon(home);
      const r = await json(["-s", "nodill", "run", "math.prod(nums)"], home, env);
      expect(r.value).toBe("2");
      expect(r.restored?.restored).toEqual(["math", "nums"]);
      expect(r.restored?.failed).toEqual([{ name: "f", reason: "not in the snapshot: TypeError: pickle cannot save functions or classes defined in cells (dill can)" }]);
    }), 60_000);

  test("a socket and a generator are reported as not restored while the rest comes back", () =>
    withHome(async (home) => {
      const cell = "import socket\nsock = socket.socket()\ngen = (i for i in range(3))\nkept = {'a': 1}";
      await ok(["-s", "mixed", "run", cell], home);
      await ok(["-s", "mixed2", "run", cell], home);
      await stopDaemon(home);
      const r = await json(["-s", "mixed", "run", "kept['a'], 'sock' in globals(), 'gen' in globals()"], home);
      expect(r.value).toBe("(1, False, False)");
      expect(r.restored?.restored).toEqual(["kept", "socket"]);
      const failed = Object.fromEntries((r.restored?.failed ?? []).map((f) => [f.name, f.reason]));
      expect(Object.keys(failed).sort()).toEqual(["gen", "sock"]);
      expect(failed.sock).toContain("cannot pickle 'socket' object");
      expect(failed.gen).toContain("cannot pickle 'generator' object");
      // Text mode names them on the one stderr line.
      const text = await run(["-s", "mixed2", "run", "kept"], { home });
      expect(text.stderr).toContain("awrepl: restored 2 name(s) from");
      expect(text.stderr).toContain("could not restore gen, sock");
    }), 60_000);

  test("SIGTERM to the supervisor snapshots too, and leaves no worker behind", () =>
    withHome(async (home) => {
      await ok(["-s", "t", "run", "before = 'sigterm'"], home);
      const status = JSON.parse(await ok(["daemon", "status", "--json"], home)) as { pid: number };
      process.kill(status.pid, "SIGTERM");
      const deadline = Date.now() + 15_000;
      while (processesOf(home).length > 0 && Date.now() < deadline) await Bun.sleep(50);
      expect(await waitForNoProcesses(home, 1000)).toEqual([]);
      expect(await ok(["-s", "t", "run", "before"], home)).toBe("'sigterm'\n");
    }), 60_000);
});

describe("idle sessions", () => {
  test("sessionIdleMs: an idle session is snapshotted and closed, and its next use restores it", () =>
    withHome(async (home) => {
      writeFileSync(join(home, "config.jsonc"), '{ "sessionIdleMs": 600 } // park sessions idle for 0.6 s\n');
      await ok(["-s", "nap", "run", "dream = 'kept'"], home);
      const deadline = Date.now() + 15_000;
      let rows: unknown[] = [{}];
      while (Date.now() < deadline) {
        rows = JSON.parse(await ok(["sessions", "--json"], home)) as unknown[];
        if (rows.length === 0) break;
        await Bun.sleep(200);
      }
      expect(rows).toEqual([]);
      expect(existsSync(join(home, "snapshots", "nap", "snapshot.pkl"))).toBe(true);
      const r = await json(["-s", "nap", "run", "dream"], home);
      expect(r.value).toBe("'kept'");
      expect(r.restored?.restored).toEqual(["dream"]);
      // Parked with its state saved: nothing is said but the snapshot's age.
      expect(r.notice).toMatch(cameBack("nap"));
    }), 60_000);
});

describe("size caps", () => {
  test("config caps: an oversized name is reported by the restore, the rest comes back", () =>
    withHome(async (home) => {
      writeFileSync(join(home, "config.jsonc"), '{ "snapshotMaxVariableBytes": 100000 }\n');
      await ok(["-s", "caps", "run", "huge = b'x' * 200_000\nsmall = 'ok'"], home);
      await stopDaemon(home);
      const r = await json(["-s", "caps", "run", "small, 'huge' in globals()"], home);
      expect(r.value).toBe("('ok', False)");
      expect(r.restored?.failed).toEqual([{ name: "huge", reason: expect.stringContaining("exceeds max_variable_bytes 100000") }]);
    }), 60_000);
});

describe("snapshots that cannot be used", () => {
  test("a corrupt snapshot: a clear message, a fresh session, the file moved aside", () =>
    withHome(async (home) => {
      await ok(["-s", "c", "run", "x = 1"], home);
      await stopDaemon(home);
      const path = join(home, "snapshots", "c", "snapshot.pkl");
      writeFileSync(path, "not a pickle at all");
      const r = await run(["-s", "c", "run", "'x' in globals()"], { home });
      expect(r.code).toBe(0);
      expect(r.stdout).toBe("False\n");
      expect(r.stderr).toContain("awrepl: Session c could not be restored: corrupt snapshot");
      expect(r.stderr).toContain("moved aside to");
      expect(r.stderr).toContain("It starts fresh.");
      const aside = readdirSync(join(home, "snapshots", "c")).find((n) => n.startsWith("snapshot.pkl.corrupt-"));
      expect(aside).toBeDefined();
      expect(readFileSync(join(home, "snapshots", "c", aside!), "utf8")).toBe("not a pickle at all");
      // The session works, and its next snapshot goes where the bad one was.
      await ok(["-s", "c", "run", "y = 2"], home);
      await stopDaemon(home);
      expect(await ok(["-s", "c", "run", "y"], home)).toBe("2\n");
    }), 60_000);
});

describe("autosave", () => {
  test("a timeout kill with autosave comes back to the last good state", () =>
    withHome(async (home) => {
      // The session starts without autosave; `run --autosave` switches it on and it stays on.
      await ok(["-s", "auto", "run", "total = 0\ndef add(n):\n    global total\n    total += n"], home);
      await ok(["-s", "auto", "run", "--autosave", "add(1)"], home);
      for (const n of [2, 3]) await ok(["-s", "auto", "run", `add(${n})`], home);
      const killed = await run(["-s", "auto", "run", "--timeout", "500", "--json", "total = -100\nsum(range(10**12))"], { home });
      expect(killed.code).toBe(124);
      const result = JSON.parse(killed.stdout) as ExecResult;
      expect(result.status).toBe("timeout");
      expect(result.notice).toContain("went back to its snapshot of");
      expect(result.restored?.source).toBe(join(home, "snapshots", "auto", "snapshot.pkl"));
      expect(await ok(["-s", "auto", "run", "add(4)\ntotal"], home)).toBe("10\n");
    }), 60_000);

  test("AWREPL_AUTOSAVE=1 creates sessions that autosave: a SIGKILLed worker comes back", () =>
    withHome(async (home) => {
      const env = { AWREPL_AUTOSAVE: "1" };
      await ok(["-s", "env", "run", "kept = [1, 2, 3]"], home, env);
      const pid = Number(await ok(["-s", "env", "run", "import os; os.getpid()"], home));
      process.kill(pid, "SIGKILL");
      const r = await json(["-s", "env", "run", "kept"], home);
      expect(r.value).toBe("[1, 2, 3]");
      expect(r.notice).toContain("restored from its snapshot of");
      // (`os` too, unless the kill came before that cell's autosave, which runs after its result.)
      expect(r.restored?.restored).toContain("kept");
    }), 60_000);

  test("without autosave or a snapshot, a timeout kill says the state was lost", () =>
    withHome(async (home) => {
      await ok(["-s", "plain", "run", "x = 1"], home);
      const killed = await json(["-s", "plain", "run", "--timeout", "500", "sum(range(10**12))"], home);
      expect(killed.status).toBe("timeout");
      expect(killed.notice).toContain("The session's state was lost");
      expect(killed.restored).toBeUndefined();
    }), 60_000);
});

describe("close, snapshot and restore commands", () => {
  test("close forgets a session's snapshot; close --keep keeps it", () =>
    withHome(async (home) => {
      await ok(["-s", "gone", "run", "x = 1"], home);
      await ok(["-s", "kept", "run", "x = 2"], home);
      await ok(["close", "gone"], home);
      await ok(["close", "--keep", "kept"], home);
      expect(existsSync(join(home, "snapshots", "gone", "snapshot.pkl"))).toBe(false);
      expect(existsSync(join(home, "snapshots", "kept", "snapshot.pkl"))).toBe(true);
      expect(await ok(["-s", "gone", "run", "'x' in globals()"], home)).toBe("False\n");
      const back = await json(["-s", "kept", "run", "x"], home);
      expect(back.value).toBe("2");
      expect(back.restored?.restored).toEqual(["x"]);
      expect(back.notice).toMatch(cameBack("kept"));
      // With no supervisor running, close still forgets what daemon stop saved.
      await stopDaemon(home);
      await ok(["close", "kept"], home);
      expect(existsSync(join(home, "snapshots", "kept", "snapshot.pkl"))).toBe(false);
      const none = await run(["close", "kept"], { home });
      expect(none.code).not.toBe(0);
      expect(none.stderr).toContain('No session named "kept"');
    }), 60_000);

  test("snapshot PATH and restore PATH: relative to the caller's directory, reported in text and JSON", () =>
    withHome(async (home) => {
      await ok(["-s", "src", "run", "import socket\nshared = [1, 2]\nsock = socket.socket()"], home);
      const saved = await ok(["-s", "src", "snapshot", "mine.pkl"], home);
      expect(saved).toStartWith(`Saved 2 name(s) to ${join(home, "mine.pkl")}`);
      expect(saved).toContain("skipped sock: TypeError: cannot pickle 'socket' object");
      expect(existsSync(join(home, "mine.json"))).toBe(true);
      const restored = JSON.parse(await ok(["-s", "dst", "restore", "mine.pkl", "--json"], home));
      expect(restored.restored).toEqual(["shared", "socket"]);
      expect(restored.failed.map((f: { name: string }) => f.name)).toEqual(["sock"]);
      expect(await ok(["-s", "dst", "run", "shared"], home)).toBe("[1, 2]\n");
      const missing = await run(["-s", "dst", "restore", "nope.pkl"], { home });
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain(`No snapshot at ${join(home, "nope.pkl")}`);
    }), 60_000);
});
