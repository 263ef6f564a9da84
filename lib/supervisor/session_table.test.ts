// The supervisor's session table with real workers: calls take their turns in their session's own
// queue (in arrival order, no longer than their timeout, a withdrawn one never runs), and the table
// keeps who owns which call, detached calls and kept results. Requests are stand-ins for dispatch.ts's.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AwreplError } from "../core/errors.ts";
import type { ExecResult } from "../protocol/result.ts";
import { useSessions, waitFor } from "../../tests/harness/mod.ts";
import { type Call, type SessionFactory, SessionTable } from "./session_table.ts";

const fixture = useSessions("t");

type Answer = { result?: ExecResult; value?: unknown; error?: AwreplError };
type Sent = { call: Call; answer: Promise<Answer>; started: () => boolean };

function table(factory: SessionFactory = (name) => fixture.start({}, name)): { sessions: SessionTable; log: string[] } {
  const log: string[] = [];
  return { sessions: new SessionTable(factory, () => {}, (line) => log.push(line)), log };
}

/** An execute of `owner` on session `name`, as dispatch.ts sends one (its timeout covers its wait). */
function cell(sessions: SessionTable, owner: object, id: number, code: string, options: { timeoutMs?: number; detach?: boolean; name?: string } = {}): Sent {
  const name = options.name ?? "t";
  let answered: (a: Answer) => void = () => {};
  const answer = new Promise<Answer>((resolve) => (answered = resolve));
  let started = false;
  const call: Call = {
    owner,
    id,
    abort: new AbortController(),
    detach: options.detach,
    fail: (error) => answered({ error }),
    run: async (session, turn) => {
      const result = await session.execute(code, {
        timeoutMs: options.timeoutMs ?? 0,
        signal: turn.signal,
        onStart: () => {
          started = true;
          turn.onStart();
        },
      });
      if (call.detach && !sessions.finishDetached(name, call, result)) return;
      answered({ result });
    },
  };
  sessions.submit(name, {}, call);
  return { call, answer, started: () => started };
}

/** A `variables` request of `owner`. */
function variables(sessions: SessionTable, owner: object, id: number): Sent {
  let answered: (a: Answer) => void = () => {};
  const answer = new Promise<Answer>((resolve) => (answered = resolve));
  let started = false;
  const call: Call = {
    owner,
    id,
    abort: new AbortController(),
    fail: (error) => answered({ error }),
    run: async (session, turn) => {
      const value = await session.variables({ ...turn, onStart: () => ((started = true), turn.onStart()) });
      answered({ value });
    },
  };
  sessions.submit("t", {}, call);
  return { call, answer, started: () => started };
}

/** A cell that holds its session until `release()` writes the file it waits for. */
function holder(sessions: SessionTable, owner: object, id: number, options: { detach?: boolean } = {}): Sent & { release(): void } {
  const file = join(fixture.tmp.home, `release-${id}`);
  const sent = cell(sessions, owner, id, `import os, time\nwhile not os.path.exists(${JSON.stringify(file)}): time.sleep(0.01)\nheld = ${id}`, options);
  return { ...sent, release: () => writeFileSync(file, "") };
}

async function value(sessions: SessionTable, owner: object, code: string): Promise<string | null | undefined> {
  return (await cell(sessions, owner, 999, code).answer).result?.value;
}

describe("a session's calls take their turns in its own queue", () => {
  test("in arrival order, one at a time; `sessions` shows the running one and counts the waiting ones", async () => {
    const { sessions } = table();
    const a = {};
    await value(sessions, a, "order = []");
    const first = holder(sessions, a, 1);
    await waitFor(first.started, 10_000, "the first cell to start");
    const second = cell(sessions, a, 2, "order.append(2)");
    const third = variables(sessions, {}, 3);
    const fourth = cell(sessions, a, 4, "order.append(4)");
    const [row] = await sessions.list();
    expect(row).toMatchObject({ name: "t", state: "busy", queued: 3 });
    expect(await sessions.interrupt("t", a)).toBe(true);
    expect((await first.answer).result?.status).toBe("interrupted");
    expect((await second.answer).result?.status).toBe("ok");
    expect(Object.keys((await third.answer).value as object)).toContain("order");
    expect((await fourth.answer).result?.status).toBe("ok");
    expect(await value(sessions, a, "order")).toBe("[2, 4]");
    expect((await sessions.list())[0]).toMatchObject({ state: "idle", queued: 0 });
    expect(await sessions.interrupt("t", a)).toBe(false);
  });

  test("a waiting cell whose timeout runs out never runs; a withdrawn cell never runs; a withdrawn variables is cancelled", async () => {
    const { sessions } = table();
    const a = {};
    const first = holder(sessions, a, 1);
    await waitFor(first.started, 10_000, "the first cell to start");
    const late = cell(sessions, a, 2, "ran_late = True", { timeoutMs: 200 });
    const withdrawn = cell(sessions, a, 3, "ran_withdrawn = True");
    const listing = variables(sessions, a, 4);
    const timedOut = (await late.answer).result;
    expect(timedOut?.status).toBe("timeout");
    expect(timedOut?.exception).toContain("200 ms timeout");
    expect(timedOut?.exception).toContain("never ran");
    expect(sessions.cancel(a, 3)).toBe(true);
    expect(sessions.cancel(a, 4)).toBe(true);
    const interrupted = (await withdrawn.answer).result;
    expect(interrupted?.status).toBe("interrupted");
    expect(interrupted?.exception).toContain("withdrawn before it ran");
    expect((await listing.answer).error?.code).toBe("cancelled");
    expect(sessions.cancel(a, 3)).toBe(false); // answered: nothing left to withdraw
    first.release();
    expect((await first.answer).result?.status).toBe("ok");
    expect(await value(sessions, a, "[n for n in ('ran_late', 'ran_withdrawn') if n in globals()]")).toBe("[]");
    expect([late, withdrawn, listing].some((s) => s.started())).toBe(false);
  });

  test("calls that arrive while their session starts take their turns after it, in arrival order; one withdrawn meanwhile never runs", async () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const { sessions } = table(async (name) => {
      await gate;
      return fixture.start({}, name);
    });
    const a = {};
    const first = cell(sessions, a, 1, "order = [1]");
    const second = cell(sessions, a, 2, "order.append(2)");
    const third = cell(sessions, a, 3, "order.append(3)");
    expect((await sessions.list())[0]).toMatchObject({ state: "idle", queued: 3, pid: null });
    expect(sessions.cancel(a, 2)).toBe(true);
    open();
    expect((await first.answer).result?.status).toBe("ok");
    expect((await second.answer).result?.exception).toContain("withdrawn before it ran");
    expect((await third.answer).result?.status).toBe("ok");
    expect(await value(sessions, a, "order")).toBe("[1, 3]");
  });

  test("close: a waiting call fails as closed before it ran, the running one as closed while it ran", async () => {
    const { sessions } = table();
    const a = {};
    const first = holder(sessions, a, 1);
    await waitFor(first.started, 10_000, "the first cell to start");
    const second = cell(sessions, a, 2, "1");
    expect(await sessions.close("t")).toBe(true);
    const [running, waiting] = [(await first.answer).error, (await second.answer).error];
    expect(waiting?.code).toBe("session_closed");
    expect(waiting?.message).toContain("closed before this call ran");
    expect(running?.code).toBe("session_closed");
    expect(running?.message).toContain("closed while this call ran");
    expect(sessions.has("t")).toBe(false);
  });
});

describe("who owns which call", () => {
  test("a client that goes away: its waiting calls never run and its running cell is interrupted; another client's calls run", async () => {
    const { sessions, log } = table();
    const gone = {};
    const other = {};
    const first = holder(sessions, gone, 1);
    await waitFor(first.started, 10_000, "the first cell to start");
    const queued = cell(sessions, gone, 2, "ran_gone = True");
    const theirs = cell(sessions, other, 3, "ran_other = True");
    sessions.dropOwner(gone);
    expect((await first.answer).result?.status).toBe("interrupted");
    expect((await queued.answer).result?.exception).toContain("withdrawn before it ran");
    expect((await theirs.answer).result?.status).toBe("ok");
    expect(queued.started()).toBe(false);
    expect(log).toContain("session t: client went away, interrupting its call 1");
  });

  test("a detached cell outlives its client: its result is kept for collect, handed out once", async () => {
    const { sessions, log } = table();
    const gone = {};
    const first = holder(sessions, gone, 1, { detach: true });
    await waitFor(first.started, 10_000, "the detached cell to start");
    const collector = {};
    expect(await sessions.collect(collector, 10, "t", 0)).toMatchObject({ state: "running", mine: false });
    sessions.dropOwner(gone);
    expect(log).toContain("session t: client went away; its detached call 1 runs on and its result is kept");
    first.release();
    await waitFor(() => log.some((l) => l.includes("kept the result of detached call 1")), 10_000, "the result to be kept");
    const got = await sessions.collect(collector, 11, "t", 0);
    expect(got).toMatchObject({ state: "done", mine: false, result: { status: "ok" } });
    expect(await sessions.collect(collector, 12, "t", 0)).toEqual({ state: "idle" });
  });

  test("a collect waiting for a detached cell still queued sees elapsed_ms null, then gets its result; a withdrawn one is its client's alone", async () => {
    const { sessions } = table();
    const a = {};
    const first = holder(sessions, a, 1);
    await waitFor(first.started, 10_000, "the first cell to start");
    const withdrawn = cell(sessions, a, 2, "1", { detach: true });
    const detached = cell(sessions, a, 3, "6 * 7", { detach: true });
    expect(await sessions.collect({}, 20, "t", 0)).toEqual({ state: "running", elapsed_ms: null, mine: false });
    expect(sessions.keepResult(a, 3)).toBe(true);
    expect(() => sessions.keepResult(a, 1)).toThrow("not a detached execute");
    sessions.cancel(a, 2);
    expect((await withdrawn.answer).result?.exception).toContain("withdrawn before it ran");
    const waiting = sessions.collect({}, 21, "t", 10_000);
    first.release();
    expect(await waiting).toMatchObject({ state: "done", result: { value: "42" } });
    expect((await detached.answer).result?.value).toBe("42");
    await new Promise((resolve) => setTimeout(resolve, 0)); // the table forgets a call once its answer is sent
    // The collect took it: not kept as well.
    expect(await sessions.collect({}, 22, "t", 0)).toEqual({ state: "idle" });
  });
});
