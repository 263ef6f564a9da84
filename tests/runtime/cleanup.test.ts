// Exit, heartbeat and cleanup (docs/protocol.md): `shutdown` with `now`, `ping`, `heartbeat`, `info`,
// the process group the runtime leads, and the watchdog that ends that group when the runtime exits,
// when stdin hangs up behind a C loop, and on heartbeat silence. Bounds are generous (a shared
// machine); each test says what it measured when it passes.
import { afterEach, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { closeAll, goneWithin, PYTHON, running, Runtime, RUNTIME_PATH, sleep } from "../harness/mod.ts";

afterEach(closeAll);

/** Starts `sleep 1000` from a cell (the runtime's group) and returns its pid. */
async function startChild(rt: Runtime): Promise<number> {
  const r = await rt.exec("import subprocess\n_p = subprocess.Popen(['sleep', '1000'])\nprint(_p.pid)");
  return Number(r.stdout.trim());
}

describe("capabilities and facts", () => {
  test("ready lists exit_now, heartbeat, info and snapshot_stream", async () => {
    const rt = await Runtime.start();
    const ready = rt.events.find((e) => e.event === "ready");
    expect(ready?.capabilities).toEqual(expect.arrayContaining(["exit_now", "heartbeat", "info", "snapshot_stream"]));
  });

  test("info: the worker's own facts, answered while a Python cell runs (busy names it)", async () => {
    const rt = await Runtime.start({ cwd: "/tmp" });
    const { done } = await rt.request({ type: "info" });
    const facts = done.facts as Record<string, unknown>;
    expect(facts.pid).toBe(rt.pid);
    expect(facts.pgid).toBe(rt.pid);
    expect(facts.own_group).toBe(true);
    expect(typeof facts.host).toBe("string");
    expect(facts.cwd).toBe("/tmp");
    expect(facts.rss as number).toBeGreaterThan(1 << 20);
    expect(facts.peak_rss as number).toBeGreaterThanOrEqual(facts.rss as number);
    expect(facts.busy).toBeNull();
    const busy = rt.exec("import time\nt = time.time()\nwhile time.time() - t < 1.5: pass", 20_000, "spin");
    await sleep(300);
    const during = await rt.request({ type: "info" }, 5_000);
    expect((during.done.facts as { busy: unknown }).busy).toEqual({ id: "spin", type: "execute" });
    expect(rt.events.some((e) => e.event === "done" && e.id === "spin")).toBe(false);
    await busy;
  });

  test("ping with an id is answered at once while a cell runs; without one it gets no reply", async () => {
    const rt = await Runtime.start();
    rt.send({ type: "execute", id: "spin", code: "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass" });
    await sleep(100);
    const { done } = await rt.request({ type: "ping" }, 5_000);
    expect(done.status).toBe("ok");
    expect(typeof done.time).toBe("number");
    expect(rt.events.some((e) => e.event === "done" && e.id === "spin")).toBe(false);
    const before = rt.events.length;
    rt.send({ type: "ping" });
    await rt.waitFor((e) => e.event === "done" && e.id === "spin", 10_000);
    expect(rt.events.slice(before).filter((e) => e.event === "done" && e.id !== "spin")).toEqual([]);
  });

  test("heartbeat refuses a timeout that is not a non-negative integer", async () => {
    const rt = await Runtime.start();
    for (const bad of [-1, 1.5, "5", true]) {
      const { done } = await rt.request({ type: "heartbeat", timeout_ms: bad });
      expect(done.status).toBe("error");
      expect(String(done.reason)).toContain("timeout_ms");
    }
  });
});

describe("the process group", () => {
  test("a runtime started inside another's group makes its own; a shutdown ends its children", async () => {
    // sh does not exec python here (`; :`): python is a member of sh's group, as behind a shell.
    const sh = spawn("/bin/sh", ["-c", `${PYTHON} -u ${RUNTIME_PATH}; :`], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    const events: Record<string, unknown>[] = [];
    let buf = "";
    sh.stdout?.setEncoding("utf8").on("data", (d: string) => {
      buf += d;
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        events.push(JSON.parse(buf.slice(0, i)));
        buf = buf.slice(i + 1);
      }
    });
    const next = async (pred: (e: Record<string, unknown>) => boolean) => {
      for (let k = 0; k < 1000; k++) {
        const e = events.find(pred);
        if (e) return e;
        await sleep(10);
      }
      throw new Error(`no such event; got ${JSON.stringify(events)}`);
    };
    try {
      const pid = (await next((e) => e.event === "ready")).pid as number;
      expect(pid).not.toBe(sh.pid);
      sh.stdin?.write('{"type":"info","id":"i"}\n');
      const facts = (await next((e) => e.id === "i")).facts as { pgid: number; own_group: boolean };
      expect(facts.pgid).toBe(pid);
      expect(facts.own_group).toBe(true);
      sh.stdin?.write(`{"type":"execute","id":"c","code":"import subprocess\\n_p = subprocess.Popen(['sleep', '1000'])\\nprint(_p.pid)"}\n`);
      const child = Number(String((await next((e) => e.event === "stdout" && e.id === "c")).text).trim());
      await next((e) => e.event === "done" && e.id === "c");
      sh.stdin?.write('{"type":"shutdown"}\n');
      expect(await goneWithin(pid, 5_000)).not.toBeNull();
      expect(await goneWithin(child, 5_000)).not.toBeNull();
    } finally {
      try {
        process.kill(-(sh.pid as number), "SIGKILL");
      } catch {
        // gone
      }
    }
  });

  test("a forked child that lives on does not hide the runtime's exit (the channel fds are closed in it)", async () => {
    const rt = await Runtime.start();
    // A forked child in a session of its own (not in the runtime's group), sleeping: it must not
    // hold the protocol pipe, or the host would not see the runtime's stdout end.
    const r = await rt.exec("import os, time\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    time.sleep(30)\n    os._exit(0)\nprint(pid)");
    const child = Number(r.stdout.trim());
    try {
      let ended = false;
      rt.proc.stdout?.once("end", () => {
        ended = true;
      });
      rt.send({ type: "shutdown", id: "bye" });
      expect(await rt.waitExit(5_000)).toBe(true);
      for (let i = 0; i < 300 && !ended; i++) await sleep(10);
      expect(ended).toBe(true);
      expect(running(child)).toBe(true); // it left the group on purpose: not ours to end
    } finally {
      process.kill(child, "SIGKILL");
    }
  });
});

describe("shutdown now", () => {
  test("ends a busy pure-Python cell and its children at once", async () => {
    const rt = await Runtime.start();
    const child = await startChild(rt);
    rt.send({ type: "execute", id: "spin", code: "while True: pass" });
    await sleep(200);
    const t0 = performance.now();
    rt.send({ type: "shutdown", now: true });
    expect(await rt.waitExit(3_000)).toBe(true);
    const exitMs = performance.now() - t0;
    const childMs = await goneWithin(child, 3_000);
    expect(childMs).not.toBeNull();
    expect(rt.events.some((e) => e.event === "done" && e.id === "spin")).toBe(false);
    console.log(`shutdown now, Python loop: worker gone in ${exitMs.toFixed(0)} ms, its child ${childMs?.toFixed(0)} ms later`);
  });

  test("with stdin closed after it, ends a C loop holding the GIL, and its children", async () => {
    const rt = await Runtime.start();
    const child = await startChild(rt);
    rt.send({ type: "execute", id: "spin", code: "sum(range(10**12))" });
    await sleep(300);
    const t0 = performance.now();
    rt.send({ type: "shutdown", now: true });
    rt.proc.stdin?.end();
    expect(await rt.waitExit(4_000)).toBe(true);
    const exitMs = performance.now() - t0;
    const childMs = await goneWithin(child, 3_000);
    expect(childMs).not.toBeNull();
    console.log(`shutdown now + EOF, C loop: worker gone in ${exitMs.toFixed(0)} ms (${rt.exitSignal ?? rt.exitCode}), its child ${childMs?.toFixed(0)} ms later`);
  });

  test("stdin EOF alone while idle: a graceful exit 0, and the cells' children end with it", async () => {
    const rt = await Runtime.start();
    const child = await startChild(rt);
    rt.proc.stdin?.end();
    expect(await rt.waitExit(5_000)).toBe(true);
    expect(rt.exitCode).toBe(0);
    expect(await goneWithin(child, 3_000)).not.toBeNull();
  });

  test("a plain shutdown ends the cells' children too (the watchdog sees the exit)", async () => {
    const rt = await Runtime.start();
    const child = await startChild(rt);
    const { done } = await rt.request({ type: "shutdown" });
    expect(done.status).toBe("ok");
    expect(await rt.waitExit(5_000)).toBe(true);
    expect(rt.exitCode).toBe(0);
    expect(await goneWithin(child, 3_000)).not.toBeNull();
  });
});

describe("heartbeat", () => {
  test("a C loop lives while pings arrive (unread, behind the GIL) and its group ends after they stop", async () => {
    const rt = await Runtime.start();
    const { done } = await rt.request({ type: "heartbeat", timeout_ms: 1_500 });
    expect(done.watchdog).toBe(true);
    const child = await startChild(rt);
    rt.send({ type: "execute", id: "spin", code: "sum(range(10**12))" });
    const pinger = setInterval(() => rt.send({ type: "ping" }), 300);
    await sleep(4_000); // over two deadlines: only the growing unread bytes on stdin keep it alive
    clearInterval(pinger);
    expect(running(rt.pid)).toBe(true);
    const t0 = performance.now();
    expect(await rt.waitExit(8_000)).toBe(true);
    const ms = performance.now() - t0;
    expect(await goneWithin(child, 3_000)).not.toBeNull();
    console.log(`heartbeat 1500 ms, C loop: gone ${ms.toFixed(0)} ms after the last ping`);
  });

  test("an idle worker lives while pinged, not at all with 0, and ends after silence", async () => {
    const rt = await Runtime.start();
    await rt.request({ type: "heartbeat", timeout_ms: 1_000 });
    const pinger = setInterval(() => rt.send({ type: "ping" }), 250);
    await sleep(2_500);
    clearInterval(pinger);
    expect(running(rt.pid)).toBe(true);
    await rt.request({ type: "heartbeat", timeout_ms: 0 });
    await sleep(2_000);
    expect(running(rt.pid)).toBe(true);
    await rt.request({ type: "heartbeat", timeout_ms: 800 });
    expect(await rt.waitExit(6_000)).toBe(true);
  });

  test("without a watchdog (AWREPL_NO_WATCHDOG) heartbeat says it is not enforced", async () => {
    const rt = await Runtime.start({ env: { AWREPL_NO_WATCHDOG: "1" } });
    const { done } = await rt.request({ type: "heartbeat", timeout_ms: 500 });
    expect(done.status).toBe("ok");
    expect(done.watchdog).toBe(false);
    await sleep(1_200);
    expect(running(rt.pid)).toBe(true);
  });
});
