// Persistence in the library: snapshots of a ReplSession, restore at start, going back to the latest
// snapshot after a timeout kill or a death, autosave, size caps, corrupt files. Real workers.
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { forgetClosedSession, persistentSessionOptions, snapshotBeforeStop } from "./persistence.ts";
import type { ReplSession } from "../session/session.ts";
import { defaultSnapshotPath, describeSnapshot, forgetSnapshot, manifestPath, moveAside, readManifest, readUnsaved, sweepTempFiles } from "../session/snapshot_files.ts";
import { PYTHON, pythonHas, rejection, useSessions, waitFor } from "../../tests/harness/mod.ts";

/** The test interpreter without site-packages, so without dill: the stdlib pickle fallback, on any machine. */
const NO_DILL_PYTHON = `${PYTHON} -S`;

const fixture = useSessions("p");
const start = fixture.start;

async function value(s: ReplSession, code: string): Promise<string | null> {
  const r = await s.execute(code);
  if (r.status !== "ok") throw new Error(`${code}: ${r.status} ${r.exception}`);
  return r.value;
}

describe("snapshot and restore at start", () => {
  test("a new session with restoreOnStart gets the names back and its first result says so", async () => {
    const a = await start();
    await a.execute("x = 41\nimport json\ndata = {'k': [1, 2]}");
    const report = await a.snapshot();
    expect(report.path).toBe(defaultSnapshotPath(fixture.tmp.home, "p"));
    expect(report.saved).toEqual(["data", "json", "x"]);
    const manifest = readManifest(report.path);
    expect(manifest?.savedNames).toEqual(["data", "json", "x"]);
    // Data and modules (by name) need no dill to restore.
    expect(manifest?.serializer).toBe("pickle");
    await a.close();

    const b = await start({ restoreOnStart: true });
    const r = await b.execute("x + 1, json.dumps(data)");
    expect(r.value).toBe(`(42, '{"k": [1, 2]}')`);
    expect(r.restored).toEqual({ source: report.path, restored: ["data", "json", "x"], failed: [] });
    // Said once: the next result has no restored field.
    expect((await b.execute("1")).restored).toBeUndefined();
  });

  test("with dill, functions, lambdas, classes and instances defined in cells survive", async () => {
    const a = await start();
    await a.execute(
      ["def square(n):\n    return n * n", "inc = lambda n: n + 1", "class Point:\n    def __init__(self, x): self.x = x\n    def double(self): return Point(self.x * 2)", "p = Point(5)"].join("\n"),
    );
    await a.snapshot();
    await a.close();
    const b = await start({ restoreOnStart: true });
    expect(await value(b, "square(7), inc(1), p.double().x, type(p).__name__")).toBe("(49, 2, 10, 'Point')");
  });

  test("restored functions and methods use the live namespace, not a copy of the globals they had", async () => {
    const a = await start();
    await a.execute(
      [
        "total = 0",
        "def add(n):\n    global total\n    total += n",
        "def get(): return total",
        "scale = lambda v: v * factor",
        "factor = 2",
        "def fact(n): return 1 if n < 2 else n * fact(n - 1)",
        "class Acc:\n    def read(self): return total\n    @staticmethod\n    def twice(): return total * 2\n    @property\n    def prop(self): return total + 1",
      ].join("\n"),
    );
    await a.snapshot();
    await a.close();
    const b = await start({ restoreOnStart: true });
    expect(await value(b, "add(5)\nfactor = 10\ntotal, get(), scale(1), fact(5), Acc().read(), Acc.twice(), Acc().prop")).toBe("(5, 5, 10, 120, 5, 10, 6)");
    expect(await value(b, "add.__globals__ is globals() and get.__globals__ is globals()")).toBe("True");
  });

  test("names that cannot be pickled (a socket, a generator) are reported; the rest is restored", async () => {
    const a = await start();
    await a.execute("import socket\nsock = socket.socket()\ngen = (i for i in range(3))\nkept = [1, 2, 3]");
    const report = await a.snapshot();
    expect(report.saved).toEqual(["kept", "socket"]);
    expect(report.skipped.map((s) => s.name).sort()).toEqual(["gen", "sock"]);
    for (const s of report.skipped) expect(s.reason).toContain("cannot pickle");
    await a.execute("sock.close()");
    await a.close();
    const b = await start({ restoreOnStart: true });
    const r = await b.execute("kept, 'sock' in globals(), 'gen' in globals()");
    expect(r.value).toBe("([1, 2, 3], False, False)");
    expect(r.restored?.restored).toEqual(["kept", "socket"]);
    // Whoever sees the restore learns what the snapshot could not save.
    expect(r.restored?.failed.map((f) => f.name).sort()).toEqual(["gen", "sock"]);
    expect(r.restored?.failed[0]?.reason).toStartWith("not in the snapshot: TypeError: cannot pickle");
  });

  test("without dill, pickle saves the data and lists cell functions as skipped", async () => {
    const a = await start({ python: NO_DILL_PYTHON });
    await a.execute("import math\nnums = [1.5, 2.5]\ndef f(): return 1\ng = lambda: 2");
    const report = await a.snapshot();
    expect(report.saved).toEqual(["math", "nums"]);
    const skipped = Object.fromEntries(report.skipped.map((s) => [s.name, s.reason]));
    expect(Object.keys(skipped).sort()).toEqual(["f", "g"]);
    expect(skipped.f).toContain("dill");
    expect(readManifest(report.path)?.serializer).toBe("pickle");
    await a.close();
    const b = await start({ python: NO_DILL_PYTHON, restoreOnStart: true });
    expect(await value(b, "math.floor(sum(nums))")).toBe("4");
  });

  test("a snapshot whose names a new interpreter cannot restore is kept aside before it is replaced", async () => {
    const a = await start();
    await a.execute("def f(): return 1\nx = 1");
    await a.snapshot();
    await a.close();
    const b = await start({ python: NO_DILL_PYTHON, restoreOnStart: true });
    const r = await b.execute("'f' in globals()");
    expect(r.value).toBe("False");
    // Plain data is saved with stdlib pickle, so only the cell function needs dill.
    expect(r.restored?.restored).toEqual(["x"]);
    expect(r.restored?.failed.map((f) => f.name)).toEqual(["f"]);
    expect(r.restored?.failed[0]?.reason).toContain("dill");
    await b.execute("y = 2");
    await b.snapshot();
    expect((await b.execute("1")).notice).toContain("it was kept as");
    const aside = readdirSync(join(fixture.tmp.home, "snapshots", "p")).filter((n) => n.startsWith("snapshot.pkl.unrestored-"));
    expect(aside.length).toBe(1);
    // The kept file still restores where dill is.
    const c = await start({}, "c");
    expect((await c.restore(join(fixture.tmp.home, "snapshots", "p", aside[0]!))).restored).toEqual(["f", "x"]);
  });

  test("size caps: a name over the per-name cap and one over the total are skipped with the reason, not dropped silently", async () => {
    const a = await start({ snapshotMaxVariableBytes: 50_000, snapshotMaxBytes: 120_000 });
    await a.execute("big = b'x' * 60_000\nm1 = b'y' * 40_000\nm2 = b'z' * 40_000\nm3 = b'w' * 40_000\nsmall = 1");
    const report = await a.snapshot();
    const skipped = Object.fromEntries(report.skipped.map((s) => [s.name, s.reason]));
    expect(skipped.big).toContain("exceeds max_variable_bytes 50000");
    expect(Object.values(skipped).some((r) => r.includes("would exceed max_bytes 120000"))).toBe(true);
    expect(report.saved).toContain("small");
    // Skipped names stay in the namespace (nothing is pruned by a snapshot).
    expect(await value(a, "len(big)")).toBe("60000");
  });

  test("explicit paths: snapshot to a file of the caller's choosing and restore it into another session", async () => {
    const a = await start();
    await a.execute("shared = 'hello'");
    const path = join(fixture.tmp.home, "mine.pkl");
    await a.snapshot(path);
    expect(existsSync(path)).toBe(true);
    expect(existsSync(join(fixture.tmp.home, "mine.json"))).toBe(true);
    const b = await start({}, "other");
    const report = await b.restore(path);
    expect(report).toEqual({ source: path, restored: ["shared"], failed: [] });
    expect(await value(b, "shared")).toBe("'hello'");
  });

  test("no snapshot: restoreOnStart starts fresh without a notice; restore() is restore_failed", async () => {
    const s = await start({ restoreOnStart: true });
    const r = await s.execute("1");
    expect(r.restored).toBeUndefined();
    expect(r.notice).toBeUndefined();
    expect((await rejection(s.restore())).code).toBe("restore_failed");
  });
});

describe("a snapshot cut short", () => {
  test("a worker killed mid-snapshot leaves the last good snapshot in place, and the session goes back to it", async () => {
    const s = await start();
    await s.execute("x = 'first'");
    const first = await s.snapshot();
    const before = readFileSync(first.path);
    await s.execute(
      "x = 'second'\nclass Slow:\n    def __reduce__(self):\n        print('saving', flush=True)\n        import time\n        time.sleep(60)\n        return (int, (1,))\nslow = Slow()",
    );
    const pid = s.pid!;
    const saving = s.snapshot();
    await Bun.sleep(300); // the snapshot is inside Slow.__reduce__ by now (or about to be)
    process.kill(pid, "SIGKILL");
    expect((await rejection(saving)).code).toBe("worker_died");
    expect(readFileSync(first.path).equals(before)).toBe(true);
    const r = await s.execute("x");
    expect(r.value).toBe("'first'");
    expect(r.notice).toContain("restored from its snapshot of");
    expect(readdirSync(join(fixture.tmp.home, "snapshots", "p")).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });
});

describe("a corrupt or unreadable snapshot", () => {
  test("restoreOnStart: a clear notice, a fresh session, and the file moved aside (not deleted)", async () => {
    const path = defaultSnapshotPath(fixture.tmp.home, "p");
    await (await start()).snapshot(); // creates the directory and a manifest
    writeFileSync(path, "this is not a pickle");
    const s = await start({ restoreOnStart: true });
    const r = await s.execute("'x' in globals()");
    expect(r.value).toBe("False");
    expect(r.restored).toBeUndefined();
    expect(r.notice).toContain("could not be restored");
    expect(r.notice).toContain("corrupt snapshot");
    expect(r.notice).toContain(".corrupt-");
    expect(existsSync(path)).toBe(false);
    const aside = readdirSync(join(fixture.tmp.home, "snapshots", "p")).filter((n) => n.includes(".corrupt-"));
    expect(aside.some((n) => n.startsWith("snapshot.pkl.corrupt-"))).toBe(true);
    expect(aside.some((n) => n.startsWith("snapshot.json.corrupt-"))).toBe(true);
    const kept = aside.find((n) => n.startsWith("snapshot.pkl.corrupt-"))!;
    expect(readFileSync(join(fixture.tmp.home, "snapshots", "p", kept), "utf8")).toBe("this is not a pickle");
    // The next snapshot goes where the bad one was.
    await s.execute("y = 2");
    expect((await s.snapshot()).saved).toEqual(["y"]);
  });

  test("a snapshot whose restore kills the worker is kept aside, not overwritten by the next snapshot", async () => {
    const a = await start();
    await a.execute("import os\nclass Bomb:\n    def __reduce__(self):\n        return (os._exit, (9,))\nb = Bomb()\nok = 1");
    const report = await a.snapshot();
    expect(report.saved).toContain("ok");
    await a.close();
    const path = defaultSnapshotPath(fixture.tmp.home, "p");
    const s = await start({ restoreOnStart: true });
    const r = await s.execute("'ok' in globals()");
    expect(r.value).toBe("False");
    expect(r.notice).toContain("could not be restored");
    expect(r.notice).toContain(".unrestored-");
    expect(existsSync(path)).toBe(false);
    const kept = readdirSync(join(fixture.tmp.home, "snapshots", "p")).filter((n) => n.startsWith("snapshot.pkl.unrestored-"));
    expect(kept).toHaveLength(1);
    // The fresh session's own snapshot goes to the default place; the kept file is untouched.
    await s.execute("y = 2");
    expect((await s.snapshot()).saved).toEqual(["y"]);
    expect(readdirSync(join(fixture.tmp.home, "snapshots", "p")).filter((n) => n.startsWith("snapshot.pkl.unrestored-"))).toEqual(kept);
  });

  test("restore() of a corrupt default snapshot is restore_failed naming where the file went", async () => {
    const s = await start();
    await s.snapshot();
    writeFileSync(s.defaultSnapshotPath(), Buffer.from([0x80, 0x05, 0x00]));
    const err = await rejection(s.restore());
    expect(err.code).toBe("restore_failed");
    expect(err.message).toContain("moved aside to");
    expect(existsSync(s.defaultSnapshotPath())).toBe(false);
  });

  test("a corrupt file at a path of the caller's choosing is reported and left where it is", async () => {
    const s = await start();
    const path = join(fixture.tmp.home, "theirs.pkl");
    writeFileSync(path, "garbage");
    const err = await rejection(s.restore(path));
    expect(err.message).toContain("corrupt snapshot");
    expect(readFileSync(path, "utf8")).toBe("garbage");
  });
});

describe("going back to the latest snapshot after a loss", () => {
  test("a timeout kill restores the latest snapshot and the result says which state it went back to", async () => {
    const s = await start({ timeoutMs: 400, graceMs: 200 });
    await s.execute("a = 1");
    await s.snapshot();
    await s.execute("a = 2\nb = 3"); // after the snapshot: lost with the worker
    const r = await s.execute("sum(range(10**12))");
    expect(r.status).toBe("timeout");
    expect(r.exception).toContain("the worker was killed");
    expect(r.notice).toContain("The session went back to its snapshot of");
    expect(r.notice).toContain(s.defaultSnapshotPath());
    expect(r.restored).toEqual({ source: s.defaultSnapshotPath(), restored: ["a"], failed: [] });
    const next = await s.execute("a, 'b' in globals()");
    expect(next.value).toBe("(1, False)");
    expect(next.notice).toBeUndefined();
  });

  test("a worker death between calls: the next call runs restored and is told so", async () => {
    const s = await start();
    await s.execute("kept = 'yes'");
    await s.snapshot();
    const pid = s.pid!;
    process.kill(pid, "SIGKILL");
    await waitFor(() => s.pid !== pid, 5000, "the session to see its worker die");
    const r = await s.execute("kept");
    expect(r.value).toBe("'yes'");
    expect(r.notice).toContain("restored from its snapshot of");
    expect(r.notice).toContain("SIGKILL");
    expect(r.restored?.restored).toEqual(["kept"]);
  });

  test("os._exit in a cell: status died, and the session is back at its snapshot", async () => {
    const s = await start();
    await s.execute("n = 10");
    await s.snapshot();
    const r = await s.execute("import os; os._exit(3)");
    expect(r.status).toBe("died");
    expect(r.exception).toContain("exited with code 3");
    expect(r.notice).toContain("went back to its snapshot");
    expect(await value(s, "n")).toBe("10");
  });

  test("without a snapshot the loss is said as before", async () => {
    const s = await start({ timeoutMs: 300, graceMs: 100 });
    await s.execute("a = 1");
    const r = await s.execute("sum(range(10**12))");
    expect(r.status).toBe("timeout");
    expect(r.notice).toContain("The session's state was lost");
    expect(r.restored).toBeUndefined();
    expect((await s.execute("'a' in globals()")).notice).toContain("earlier state is gone");
  });
});

describe("autosave", () => {
  test("a timeout kill loses only the cell that caused it", async () => {
    const s = await start({ autosave: true, timeoutMs: 500, graceMs: 200 });
    await s.execute("total = 0");
    for (let i = 1; i <= 3; i++) await s.execute(`total += ${i}`);
    await s.execute("def f(x):\n    return x * 10");
    const r = await s.execute("total = -1\nsum(range(10**12))");
    expect(r.status).toBe("timeout");
    expect(r.restored?.source).toBe(s.defaultSnapshotPath());
    expect(await value(s, "total, f(2)")).toBe("(6, 20)");
  });

  test("a small namespace is saved after every cell, so an append to a long list is not missed", async () => {
    const s = await start({ autosave: true, timeoutMs: 500, graceMs: 200 });
    await s.execute("log = list(range(50))");
    await s.execute("log.append('seen')"); // its short repr does not change: [0, 1, 2, ...]
    const r = await s.execute("sum(range(10**12))");
    expect(r.restored).toBeDefined();
    expect(await value(s, "log[-1], len(log)")).toBe("('seen', 51)");
  });

  test("with a large namespace, a cell that changes nothing does not write the snapshot again", async () => {
    const s = await start({ autosave: true });
    await s.execute("blob = bytes(300_000)\nx = 1");
    const path = s.defaultSnapshotPath();
    await waitFor(() => readManifest(path) !== null, 5000, "the first autosave");
    const first = readManifest(path)!.timestamp;
    await s.execute("print(x)");
    await s.execute("x + 1");
    await s.variables(); // queued behind both autosave checks
    expect(readManifest(path)!.timestamp).toBe(first);
    await s.execute("x = 2");
    await s.variables();
    expect(readManifest(path)!.timestamp).toBeGreaterThan(first);
  });

  // The listing autosave compares is the `type: short repr` one: the one-line `variables` form says
  // only a frame's or an array's shape and dtypes, so a change to its values would not be seen.
  (pythonHas("numpy") ? test : test.skip)("with a large namespace, an ndarray or DataFrame changed in place is saved again", async () => {
    // Only the last cell is timed out: importing numpy and pandas takes longer than 500 ms on a busy machine.
    const s = await start({ autosave: true, graceMs: 200 });
    const frames = pythonHas("pandas");
    await value(s, `blob = bytes(300_000)\nimport numpy as np\na = np.zeros(3)${frames ? "\nimport pandas as pd\ndf = pd.DataFrame({'v': [1, 2, 3]})" : ""}`);
    const path = s.defaultSnapshotPath();
    await waitFor(() => readManifest(path) !== null, 5000, "the first autosave");
    const first = readManifest(path)!.timestamp;
    await s.execute(`a[0] = 5${frames ? "\ndf.loc[0, 'v'] = 99" : ""}`);
    await s.variables(); // queued behind the autosave check
    expect(readManifest(path)!.timestamp).toBeGreaterThan(first);
    const r = await s.execute("sum(range(10**12))", { timeoutMs: 500 }); // a timeout kill: the session comes back from that save
    expect(r.restored).toBeDefined();
    expect(await value(s, frames ? "float(a[0]), int(df.loc[0, 'v'])" : "float(a[0])")).toBe(frames ? "(5.0, 99)" : "5.0");
  });

  test("a name autosave cannot save is reported once, in the next result", async () => {
    const s = await start({ autosave: true });
    await s.execute("gen = (i for i in range(3))");
    const r = await s.execute("ok = 1");
    expect(r.notice).toContain("Autosave could not save gen");
    expect((await s.execute("ok2 = 2")).notice).toBeUndefined();
  });
});

describe("the host's side (the supervisor's API)", () => {
  test("snapshotBeforeStop saves every live session, interrupting a running cell first; forgetClosedSession removes one", async () => {
    const options = { ...persistentSessionOptions({ autosave: false }), snapshotMaxBytes: 0, snapshotMaxVariableBytes: 0 };
    expect(options.restoreOnStart).toBe(true);
    const idle = await start(options, "idle");
    const busy = await start(options, "busy");
    await idle.execute("a = 1");
    await busy.execute("b = 2");
    const running = busy.execute("while True: __import__('time').sleep(0.01)"); // binds no name: saved stays 1
    await waitFor(() => busy.busy, 5000, "the cell to start");
    const lines: string[] = [];
    const outcomes = await snapshotBeforeStop([["idle", idle], ["busy", busy]], (l) => lines.push(l), { home: fixture.tmp.home, stop: "test", budgetMs: 10_000 });
    expect(outcomes).toMatchObject([
      { session: "idle", status: "saved", saved: 1, skipped: [], path: defaultSnapshotPath(fixture.tmp.home, "idle") },
      { session: "busy", status: "saved", saved: 1, skipped: [] },
    ]);
    expect((await running).status).toBe("interrupted");
    expect(lines).toContain("session busy: snapshot saved 1 name(s)");
    const again = await start(options, "busy");
    expect((await again.execute("b")).value).toBe("2");
    expect(existsSync(defaultSnapshotPath(fixture.tmp.home, "busy"))).toBe(true);
    expect(forgetClosedSession(fixture.tmp.home, "busy")).toBe(true);
    expect(existsSync(defaultSnapshotPath(fixture.tmp.home, "busy"))).toBe(false);
  });

  test("a cell busy in C code does not hold a stop: that session's snapshot is given up, the previous one kept", async () => {
    const s = await start({ timeoutMs: 0 }, "stuck");
    await s.execute("x = 1");
    const first = await s.snapshot();
    const before = readFileSync(first.path);
    let printed = false;
    void s.execute("print('go', flush=True)\nsum(range(10**12))", { onOutput: () => (printed = true) }).catch(() => undefined);
    await waitFor(() => printed, 5000, "the cell to start");
    await Bun.sleep(300); // inside sum() by now: an interrupt cannot land there
    const started = Date.now();
    const [outcome] = await snapshotBeforeStop([["stuck", s]], () => undefined, { home: fixture.tmp.home, stop: "test", budgetMs: 10_000 });
    expect(outcome).toMatchObject({
      session: "stuck",
      status: "failed",
      error: expect.stringContaining("did not stop within 2000 ms of being interrupted"),
      kept: { path: first.path, taken_at: expect.any(String), age_ms: expect.any(Number) },
    });
    // Recorded beside the session for its next user, with the older snapshot that comes back instead.
    expect(readUnsaved(fixture.tmp.home, "stuck")).toMatchObject({ stop: "test", kept: { path: first.path } });
    expect(Date.now() - started).toBeLessThan(9_000);
    expect(readFileSync(first.path).equals(before)).toBe(true);
  });
});

describe("a stop's snapshot budget", () => {
  test("one name too slow to pickle is skipped and named; the rest of the namespace is saved (issue 15 item 9)", async () => {
    const s = await start({ timeoutMs: 0 }, "slow");
    await s.execute("x = 1\nimport time\nclass Slow:\n    def __reduce__(self):\n        time.sleep(30)\n        return (int, (1,))\nslow = Slow()");
    const started = Date.now();
    const [outcome] = await snapshotBeforeStop([["slow", s]], () => undefined, { home: fixture.tmp.home, stop: "test", budgetMs: 2_000 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(outcome).toMatchObject({ session: "slow", status: "saved" });
    expect(outcome && "skipped" in outcome ? outcome.skipped : []).toContainEqual({ name: "slow", reason: "took longer than 500 ms to pickle" });
    expect(readManifest(defaultSnapshotPath(fixture.tmp.home, "slow"))?.savedNames).toContain("x");
    expect(readUnsaved(fixture.tmp.home, "slow")).toBeNull();
  });

  test("a namespace too slow to pickle within the budget (C code the per-name budget cannot cut) is reported with the older snapshot kept, and recorded", async () => {
    const s = await start({ timeoutMs: 0 }, "slow");
    await s.execute("x = 1");
    const first = await s.snapshot();
    await s.execute("class Slow:\n    def __reduce__(self):\n        sum(range(10**11))\n        return (int, (1,))\nslow = Slow()");
    const started = Date.now();
    const [outcome] = await snapshotBeforeStop([["slow", s]], () => undefined, { home: fixture.tmp.home, stop: "test", budgetMs: 500 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(outcome).toMatchObject({
      session: "slow",
      status: "failed",
      error: "it did not finish within the stop's snapshot budget of 500 ms (a namespace too large or too slow to pickle)",
      kept: { path: first.path },
    });
    expect(readUnsaved(fixture.tmp.home, "slow")?.error).toContain("snapshot budget of 500 ms");
    await s.close(); // what the stop does next: the write in progress never replaces the snapshot
    expect(readManifest(first.path)?.savedNames).toEqual(["x"]);
  });
});

describe("snapshot files", () => {
  test("moveAside renames payload and manifest; forgetSnapshot removes both", () => {
    const path = defaultSnapshotPath(fixture.tmp.home, "f");
    const dir = join(fixture.tmp.home, "snapshots", "f");
    mkdirSync(dir, { recursive: true });
    writeFileSync(path, "p");
    writeFileSync(manifestPath(path), "{}");
    const aside = moveAside(path, "corrupt", new Date("2026-01-02T03:04:05.678Z"));
    expect(aside).toBe(`${path}.corrupt-20260102T030405Z`);
    expect(readdirSync(dir).sort()).toEqual(["snapshot.json.corrupt-20260102T030405Z", "snapshot.pkl.corrupt-20260102T030405Z"]);
    writeFileSync(path, "p");
    writeFileSync(manifestPath(path), "{}");
    expect(forgetSnapshot(fixture.tmp.home, "f")).toBe(true);
    expect(existsSync(path) || existsSync(manifestPath(path))).toBe(false);
    expect(forgetSnapshot(fixture.tmp.home, "f")).toBe(false);
  });

  test("a stale manifest (another payload size) is not trusted; temp files of dead writers are swept", () => {
    const dir = join(fixture.tmp.home, "snapshots");
    mkdirSync(dir, { recursive: true });
    const path = join(dir, "s.pkl");
    writeFileSync(path, "12345");
    writeFileSync(manifestPath(path), JSON.stringify({ version: 1, savedNames: [], skipped: [], pruned: [], bytes: 4, pythonVersion: "3", timestamp: 1 }));
    expect(readManifest(path)).toBeNull();
    expect(describeSnapshot(path)).toContain(`UTC (${path})`);
    writeFileSync(join(dir, ".s.pkl.999999999.tmp"), "half");
    writeFileSync(join(dir, `.s.json.${process.pid}.tmp`), "live writer");
    sweepTempFiles(path);
    expect(existsSync(join(dir, ".s.pkl.999999999.tmp"))).toBe(false);
    expect(existsSync(join(dir, `.s.json.${process.pid}.tmp`))).toBe(true);
    expect(statSync(path).size).toBe(5);
  });
});

describe("snapshots streamed over the protocol (what remote, container and sandboxed workers use)", () => {
  const stream = { snapshotTransfer: "stream" } as const;

  test("the host writes the payload and its manifest (with sha256); a new session restores it streamed back", async () => {
    const a = await start(stream);
    await a.execute("x = 41\nimport json\nblob = bytes(range(256)) * 4000\ndef f(n): return n * x");
    const report = await a.snapshot();
    expect(report.path).toBe(defaultSnapshotPath(fixture.tmp.home, "p"));
    expect(report.saved).toEqual(["blob", "f", "json", "x"]);
    const manifest = readManifest(report.path);
    expect(manifest?.bytes).toBe(statSync(report.path).size);
    expect(manifest?.sha256).toBe(createHash("sha256").update(readFileSync(report.path)).digest("hex"));
    expect(statSync(report.path).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(fixture.tmp.home, "snapshots", "p")).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    await a.close();
    const b = await start({ ...stream, restoreOnStart: true });
    const r = await b.execute("f(1), len(blob), json.dumps([x])");
    expect(r.value).toBe("(41, 1024000, '[41]')");
    expect(r.restored?.restored).toEqual(["blob", "f", "json", "x"]);
  });

  test("a snapshot cut off by a kill leaves the previous file whole and no temp file", async () => {
    const s = await start(stream);
    await s.execute("x = 'first'");
    const first = await s.snapshot();
    const before = readFileSync(first.path);
    await s.execute("x = 'second'\nclass Slow:\n    def __reduce__(self):\n        import time\n        time.sleep(60)\n        return (int, (1,))\nslow = Slow()");
    const pid = s.pid!;
    const saving = s.snapshot();
    await Bun.sleep(300);
    process.kill(pid, "SIGKILL");
    expect((await rejection(saving)).code).toBe("worker_died");
    expect(readFileSync(first.path).equals(before)).toBe(true);
    expect(readdirSync(join(fixture.tmp.home, "snapshots", "p")).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    expect((await s.execute("x")).value).toBe("'first'");
  });

  test("a file of the user's where the manifest would go is refused before anything is written", async () => {
    const s = await start(stream);
    await s.execute("x = 1");
    const target = join(fixture.tmp.home, "mine.pkl");
    writeFileSync(join(fixture.tmp.home, "mine.json"), '{"my": "settings"}');
    const err = await rejection(s.snapshot(target));
    expect(err.code).toBe("snapshot_failed");
    expect(err.message).toContain(`Refusing to overwrite ${join(fixture.tmp.home, "mine.json")}`);
    expect(existsSync(target)).toBe(false);
    expect(readFileSync(join(fixture.tmp.home, "mine.json"), "utf8")).toBe('{"my": "settings"}');
  });

  test("a corrupt default snapshot streamed back: a clear notice, a fresh session, the file moved aside", async () => {
    const a = await start(stream);
    await a.execute("x = 1");
    const { path } = await a.snapshot();
    await a.close();
    writeFileSync(path, "this is not a pickle");
    const b = await start({ ...stream, restoreOnStart: true });
    const r = await b.execute("'x' in globals()");
    expect(r.value).toBe("False");
    expect(r.notice).toContain("could not be restored: corrupt snapshot");
    expect(r.notice).toContain("moved aside to");
    expect(existsSync(path)).toBe(false);
    expect(readdirSync(join(fixture.tmp.home, "snapshots", "p")).some((n) => n.startsWith("snapshot.pkl.corrupt-"))).toBe(true);
  });

  test("restore from the host refuses a FIFO and an oversized file before the worker sees them", async () => {
    const s = await start({ ...stream, snapshotMaxBytes: 10 });
    await s.execute("x = 3");
    const big = join(fixture.tmp.home, "big.pkl");
    writeFileSync(big, Buffer.alloc(2 * 1024 * 1024));
    expect((await rejection(s.restore(big))).message).toContain("over the snapshot cap");
    expect((await rejection(s.restore("/dev/zero"))).message).toContain("character device");
    expect((await s.execute("x")).value).toBe("3");
  });
});
