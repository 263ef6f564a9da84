import { afterEach, describe, expect, test } from "bun:test";
import { Runtime, closeAll, isAlive } from "./harness.ts";

afterEach(closeAll);

describe("shutdown and stdin EOF", () => {
  test("shutdown with an id replies done and exits 0", async () => {
    const rt = await Runtime.start();
    const { done } = await rt.request({ type: "shutdown" });
    expect(done.status).toBe("ok");
    expect(await rt.waitExit(5000)).toBe(true);
    expect(rt.exitCode).toBe(0);
  });

  test("shutdown without an id exits 0 with no done", async () => {
    const rt = await Runtime.start();
    rt.send({ type: "shutdown" });
    expect(await rt.waitExit(5000)).toBe(true);
    expect(rt.exitCode).toBe(0);
    expect(rt.events.some((e) => e.event === "done")).toBe(false);
  });

  test("a non-daemon user thread does not hold the exit", async () => {
    const rt = await Runtime.start();
    await rt.exec("import threading, time\nthreading.Thread(target=lambda: time.sleep(600)).start()");
    rt.send({ type: "shutdown", id: "bye" });
    expect(await rt.waitExit(6000)).toBe(true);
  });

  test("stdin EOF while idle exits 0", async () => {
    const rt = await Runtime.start();
    rt.proc.stdin!.end();
    expect(await rt.waitExit(5000)).toBe(true);
    expect(rt.exitCode).toBe(0);
  });

  test("stdin EOF while a cell spins in a C loop: the process still exits within a few seconds", async () => {
    const rt = await Runtime.start();
    rt.send({ type: "execute", id: "spin", code: "sum(range(10**12))" });
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    rt.proc.stdin!.end();
    expect(await rt.waitExit(6000)).toBe(true);
    expect(Date.now() - t0).toBeLessThan(6000);
    expect(isAlive(rt.pid)).toBe(false);
  });

  test("stdin EOF while a Python loop runs exits too", async () => {
    const rt = await Runtime.start();
    rt.send({ type: "execute", id: "loop", code: "while True: pass" });
    await new Promise((r) => setTimeout(r, 100));
    rt.proc.stdin!.end();
    expect(await rt.waitExit(6000)).toBe(true);
  });
});
