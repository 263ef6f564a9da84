import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime, sleep } from "../harness/mod.ts";

afterEach(closeAll);

const SCRIPT = "import asyncio\nasync def main():\n    await asyncio.sleep(0.01)\n    return 'done'\nif __name__ == '__main__':\n    print(asyncio.run(main()))";
const BACKGROUND =
  "import asyncio\nticks = []\nasync def bg():\n    while True:\n        ticks.append(1)\n        await asyncio.sleep(0.01)\ntask = asyncio.ensure_future(bg())\nawait asyncio.sleep(0)";

describe("asyncio.run() in a cell", () => {
  test("a script's asyncio.run(main()) works in a fresh session, and again later", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(SCRIPT);
    expect(a.error).toBeNull();
    expect(a.stdout).toBe("done\n");
    expect((await rt.exec("asyncio.run(main())")).result).toBe("'done'");
  });

  test("with the session's loop running: asyncio.run works, background tasks survive, the loop is still the session's", async () => {
    const rt = await Runtime.start();
    expect((await rt.exec(BACKGROUND)).done.status).toBe("ok");
    const a = await rt.exec(SCRIPT);
    expect(a.error).toBeNull();
    expect(a.stdout).toBe("done\n");
    const loop = await rt.exec("loop = asyncio.new_event_loop()\nr = loop.run_until_complete(main())\nloop.close()\nr");
    expect(loop.result).toBe("'done'");
    const after = await rt.exec("n = len(ticks)\nawait asyncio.sleep(0.1)\nlen(ticks) > n, task.done(), asyncio.get_event_loop() is asyncio.get_running_loop()");
    expect(after.result).toBe("(True, False, True)");
  });

  test("an interrupt stops an asyncio.run() cell; the session keeps its loop", async () => {
    const rt = await Runtime.start();
    await rt.exec(BACKGROUND);
    const id = rt.newId("long");
    const start = rt.events.length;
    rt.send({ type: "execute", id, code: "asyncio.run(asyncio.sleep(60))" });
    await sleep(300);
    rt.send({ type: "interrupt", id });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 10_000, start);
    expect(done.status).toBe("error");
    expect(rt.events.slice(start).find((e) => e.event === "error" && e.id === id)!.ename).toBe("KeyboardInterrupt");
    const after = await rt.exec("n = len(ticks)\nawait asyncio.sleep(0.1)\nlen(ticks) > n");
    expect(after.result).toBe("True");
  });

  test("where it still cannot work (a top-level await in the same cell), the error says what to do", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import asyncio\nawait asyncio.sleep(0)\nasyncio.run(asyncio.sleep(0))");
    expect(a.error!.ename).toBe("RuntimeError");
    const tb = (a.error!.traceback as string[]).join("");
    expect(tb).toContain("use `await main()` at top level instead of `asyncio.run(main())`");
  });
});
