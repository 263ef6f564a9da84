import { describe, expect, test } from "bun:test";
import { CallQueue } from "./call_queue.ts";

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
});
