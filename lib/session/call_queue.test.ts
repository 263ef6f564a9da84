import { describe, expect, test } from "bun:test";
import { CallQueue, MissedTurn } from "./call_queue.ts";

const tick = () => new Promise((r) => setTimeout(r, 5));

describe("CallQueue", () => {
  test("runs calls one at a time in arrival order, failures included, and counts the waiting ones", async () => {
    const started: number[] = [];
    let running = 0;
    let most = 0;
    const queue = new CallQueue({ refusal: () => null, onStart: () => undefined });
    const call = (n: number, fail = false) =>
      queue.add(async () => {
        started.push(n);
        most = Math.max(most, ++running);
        await tick();
        running--;
        if (fail) throw new Error(`call ${n} failed`);
        return n;
      });
    const calls = [call(1), call(2, true), call(3)];
    expect(queue.waiting).toBe(2);
    const settled = await Promise.allSettled(calls);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(started).toEqual([1, 2, 3]);
    expect(most).toBe(1);
    expect(queue.waiting).toBe(0);
  });

  test("an idle queue starts a call at once; each start runs onStart", async () => {
    let starts = 0;
    let ran = false;
    const queue = new CallQueue({ refusal: () => null, onStart: () => starts++ });
    const result = queue.add(async () => {
      ran = true;
      return "done";
    });
    expect(ran).toBe(true);
    expect(await result).toBe("done");
    await queue.add(async () => undefined);
    expect(starts).toBe(2);
  });

  test("refuses calls on arrival, and waiting calls when their turn comes", async () => {
    let refusal: Error | null = null;
    const queue = new CallQueue({ refusal: () => refusal, onStart: () => undefined });
    const first = queue.add(async () => {
      await tick();
      refusal = new Error("closed");
    });
    let secondRan = false;
    const second = queue.add(async () => {
      secondRan = true;
    });
    await first;
    await expect(second).rejects.toThrow("closed");
    expect(secondRan).toBe(false);
    await expect(queue.add(async () => undefined)).rejects.toThrow("closed");
  });

  test("a call waits its turn no longer than its bound: it never runs, and says how long it waited", async () => {
    const queue = new CallQueue({ refusal: () => null, onStart: () => undefined });
    let release = () => {};
    const holder = queue.add(() => new Promise<void>((resolve) => (release = resolve)));
    let ran = false;
    const t0 = performance.now();
    const late = queue.add(
      async () => {
        ran = true;
      },
      { waitMs: 50 },
    );
    const missed = await late.then(() => null, (err: unknown) => err);
    expect(missed).toBeInstanceOf(MissedTurn);
    expect((missed as MissedTurn).reason).toEqual({ why: "timeout", timeoutMs: 50 });
    expect((missed as MissedTurn).waitedMs).toBeGreaterThanOrEqual(45);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(queue.waiting).toBe(0);
    // The next call still takes its turn after the holder, and gets how long it waited.
    let waited = -1;
    const next = queue.add(async (waitedMs) => {
      waited = waitedMs;
    });
    await tick();
    release();
    await holder;
    await next;
    expect(ran).toBe(false);
    expect(waited).toBeGreaterThan(0);
  });

  test("a call withdrawn while it waits (its signal aborts), or aborted before it arrives, never runs; once it runs the signal is its task's", async () => {
    const queue = new CallQueue({ refusal: () => null, onStart: () => undefined });
    const early = new AbortController();
    early.abort();
    // Aborted on arrival, even at an idle queue: withdrawn, never started.
    let ranEarly = false;
    const none = await queue
      .add(async () => {
        ranEarly = true;
      }, { signal: early.signal })
      .then(() => null, (err: unknown) => err);
    expect((none as MissedTurn).reason).toEqual({ why: "withdrawn" });
    expect(ranEarly).toBe(false);
    let release = () => {};
    const events: string[] = [];
    const mine = new AbortController();
    const holder = queue.add(() => new Promise<void>((resolve) => (release = resolve)), { signal: mine.signal, onStart: () => events.push("holder started") });
    const withdraw = new AbortController();
    let ran = false;
    const waiting = queue.add(
      async () => {
        ran = true;
      },
      { signal: withdraw.signal },
    );
    expect(queue.waiting).toBe(1);
    withdraw.abort();
    expect(((await waiting.then(() => null, (err: unknown) => err)) as MissedTurn).reason).toEqual({ why: "withdrawn" });
    expect(queue.waiting).toBe(0);
    mine.abort(); // started already: the queue leaves it to its task
    release();
    await holder;
    expect(ran).toBe(false);
    expect(events).toEqual(["holder started"]);
  });

  test("refuseWaiting refuses every waiting call at once; the running one is left alone", async () => {
    const queue = new CallQueue({ refusal: () => null, onStart: () => undefined });
    let release = () => {};
    const holder = queue.add(() => new Promise<string>((resolve) => (release = () => resolve("held"))));
    const ran: number[] = [];
    const waiting = [1, 2].map((n) =>
      queue.add(async () => {
        ran.push(n);
      })
    );
    queue.refuseWaiting(new Error("closed"));
    for (const w of waiting) await expect(w).rejects.toThrow("closed");
    release();
    expect(await holder).toBe("held");
    expect(ran).toEqual([]);
  });
});
