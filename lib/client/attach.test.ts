// attach() and the client calls (detached cells and collect too) against a real supervisor started
// from source (`bun main.ts __supervisor`), with real Python workers; each test has its own state
// directory.
import { afterEach, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { attach } from "./attach.ts";
import { closeSession, collectResult, daemonStatus, interruptSession, listSessions, stopDaemon } from "./daemon.ts";
import { AwreplError } from "../core/errors.ts";
import { processAlive } from "../core/process.ts";
import { specPath } from "../session/snapshot_files.ts";
import { socketPath } from "../settings/home.ts";

const PYTHON = process.env.AWREPL_TEST_PYTHON ?? "/usr/bin/python3";
const homes: string[] = [];

function home(): string {
  const h = mkdtempSync(join(tmpdir(), "awrepl-client-"));
  homes.push(h);
  return h;
}

afterEach(async () => {
  for (const h of homes.splice(0)) {
    const status = await daemonStatus({ home: h }).catch(() => null);
    await stopDaemon({ home: h }).catch(() => false);
    if (status && processAlive(status.pid)) process.kill(status.pid, "SIGKILL");
    rmSync(h, { recursive: true, force: true });
  }
});

describe("calls safe to retry, and detached cells by id", () => {
  test("execute(code, {id}) runs once: a repeat from another attachment gets the first result, replayed; other code under the id is refused", async () => {
    const h = home();
    await using a = await attach("keys", { home: h, python: PYTHON });
    await using b = await attach("keys", { home: h, python: PYTHON });
    expect((await a.execute("orders = []")).status).toBe("ok");
    const first = await a.execute("orders.append(1); len(orders)", { id: "append-1" });
    expect(first).toMatchObject({ value: "1", status: "ok" });
    expect(first.replayed).toBeUndefined();
    const again = await b.execute("orders.append(1); len(orders)", { id: "append-1" });
    expect(again).toMatchObject({ value: "1", replayed: true, session: "keys" });
    await expect(b.execute("orders.clear()", { id: "append-1" })).rejects.toMatchObject({ code: "usage" });
    expect((await b.execute("orders")).value).toBe("[1]");
  });

  test("executeDetached(code, {id}) and wait(id): running, then its result, from another attachment after the first went away", async () => {
    const h = home();
    const a = await attach("bg", { home: h, python: PYTHON });
    const cell = a.executeDetached("import time\ntime.sleep(1)\n'slept'", { id: "job-1" });
    cell.result.catch(() => {});
    expect(await cell.keepResult()).toBe(true);
    await a.close();
    await using b = await attach("bg", { home: h, python: PYTHON });
    expect(await b.wait("job-1")).toMatchObject({ state: "running", mine: false });
    const done = await b.wait("job-1", { waitMs: 20_000 });
    expect(done).toMatchObject({ state: "done", result: { value: "'slept'", status: "ok" } });
    await expect(b.wait("no-such-job")).rejects.toMatchObject({ code: "usage" });
  });
});

describe("attach", () => {
  test("two attachments share one live namespace; close() only detaches", async () => {
    const h = home();
    const a = await attach("shared", { home: h, python: PYTHON });
    expect((await a.execute("x = 41")).status).toBe("ok");
    await a.close();
    await using b = await attach("shared", { home: h, python: PYTHON });
    const r = await b.execute("x + 1");
    expect(r.value).toBe("42");
    expect(r.session).toBe("shared");
    expect(Object.keys(await b.variables())).toEqual(["x"]);
    expect((await b.inspect("x")).type).toBe("int");
    // `full` crosses the socket: every attribute name, dunders too, instead of the public ones.
    expect((await b.inspect("x")).dir).not.toContain("__add__");
    expect((await b.inspect("x", { full: true })).dir).toContain("__add__");
    const rows = await listSessions({ home: h });
    expect(rows.map((s) => s.name)).toEqual(["shared"]);
  });

  test("live output streams before the result, and an abort interrupts the cell", async () => {
    const h = home();
    await using s = await attach("stream", { home: h, python: PYTHON });
    const abort = new AbortController();
    const seen: string[] = [];
    const result = s.execute("import time\nprint('tick', flush=True)\ntime.sleep(60)", {
      signal: abort.signal,
      onOutput: (stream, text) => {
        seen.push(`${stream}:${text}`);
        abort.abort();
      },
    });
    const r = await result;
    expect(seen[0]).toBe("stdout:tick\n");
    expect(r.status).toBe("interrupted");
    expect((await s.execute("1 + 1")).value).toBe("2");
  });

  test("liveLimit: live stdout/stderr stop once that many bytes went out; the result keeps head and tail", async () => {
    const h = home();
    await using s = await attach("limited", { home: h, python: PYTHON });
    // 4000 flushed lines of 100 bytes (400 kB) on both streams, so the limit falls mid-cell.
    const code = "import sys\nfor i in range(4000):\n    print(f'{i:099d}', file=sys.stderr if i % 3 == 0 else sys.stdout, flush=True)";
    let live = "";
    const r = await s.execute(code, { maxOutputBytes: 20_000, liveLimit: 10_000, onOutput: (_stream, text) => (live += text) });
    expect(r.status).toBe("ok");
    // At least the limit (what the client shows), and at most one more of the runtime's chunks.
    expect(Buffer.byteLength(live)).toBeGreaterThanOrEqual(10_000);
    expect(Buffer.byteLength(live)).toBeLessThan(10_000 + 70_000);
    expect(live.startsWith(`${"0".repeat(99)}\n`)).toBe(true);
    expect(live).not.toContain(`${"3999".padStart(99, "0")}\n`);
    // The result is as without a limit: head, marker and the cell's real end.
    expect(r.stdout.endsWith(`${"3998".padStart(99, "0")}\n`)).toBe(true);
    expect(r.stderr.endsWith(`${"3999".padStart(99, "0")}\n`)).toBe(true);
    expect(r.truncated_bytes).toBeGreaterThan(0);
    // Without one, every byte still streams.
    let all = 0;
    await s.execute(code, { maxOutputBytes: 20_000, onOutput: (_stream, text) => (all += Buffer.byteLength(text)) });
    expect(all).toBe(400_000);
  });

  test("interruptSession reaches a cell started by another client; closeSession ends the worker", async () => {
    const h = home();
    await using s = await attach("busy", { home: h, python: PYTHON });
    const pid = Number((await s.execute("import os; os.getpid()")).value);
    const running = s.execute("import time\nprint('go', flush=True)\ntime.sleep(60)", { onOutput: () => {} });
    await waitFor(async () => (await listSessions({ home: h }))[0]?.state === "busy");
    expect(await interruptSession("busy", { home: h })).toBe(true);
    expect((await running).status).toBe("interrupted");
    expect(await interruptSession("busy", { home: h })).toBe(false);
    expect(await closeSession("busy", { home: h })).toBe(true);
    await waitFor(async () => !processAlive(pid));
    expect(await closeSession("busy", { home: h })).toBe(false);
  });

  test("calls to one session run in arrival order across clients; a busy session delays no other", async () => {
    const h = home();
    await using a = await attach("ordered", { home: h, python: PYTHON });
    await using b = await attach("ordered", { home: h, python: PYTHON });
    await using other = await attach("other", { home: h, python: PYTHON });
    await a.execute("order = []");
    await other.execute("1");
    const finished: string[] = [];
    const track = (name: string, p: Promise<unknown>) => p.then(() => finished.push(name));
    const first = track("first", a.execute("import time\ntime.sleep(1)\norder.append(1)"));
    await waitFor(async () => (await listSessions({ home: h })).find((s) => s.name === "ordered")?.state === "busy");
    const second = track("second", b.execute("order.append(2)"));
    await waitFor(async () => (await listSessions({ home: h })).find((s) => s.name === "ordered")?.queued === 1);
    const third = track("third", a.execute("order.append(3)"));
    const elsewhere = track("elsewhere", other.execute("2 + 2"));
    await Promise.all([first, second, third, elsewhere]);
    // The other session was not held up; the FIFO order is the order the cells ran in (results on
    // two connections may reach this process in either order when they are a fraction of a ms apart).
    expect(finished[0]).toBe("elsewhere");
    expect(finished[1]).toBe("first");
    expect((await b.execute("order")).value).toBe("[1, 2, 3]");
  });

  test("a session closed under an attached client comes back fresh and says so; after a stop it comes back restored", async () => {
    const h = home();
    await using s = await attach("phoenix", { home: h, python: PYTHON });
    expect((await s.execute("x = 1")).notice).toBeUndefined();
    expect(await closeSession("phoenix", { home: h })).toBe(true);
    const afterClose = await s.execute("y = 2\n'x' in globals()");
    expect(afterClose.value).toBe("False");
    expect(afterClose.notice).toContain("earlier state is gone");
    expect(await stopDaemon({ home: h })).toBe(true);
    // Our connection learns of the close through an event; a call made before it arrives fails
    // (it cannot know whether the request ran), so give the event a moment.
    await Bun.sleep(200);
    const afterStop = await s.execute("y + 2");
    expect(afterStop.value).toBe("4");
    expect(afterStop.notice).toMatch(/^Session phoenix came back from its snapshot of .* UTC \(\d+ s old\): cells run after that snapshot are not in it\.$/);
    expect(afterStop.restored?.restored).toEqual(["y"]);
  });

  test("resendSafeCalls: a call safe to repeat that the supervisor's end cut off goes to a new supervisor; a cell is never sent twice", async () => {
    const h = home();
    const slowRepr = "class Slow:\n    def __repr__(self):\n        import time\n        time.sleep(2)\n        return 'slow'\nslow = Slow()";
    const busy = async (name: string) => waitFor(async () => (await listSessions({ home: h })).find((s) => s.name === name)?.state === "busy");
    const kill = async () => process.kill((await daemonStatus({ home: h }))!.pid, "SIGKILL");

    // Without the option a cut-off call fails, whatever it was.
    await using plain = await attach("plain", { home: h, python: PYTHON });
    await plain.execute(slowRepr);
    const cut = plain.variables();
    await busy("plain");
    await kill();
    await expect(cut).rejects.toMatchObject({ code: "supervisor_unreachable" });

    await using s = await attach("again", { home: h, python: PYTHON, resendSafeCalls: true });
    await s.execute(slowRepr);
    const listing = s.variables();
    await busy("again");
    await kill();
    // Sent again to a new supervisor, where the session starts afresh (nothing was snapshotted).
    expect(await listing).toEqual({});
    await s.execute(slowRepr);
    const cell = s.execute("import time\ntime.sleep(30)");
    await busy("again");
    await kill();
    await expect(cell).rejects.toMatchObject({ code: "supervisor_unreachable" });
    // The next call connects again, and says the state is gone.
    const next = await s.execute("'slow' in globals()");
    expect(next.value).toBe("False");
    expect(next.notice).toContain("earlier state is gone");
  }, 60_000);

  test("close --keep keeps the snapshot; close forgets it, also when no supervisor runs", async () => {
    const h = home();
    await using s = await attach("kept", { home: h, python: PYTHON });
    await s.execute("v = 'saved'");
    await s.snapshot();
    expect(await closeSession("kept", { home: h, keep: true })).toBe(true);
    expect((await s.execute("v")).value).toBe("'saved'");
    expect(await stopDaemon({ home: h })).toBe(true);
    // No supervisor: the snapshot on disk is what close forgets.
    expect(await closeSession("kept", { home: h })).toBe(true);
    expect(await daemonStatus({ home: h })).toBeNull();
    expect(await closeSession("kept", { home: h })).toBe(false);
    await Bun.sleep(200);
    const fresh = await s.execute("'v' in globals()");
    expect(fresh.value).toBe("False");
    expect(fresh.restored).toBeUndefined();
  });

  test("calls that need no supervisor do not start one", async () => {
    const h = home();
    expect(await listSessions({ home: h })).toEqual([]);
    expect(await daemonStatus({ home: h })).toBeNull();
    expect(await stopDaemon({ home: h })).toBe(false);
    expect(await closeSession("nothing", { home: h })).toBe(false);
  });

  test("the host bridge through the supervisor: onHostRequest answers; without it, a clear error", async () => {
    const h = home();
    await using s = await attach("bridge", { home: h, python: PYTHON });
    const code = "import awrepl\nr1 = await awrepl.host_request({'n': 1})\nr2 = await awrepl.host_request({'n': 2})\n(r1, r2)";
    const asked: unknown[] = [];
    const r = await s.execute(code, {
      onHostRequest: (data) => {
        asked.push(data);
        return { doubled: (data.n as number) * 2 };
      },
    });
    expect(asked).toEqual([{ n: 1 }, { n: 2 }]);
    expect(r.value).toBe("({'doubled': 2}, {'doubled': 4})");
    const none = await s.execute(code);
    expect(none.value).toBe("({'error': 'no host bridge in this awrepl host'}, {'error': 'no host bridge in this awrepl host'})");
  });

  test("a missing working directory is named, a usage error, and leaves no spec file behind", async () => {
    const h = home();
    const missing = join(h, "gone");
    await using s = await attach("nowhere", { home: h, python: PYTHON, cwd: missing });
    const err = await s.execute("1").catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "usage", message: `The working directory ${JSON.stringify(missing)} does not exist` });
    expect(existsSync(specPath(h, "nowhere"))).toBe(false);
    // The same name with a directory that exists works, and only then is its spec saved.
    await using ok = await attach("nowhere", { home: h, python: PYTHON, cwd: h });
    expect((await ok.execute("import os; os.getcwd()")).value).toBe(JSON.stringify(h).replace(/"/g, "'"));
    expect(existsSync(specPath(h, "nowhere"))).toBe(true);
  });

  test("a bad session name is a usage error before anything is started", async () => {
    const h = home();
    await expect(attach("no/slashes", { home: h })).rejects.toMatchObject({ code: "usage" });
    expect(await daemonStatus({ home: h })).toBeNull();
  });

  test("a closed RemoteSession refuses every call at once with session_closed naming it; a call awaiting its answer gets it too; nothing reconnects (issue 21 item 10)", async () => {
    const h = home();
    const a = await attach("shut", { home: h, python: PYTHON });
    await a.execute("x = 1");
    const waiting = a.execute("import time\ntime.sleep(30)");
    await waitFor(async () => (await state(h, "shut"))?.state === "busy");
    await a.close();
    const cut = await waiting.catch((e: unknown) => e);
    expect(cut).toBeInstanceOf(AwreplError);
    expect(cut).toMatchObject({ code: "session_closed", message: expect.stringContaining('"shut"') });
    const detached = a.executeDetached("ran = True");
    const calls: Record<string, () => Promise<unknown>> = {
      executeDetached: () => detached.result,
      keepResult: () => detached.keepResult(),
      execute: () => a.execute("ran = True"),
      collect: () => a.collect(0),
      variables: () => a.variables(),
      inspect: () => a.inspect("x"),
      reset: () => a.reset(),
      interrupt: () => a.interrupt(),
      complete: () => a.complete("x."),
      isComplete: () => a.isComplete("x"),
      snapshot: () => a.snapshot(),
      restore: () => a.restore(),
    };
    for (const [name, call] of Object.entries(calls)) {
      const t0 = performance.now();
      const err = await call().then(
        () => new Error(`${name} resolved on a closed session`),
        (e: unknown) => e,
      );
      expect([name, err]).toMatchObject([name, { code: "session_closed", message: expect.stringContaining('RemoteSession "shut" is closed') }]);
      // At once: nothing is sent, nothing waits for a connection.
      expect([name, performance.now() - t0 < 100]).toEqual([name, true]);
    }
    await a.close(); // a second close is harmless
    // Nothing was sent, and no connection of ours is left: the status call's own is the only one.
    await waitFor(async () => (await daemonStatus({ home: h }))?.connections === 1);
    await using b = await attach("shut", { home: h, python: PYTHON });
    expect((await b.execute("x, 'ran' in globals()")).value).toBe("(1, False)");
  });

  test("a supervisor of another version is asked to stop and replaced", async () => {
    const h = home();
    // A stand-in for an older supervisor: it answers hello with another version and exits on stop.
    const old = spawn("sleep", ["60"], { stdio: "ignore" });
    let stopped = false;
    const server = createServer((socket) => {
      socket.on("data", (chunk) => {
        for (const line of chunk.toString().split("\n").filter(Boolean)) {
          const msg = JSON.parse(line) as { op: string; id?: number };
          if (msg.op === "hello") socket.write(`${JSON.stringify({ type: "hello", ok: false, protocol: 0, version: "0.0.1", pid: old.pid })}\n`);
          else if (msg.op === "stop") {
            stopped = true;
            server.close();
            old.kill("SIGKILL");
            socket.destroy();
          } else socket.write(`${JSON.stringify({ type: "error", id: msg.id ?? null, code: "version_mismatch", message: "old" })}\n`);
        }
      });
    });
    await new Promise<void>((r) => server.listen(socketPath(h), r));
    await using s = await attach("upgraded", { home: h, python: PYTHON });
    const r = await s.execute("'new'");
    expect(stopped).toBe(true);
    expect(r.value).toBe("'new'");
    const status = await daemonStatus({ home: h });
    expect(status?.pid).not.toBe(old.pid);
  });
});

// A detached cell outlives its client; its result is kept for `collect` (once, one per session);
// keep_result keeps a result its client still receives; cancel withdraws.
const state = async (h: string, name: string) => (await listSessions({ home: h })).find((s) => s.name === name);

describe("detached cells (collect, keep_result)", () => {
  test("a detached cell runs on after its client closes; a new client collects its result, once", async () => {
    const h = home();
    const a = await attach("d", { home: h, python: PYTHON });
    await a.execute("n = 0");
    const cell = a.executeDetached("import time\nfor _ in range(10):\n    n += 1\n    time.sleep(0.05)\n'finished'");
    cell.result.catch(() => {}); // the connection closes under it
    await waitFor(async () => (await state(h, "d"))?.state === "busy");
    await a.close();
    await using b = await attach("d", { home: h, python: PYTHON });
    const first = await b.collect(0);
    // Either still running (not ours: another connection sent it) or, on a slow machine, already kept.
    if (first.state === "running") {
      expect(first.mine).toBe(false);
      const done = await b.collect(20_000);
      expect(done).toMatchObject({ state: "done", mine: false, result: { status: "ok", value: "'finished'" } });
    } else {
      expect(first).toMatchObject({ state: "done", result: { value: "'finished'" } });
    }
    expect(await b.collect(0)).toEqual({ state: "idle" });
    expect((await b.execute("n")).value).toBe("10");
  });

  test("without detach the same cell is interrupted when its client goes away, and nothing is kept", async () => {
    const h = home();
    const a = await attach("plain", { home: h, python: PYTHON });
    await a.execute("n = 0");
    a.execute("import time\nwhile True:\n    n += 1\n    time.sleep(0.01)").catch(() => {});
    await waitFor(async () => (await state(h, "plain"))?.state === "busy");
    await a.close();
    await waitFor(async () => (await state(h, "plain"))?.state === "idle");
    expect(await collectResult("plain", { home: h })).toEqual({ state: "idle" });
  });

  test("a detached call queued behind another client's cell still runs after its client left; only the latest result is kept", async () => {
    const h = home();
    await using person = await attach("q", { home: h, python: PYTHON });
    const a = await attach("q", { home: h, python: PYTHON });
    await person.execute("log = []");
    const blocker = person.execute("import time\ntime.sleep(0.5)\nlog.append('person')");
    await waitFor(async () => (await state(h, "q"))?.state === "busy");
    a.executeDetached("log.append('first'); 'first'").result.catch(() => {});
    a.executeDetached("log.append('second'); 'second'").result.catch(() => {});
    await waitFor(async () => (await state(h, "q"))?.queued === 2);
    await a.close();
    // A cell without detach (the person's) is not something collect waits for or keeps.
    expect((await blocker).status).toBe("ok");
    await waitFor(async () => (await state(h, "q"))?.state === "idle");
    expect((await person.execute("log")).value).toBe("['person', 'first', 'second']");
    const kept = await collectResult("q", { home: h });
    expect(kept).toMatchObject({ state: "done", result: { value: "'second'" } });
    expect(await collectResult("q", { home: h })).toEqual({ state: "idle" });
  });

  test("keep_result: the result still comes to its client and is kept for collect too; after the end it is false", async () => {
    const h = home();
    await using a = await attach("k", { home: h, python: PYTHON });
    const cell = a.executeDetached("import time\ntime.sleep(0.4)\n6 * 7");
    expect(await cell.keepResult()).toBe(true);
    expect((await cell.result).value).toBe("42");
    // Its own connection collects it: mine.
    expect(await a.collect(0)).toMatchObject({ state: "done", mine: true, result: { value: "42" } });
    expect(await a.collect(0)).toEqual({ state: "idle" });
    const quick = a.executeDetached("1 + 1");
    expect((await quick.result).value).toBe("2");
    expect(await quick.keepResult()).toBe(false);
    // Not kept: delivered, and nobody asked.
    expect(await a.collect(0)).toEqual({ state: "idle" });
  });

  test("every collect waiting gets the result; a cancelled collect answers at once; a cancelled cell's result is not kept", async () => {
    const h = home();
    await using a = await attach("w", { home: h, python: PYTHON });
    await using b = await attach("w", { home: h, python: PYTHON });
    const cell = a.executeDetached("import time\ntime.sleep(0.5)\n'both'");
    await cell.keepResult();
    const [x, y] = await Promise.all([b.collect(20_000), collectResult("w", { home: h, waitMs: 20_000 })]);
    expect(x).toMatchObject({ state: "done", result: { value: "'both'" } });
    expect(y).toMatchObject({ state: "done", result: { value: "'both'" } });
    await cell.result;
    // Handed to the waiting collects, so not kept as well.
    expect(await b.collect(0)).toEqual({ state: "idle" });

    const abort = new AbortController();
    const loop = a.executeDetached("while True:\n    pass", { signal: abort.signal });
    await loop.keepResult();
    const giveUp = new AbortController();
    const t0 = performance.now();
    const waiting = b.collect(60_000, { signal: giveUp.signal });
    setTimeout(() => giveUp.abort(), 200);
    expect(await waiting).toMatchObject({ state: "running", mine: false });
    expect(performance.now() - t0).toBeLessThan(30_000);
    abort.abort();
    expect((await loop.result).status).toBe("interrupted");
    await waitFor(async () => (await state(h, "w"))?.state === "idle");
    expect(await b.collect(0)).toEqual({ state: "idle" });
  });

  test("collect of a session that does not run is session_not_found", async () => {
    const h = home();
    await using a = await attach("exists", { home: h, python: PYTHON });
    await a.execute("1");
    const err = await collectResult("nope", { home: h }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AwreplError);
    expect((err as AwreplError).code).toBe("session_not_found");
  });
});

async function waitFor(cond: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`Condition not met within ${timeoutMs} ms`);
    await Bun.sleep(20);
  }
}
