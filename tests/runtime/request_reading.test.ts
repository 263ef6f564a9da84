// Who reads the requests (runtime.py, "Who reads the requests"): the main thread between requests,
// the reader thread while one runs, a request line continuing across the hand-over either way.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime, sleep } from "../harness/mod.ts";

afterEach(closeAll);

/** Voluntary context switches of each thread of pid but its main one (Linux /proc). */
function helperThreadSwitches(pid: number): number {
  let total = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    if (Number(tid) === pid) continue;
    const status = readFileSync(`/proc/${pid}/task/${tid}/status`, "latin1");
    total += Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
  }
  return total;
}

/** Sends an execute of `code` and waits for its start marker (its first stdout). */
async function startCell(rt: Runtime, code: string): Promise<string> {
  const id = rt.newId("long");
  const from = rt.events.length;
  rt.send({ type: "execute", id, code: `print('started', flush=True)\n${code}` });
  await rt.waitFor((e) => e.id === id && e.event === "stdout", 10_000, from);
  return id;
}

describe("who reads the requests", () => {
  test.skipIf(!existsSync("/proc/self/task"))("between requests the main thread reads them: no other thread wakes per request (Linux /proc)", async () => {
    const rt = await Runtime.start();
    for (let i = 0; i < 20; i++) await rt.exec("1+1");
    await sleep(100); // start-up's idle work done
    const before = helperThreadSwitches(rt.pid);
    const calls = 300;
    for (let i = 0; i < calls; i++) expect((await rt.exec(`${i}+1`)).result).toBe(String(i + 1));
    const woken = helperThreadSwitches(rt.pid) - before;
    // Handing each request over from a reader thread woke it (and the main thread) once per request:
    // >= 300 here. What remains is the batch timer's ticks while requests come.
    expect(woken).toBeLessThan(calls / 3);
  });

  test("a request written while a cell runs is read at once: info and ping answer in the middle of a 2 s cell", async () => {
    const rt = await Runtime.start();
    const id = await startCell(rt, "import time\ntime.sleep(2)");
    const sent = performance.now();
    const info = await rt.request({ type: "info", id: rt.newId("info") }, 1_500);
    const ping = await rt.request({ type: "ping", id: rt.newId("ping") }, 1_500);
    expect(info.done.status).toBe("ok");
    expect(ping.done.status).toBe("ok");
    expect(performance.now() - sent).toBeLessThan(1_500);
    expect(rt.events.some((e) => e.event === "done" && e.id === id)).toBe(false); // the cell still runs
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id);
    expect(done.status).toBe("ok");
  });

  test("requests written in one burst are answered in order, the reading staying with whoever has it", async () => {
    const rt = await Runtime.start();
    const ids = Array.from({ length: 50 }, (_, i) => rt.newId(`b${i}`));
    rt.sendRaw(ids.map((id, i) => JSON.stringify({ type: "execute", id, code: `${i}*2` }) + "\n").join(""));
    await rt.waitFor((e) => e.event === "done" && e.id === ids[49]);
    const results = rt.events.filter((e) => e.event === "result").map((e) => [e.id, e.text]);
    expect(results).toEqual(ids.map((id, i) => [id, String(i * 2)]));
  });

  test("a request the reader thread queues while the main thread asks for the turn back is answered", async () => {
    const rt = await Runtime.start();
    // The reader thread (it has the turn: the cell has run over 2 ms) is still working through one
    // read of 2,900 pings when the cell ends; the main thread then finds the queue empty and asks
    // for the turn back; the execute at the end of that read is queued just before the reader parks.
    const pings = `${'{"type":"ping"}\n'.repeat(2_900)}`;
    for (let i = 0; i < 25; i++) {
      const cell = await startCell(rt, "import time\ntime.sleep(0.02)");
      await sleep(12);
      const next = rt.newId("next");
      rt.sendRaw(pings + JSON.stringify({ type: "execute", id: next, code: `${i}` }) + "\n");
      const done = await rt.waitFor((e) => e.event === "done" && e.id === next, 3_000);
      expect(done.status).toBe("ok");
      expect(rt.events.find((e) => e.event === "done" && e.id === cell)?.status).toBe("ok");
    }
  });

  test("a request line continues across the hand-over: begun by the main thread, ended by the reader thread, and the reverse", async () => {
    const rt = await Runtime.start();
    // The main thread reads a long cell and the first bytes of the next line; the rest comes once
    // the reader thread has the turn (the cell still runs).
    const busy = rt.newId("busy");
    const busyLine = JSON.stringify({ type: "execute", id: busy, code: "print('started', flush=True)\nimport time\ntime.sleep(0.4)" }) + "\n";
    const a = rt.newId("a");
    const lineA = JSON.stringify({ type: "execute", id: a, code: "'a' * 3" }) + "\n";
    rt.sendRaw(busyLine + lineA.slice(0, 20));
    await rt.waitFor((e) => e.id === busy && e.event === "stdout");
    await sleep(50);
    rt.sendRaw(lineA.slice(20));
    // The reader thread reads the first bytes of a line while the cell runs; the rest comes after
    // the main thread has taken the turn back.
    const b = rt.newId("b");
    const lineB = JSON.stringify({ type: "execute", id: b, code: "'b' * 3" }) + "\n";
    rt.sendRaw(lineB.slice(0, 25));
    await rt.waitFor((e) => e.event === "done" && e.id === a);
    await sleep(50);
    rt.sendRaw(lineB.slice(25));
    await rt.waitFor((e) => e.event === "done" && e.id === b);
    expect(rt.events.find((e) => e.event === "result" && e.id === a)?.text).toBe("'aaa'");
    expect(rt.events.find((e) => e.event === "result" && e.id === b)?.text).toBe("'bbb'");
    expect(rt.events.filter((e) => e.event === "error")).toEqual([]);
  });
});
