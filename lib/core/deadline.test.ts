import { describe, expect, test } from "bun:test";
import { deadline, DeadlineError } from "./deadline.ts";

const MODULE = new URL("./deadline.ts", import.meta.url).pathname;

/** How long a Bun process running `body` (with deadline imported) takes to exit, in ms. */
function msToExit(body: string): number {
  const t0 = performance.now();
  const run = Bun.spawnSync([process.execPath, "-e", `import { deadline } from ${JSON.stringify(MODULE)};\n${body}`], { timeout: 60_000, stderr: "pipe" });
  expect(run.stderr.toString()).toBe("");
  expect(run.exitCode).toBe(0);
  return performance.now() - t0;
}

describe("deadline", () => {
  test("settles as the promise does when it is in time: its value, or its own rejection unchanged", async () => {
    expect(await deadline(Promise.resolve(42), 1_000, "the answer")).toBe(42);
    const own = new Error("its own");
    expect(await deadline(Promise.reject(own), 1_000, "the answer").catch((e) => e)).toBe(own);
  });

  test("gives up after ms with an error naming what and the ms", async () => {
    const t0 = performance.now();
    const err = await deadline(new Promise<never>(() => {}), 50, "the supervisor's hello").catch((e: DeadlineError) => e);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
    expect(err).toBeInstanceOf(DeadlineError);
    expect(err.code).toBe("timeout");
    expect(err.message).toBe("Gave up waiting for the supervisor's hello after 50 ms");
    expect([err.what, err.ms]).toEqual(["the supervisor's hello", 50]);
  });

  test("a promise that rejects after the deadline is handled, not unhandled", async () => {
    let fail!: (e: Error) => void;
    const late = new Promise<never>((_, reject) => (fail = reject));
    expect(await deadline(late, 10, "late").catch((e) => e)).toBeInstanceOf(DeadlineError);
    fail(new Error("too late"));
    await Bun.sleep(10);
  });

  test("an abort gives up early with the signal's reason; an aborted signal at once; a late abort changes nothing", async () => {
    const ac = new AbortController();
    const waiting = deadline(new Promise(() => {}), 60_000, "a cell", { signal: ac.signal }).catch((e) => e);
    ac.abort(new Error("cancelled"));
    expect(((await waiting) as Error).message).toBe("cancelled");
    expect((await deadline(Promise.resolve(1), 60_000, "x", { signal: ac.signal }).catch((e) => e)).message).toBe("cancelled");
    const ok = new AbortController();
    const value = await deadline(Promise.resolve("done"), 60_000, "x", { signal: ok.signal });
    ok.abort();
    expect(value).toBe("done");
  });

  test("its timer is cleared once the promise settles: nothing keeps the process alive", () => {
    expect(msToExit("await deadline(Promise.resolve(1), 30_000, 'x');")).toBeLessThan(15_000);
    expect(msToExit("await deadline(Promise.reject(new Error('no')), 30_000, 'x').catch(() => {});")).toBeLessThan(15_000);
  });

  test("unref: the timer alone does not hold the process; no limit at all for a non-finite ms", async () => {
    expect(msToExit("void deadline(new Promise(() => {}), 30_000, 'x', { unref: true }).catch(() => {});")).toBeLessThan(15_000);
    expect(msToExit("void deadline(new Promise(() => {}), Infinity, 'x');")).toBeLessThan(15_000);
    let settled = false;
    void deadline(new Promise(() => {}), Infinity, "forever").finally(() => (settled = true));
    await Bun.sleep(20);
    expect(settled).toBe(false);
  });
});
