import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime, sleep } from "../harness/mod.ts";

afterEach(closeAll);

async function interruptRunning(rt: Runtime, code: string, opts: { withId?: boolean; settleMs?: number } = {}) {
  const id = rt.newId("x");
  const start = rt.events.length;
  rt.send({ type: "execute", id, code: `print('started', flush=True)\n${code}` });
  await rt.waitFor((e) => e.id === id && e.event === "stdout", 10_000, start);
  await sleep(opts.settleMs ?? 100);
  rt.send(opts.withId ? { type: "interrupt", id } : { type: "interrupt" });
  const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 10_000, start);
  const error = rt.events.slice(start).find((e) => e.event === "error" && e.id === id);
  return { done, error };
}

describe("interrupt", () => {
  test("sync bytecode: while True: pass", async () => {
    const rt = await Runtime.start();
    const { done, error } = await interruptRunning(rt, "while True: pass");
    expect(done.status).toBe("error");
    expect(error!.ename).toBe("KeyboardInterrupt");
    expect((error!.traceback as string[]).join("")).toContain("<cell-");
    expect((await rt.exec("1+1")).result).toBe("2");
  });

  test("a blocking syscall: time.sleep", async () => {
    const rt = await Runtime.start();
    const { error } = await interruptRunning(rt, "import time\ntime.sleep(60)", { withId: true });
    expect(error!.ename).toBe("KeyboardInterrupt");
    expect((await rt.exec("2")).result).toBe("2");
  });

  test("a cell suspended at an await", async () => {
    const rt = await Runtime.start();
    const { error } = await interruptRunning(rt, "import asyncio\nawait asyncio.sleep(1e9)");
    expect(error!.ename).toBe("KeyboardInterrupt");
    expect((await rt.exec("3")).result).toBe("3");
  });

  test("a background task holding the thread while the cell awaits", async () => {
    const rt = await Runtime.start();
    await rt.exec("import asyncio, time\nasync def hog():\n    await asyncio.sleep(0.05)\n    while True: time.sleep(0.01)\nbg = asyncio.ensure_future(hog())");
    const { error } = await interruptRunning(rt, "await asyncio.sleep(1e9)", { settleMs: 300 });
    expect(error!.ename).toBe("KeyboardInterrupt");
    const after = await rt.exec("bg.done()");
    expect(after.result).toBe("True");
  });

  test("sync code inside an async cell is interrupted directly", async () => {
    const rt = await Runtime.start();
    const { error } = await interruptRunning(rt, "import asyncio\nawait asyncio.sleep(0)\nwhile True: pass");
    expect(error!.ename).toBe("KeyboardInterrupt");
    expect((await rt.exec("4")).result).toBe("4");
  });

  test("execute + interrupt written back to back still interrupts the cell", async () => {
    const rt = await Runtime.start();
    // Occupy the runtime so the second request is still queued when its interrupt arrives.
    const busy = rt.newId("busy");
    rt.send({ type: "execute", id: busy, code: "import time\ntime.sleep(0.3)" });
    const id = rt.newId("parked");
    rt.send({ type: "execute", id, code: "print('ran')\nwhile True: pass" });
    rt.send({ type: "interrupt", id });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id);
    expect(done.status).toBe("error");
    const evs = rt.events.filter((e) => e.id === id);
    expect(evs.find((e) => e.event === "error")!.ename).toBe("KeyboardInterrupt");
    expect(evs.some((e) => e.event === "stdout")).toBe(false);
    const busyDone = rt.events.find((e) => e.event === "done" && e.id === busy)!;
    expect(busyDone.status).toBe("ok");
  });

  test("an interrupt without id parks on the next queued request", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("q");
    rt.sendRaw(JSON.stringify({ type: "execute", id, code: "while True: pass" }) + "\n" + JSON.stringify({ type: "interrupt" }) + "\n");
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id);
    expect(done.status).toBe("error");
  });

  test("interrupts for unknown or finished ids are dropped; idle interrupts are ignored", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("1");
    rt.send({ type: "interrupt", id: a.done.id });
    rt.send({ type: "interrupt", id: "never-sent" });
    rt.send({ type: "interrupt" });
    await sleep(100);
    const b = await rt.exec("import time\ntime.sleep(0.2)\n'survived'");
    expect(b.result).toBe("'survived'");
    expect(b.done.status).toBe("ok");
  });

  test("an interrupt for another id leaves the running cell alone", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("x");
    rt.send({ type: "execute", id, code: "import time\ntime.sleep(0.3)\n'fine'" });
    await sleep(50);
    rt.send({ type: "interrupt", id: "other" });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id);
    expect(done.status).toBe("ok");
  });

  test("the Windows fallback cancels an await-suspended cell", async () => {
    const rt = await Runtime.start({ env: { AWREPL_INTERRUPT_FALLBACK: "1" } });
    const { error } = await interruptRunning(rt, "import asyncio\nawait asyncio.sleep(1e9)");
    expect(error!.ename).toBe("KeyboardInterrupt");
    expect((await rt.exec("5")).result).toBe("5");
  });

  test("user code catching KeyboardInterrupt around sync code intercepts it", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("x");
    rt.send({ type: "execute", id, code: "import time\nprint('go', flush=True)\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    caught = True\ncaught" });
    await rt.waitFor((e) => e.id === id && e.event === "stdout");
    await sleep(50);
    rt.send({ type: "interrupt", id });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id);
    expect(done.status).toBe("ok");
    expect(rt.events.find((e) => e.id === id && e.event === "result")!.text).toBe("True");
  });

  test("a SIGINT sent to the process interrupts the running cell, even in a blocking call", async () => {
    const rt = await Runtime.start();
    process.kill(rt.pid, "SIGINT"); // idle: ignored
    expect((await rt.exec("'alive'")).result).toBe("'alive'");
    const id = rt.newId("sig");
    const start = rt.events.length;
    rt.send({ type: "execute", id, code: "import time\nprint('go', flush=True)\ntime.sleep(60)" });
    await rt.waitFor((e) => e.event === "stdout" && e.id === id, 10_000, start);
    await sleep(50);
    process.kill(rt.pid, "SIGINT");
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 10_000, start);
    expect(done.status).toBe("error");
    expect(rt.events.find((e) => e.event === "error" && e.id === id)!.ename).toBe("KeyboardInterrupt");
  });

  test("the trailing value's repr is still interruptible", async () => {
    const rt = await Runtime.start();
    await rt.exec("import time\nclass Slow:\n    def __repr__(self):\n        time.sleep(60)\n        return 'never'");
    const id = rt.newId("repr");
    const start = rt.events.length;
    rt.send({ type: "execute", id, code: "print('go', flush=True)\nSlow()" });
    await rt.waitFor((e) => e.event === "stdout" && e.id === id, 10_000, start);
    await sleep(100);
    rt.send({ type: "interrupt", id });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 10_000, start);
    expect(done.status).toBe("error");
    const evs = rt.events.slice(start).filter((e) => e.id === id);
    expect(evs.find((e) => e.event === "error")!.ename).toBe("KeyboardInterrupt");
    expect(evs.some((e) => e.event === "result")).toBe(false);
  });
});
