import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime, sleep } from "../harness/mod.ts";

afterEach(closeAll);

// A __repr__ that outlives its time budget (it swallows the runtime's per-value timeout) and only
// ends when the request is interrupted.
const SLOW = "class Slow:\n    def __repr__(self):\n        while True:\n            try:\n                while True:\n                    pass\n" +
  "            except KeyboardInterrupt as e:\n                if type(e).__name__ != '_ReprTimedOut':\n                    raise\n" +
  "s = Slow()\nok = 1";

/** Send `msg`, wait until it is running, interrupt it with `how`; its done must come soon. */
async function interruptRequest(rt: Runtime, msg: Record<string, unknown>, how: "request" | "signal") {
  const id = rt.newId(String(msg.type));
  const start = rt.events.length;
  rt.send({ ...msg, id });
  await sleep(300); // the request is inside the endless __repr__ by now (a later interrupt still must work)
  if (how === "request") rt.send({ type: "interrupt", id });
  else process.kill(rt.pid, "SIGINT");
  return rt.waitFor((e) => e.event === "done" && e.id === id, 5_000, start);
}

describe("variables and inspect run user __repr__", () => {
  for (const how of ["request", "signal"] as const) {
    for (const loop of [false, true]) {
      test(`an endless __repr__: an interrupt (${how}) ends variables and inspect${loop ? " on the event loop" : ""}`, async () => {
        const rt = await Runtime.start();
        if (loop) expect((await rt.exec("import asyncio\nawait asyncio.sleep(0)")).done.status).toBe("ok");
        expect((await rt.exec(SLOW)).done.status).toBe("ok");
        const v = await interruptRequest(rt, { type: "variables" }, how);
        expect(v.status).toBe("error");
        expect(v.reason).toBe("interrupted");
        expect((await rt.exec("'next'")).result).toBe("'next'");
        const i = await interruptRequest(rt, { type: "inspect", name: "s" }, how);
        expect(i.status).toBe("error");
        expect(i.reason).toBe("interrupted");
        expect((await rt.exec("ok + 1")).result).toBe("2");
      });
    }
  }

  test("an endless __repr__ is cut at its time budget; the other names are listed", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      "import time\nclass Loop:\n    def __repr__(self):\n        while True:\n            pass\n" +
        "class Sleepy:\n    def __repr__(self):\n        time.sleep(60)\n        return 'late'\nloop, sleepy, fine = Loop(), Sleepy(), [1]",
    );
    const v = await rt.request({ type: "variables" });
    expect(v.done.status).toBe("ok");
    const vars = v.done.variables as Record<string, string>;
    expect(vars.loop).toBe("Loop: <repr timed out after 100 ms>");
    expect(vars.sleepy).toBe("Sleepy: <repr timed out after 100 ms>");
    expect(vars.fine).toBe("list[int] len 1: [1]");
    const i = await rt.request({ type: "inspect", name: "loop" });
    expect(i.done.status).toBe("ok");
    expect((i.done.info as Record<string, string>).repr).toBe("<repr timed out after 100 ms>");
    expect((await rt.exec("'next'")).result).toBe("'next'");
  });

  test("a __repr__ that raises (KeyboardInterrupt included) marks only its own name", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      "class K:\n    def __repr__(self):\n        raise KeyboardInterrupt\n" +
        "class E:\n    def __repr__(self):\n        raise ValueError('bad repr')\n" +
        "class N:\n    def __repr__(self):\n        return 5\n" +
        "k, e, n, fine = K(), E(), N(), [1]",
    );
    const v = await rt.request({ type: "variables" });
    expect(v.done.status).toBe("ok");
    const vars = v.done.variables as Record<string, string>;
    expect(vars.k).toBe("K: <repr failed: KeyboardInterrupt>");
    expect(vars.e).toStartWith("E: <E instance at 0x"); // reprlib's marker, kept
    expect(vars.n).toStartWith("N: <N instance at 0x");
    expect(vars.fine).toBe("list[int] len 1: [1]");
    const i = await rt.request({ type: "inspect", name: "k" });
    expect(i.done.status).toBe("ok");
    expect((i.done.info as Record<string, string>).repr).toBe("<repr failed: KeyboardInterrupt>");
  });

  test("inspect keeps the original awrepl's keys: one docstring, and dir for every value (a list too)", async () => {
    const rt = await Runtime.start();
    await rt.exec("x = [1, 2, 3]\ndef greet(n):\n    'Say hello.'\n    return n");
    const x = (await rt.request({ type: "inspect", name: "x" })).done.info as Record<string, unknown>;
    expect(x.type).toBe("list");
    expect(x.len).toBe(3);
    expect(x.dir).toContain("append");
    expect(typeof x.docstring).toBe("string");
    expect(x.doc).toBeUndefined(); // one docstring, under the original's key
    const g = (await rt.request({ type: "inspect", name: "greet" })).done.info as Record<string, unknown>;
    expect(g.docstring).toBe("Say hello.");
    expect(g.doc).toBeUndefined();
  });

  test("inspect bounds len() and __doc__ like repr: a slow or failing one is left out, the rest answers", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      "import time\nclass Slow:\n    def __len__(self):\n        time.sleep(5)\n        return 1\n" +
        "    @property\n    def __doc__(self):\n        time.sleep(5)\n        return 'late'\n" +
        "    def __repr__(self):\n        return 'Slow()'\n" +
        "class Bad:\n    def __len__(self):\n        raise RuntimeError('no len')\n" +
        "s, b = Slow(), Bad()",
    );
    const started = Date.now();
    const s = await rt.request({ type: "inspect", name: "s" }, 8000);
    expect(Date.now() - started).toBeLessThan(3000);
    const info = s.done.info as Record<string, unknown>;
    expect(info.repr).toBe("Slow()");
    expect(info.len).toBeUndefined();
    expect(info.docstring).toBeUndefined();
    const b = (await rt.request({ type: "inspect", name: "b" })).done.info as Record<string, unknown>;
    expect(b.len).toBeUndefined();
    expect(b.type).toBe("Bad");
  });

  test("variables lists at most 1000 names and says how many it left out", async () => {
    const rt = await Runtime.start();
    await rt.exec("for i in range(1500):\n    globals()['v%d' % i] = i");
    const v = await rt.request({ type: "variables" });
    const vars = v.done.variables as Record<string, string>;
    expect(Object.keys(vars).length).toBe(1001);
    expect(vars["..."]).toBe("501 more names not listed");
  });
});
