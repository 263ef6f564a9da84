import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

describe("top-level await and the awaitable rule", () => {
  test("top-level await works and background tasks keep running between cells", async () => {
    const rt = await Runtime.start();
    await rt.exec("import asyncio\nticks = []\nasync def tick():\n    while True:\n        ticks.append(1)\n        await asyncio.sleep(0.01)\nt = asyncio.create_task(tick())");
    await new Promise((r) => setTimeout(r, 200));
    const a = await rt.exec("await asyncio.sleep(0)\nlen(ticks) > 5");
    expect(a.result).toBe("True");
  });

  test("a bare coroutine as the last expression is awaited: f(x) and await f(x) agree", async () => {
    const rt = await Runtime.start();
    await rt.exec("async def f(x):\n    return x * 2");
    expect((await rt.exec("f(21)")).result).toBe("42");
    expect((await rt.exec("await f(21)")).result).toBe("42");
    expect((await rt.exec("_")).result).toBe("42");
  });

  test("a started asyncio.Task is kept, not awaited", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import asyncio\nasync def forever():\n    await asyncio.sleep(1e9)\nasyncio.ensure_future(forever())", 5000);
    expect(a.result).toMatch(/^<Task pending/);
    expect(a.done.status).toBe("ok");
  });

  test("the trailing value is settled: await on a plain value returns it unchanged", async () => {
    const rt = await Runtime.start();
    expect((await rt.exec("5")).result).toBe("5");
    const a = await rt.exec("await _");
    expect(a.error).toBeNull();
    expect(a.result).toBe("5");
    const b = await rt.exec("async def f():\n    return 7\nx = await _\nmixed = [await v for v in [f(), 3]]\nx, mixed");
    expect(b.result).toBe("(5, [7, 3])");
  });

  test("awaits inside the cell's own functions keep Python's rules", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("async def g():\n    return await 5\nawait g()");
    expect(a.error!.ename).toBe("TypeError");
  });

  test("a future as the last expression is awaited", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import asyncio\nfut = asyncio.get_running_loop().create_future()\nasyncio.get_running_loop().call_later(0.01, fut.set_result, 'set')\nfut");
    expect(a.result).toBe("'set'");
  });

  test("a sync cell calling asyncio.create_task runs on the persistent loop", async () => {
    const rt = await Runtime.start();
    await rt.exec("import asyncio\nout = []\nasync def w():\n    out.append('ran')\nt = asyncio.create_task(w())");
    expect((await rt.exec("await asyncio.sleep(0.01)\nout")).result).toBe("['ran']");
  });

  test("an exception inside an awaited coroutine shows the cell frames", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("async def boom():\n    raise ValueError('inner')\nawait boom()");
    expect(a.error!.ename).toBe("ValueError");
    const tb = (a.error!.traceback as string[]).join("");
    expect(tb).toContain("raise ValueError('inner')");
    expect(tb).not.toMatch(/runtime\.py/);
  });

  test("a last line `await f()` keeps its own cell frame in the traceback, for an exception and for an interrupt", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("async def boom():\n    raise ValueError('inner')\nawait boom()");
    const tb = (a.error!.traceback as string[]).join("");
    expect(tb).toMatch(/<cell-\d+>", line 3, in <module>\n\s+await boom\(\)/);
    expect(tb).toMatch(/<cell-\d+>", line 2, in boom/);
    // The same with the value bound (`y = await f()`), which always kept it.
    const b = await rt.exec("async def boom():\n    raise ValueError('inner')\ny = await boom()");
    expect((b.error!.traceback as string[]).join("")).toMatch(/line 3, in <module>\n\s+y = await boom\(\)/);
    // An interrupt while the last line awaits.
    await rt.exec("import asyncio\nasync def wait():\n    await asyncio.sleep(30)");
    const pending = rt.exec("x = 1\nawait wait()");
    await new Promise((r) => setTimeout(r, 300));
    rt.send({ type: "interrupt" });
    const c = await pending;
    expect(c.error!.ename).toBe("KeyboardInterrupt");
    expect((c.error!.traceback as string[]).join("")).toMatch(/<cell-\d+>", line 2, in <module>\n\s+await wait\(\)/);
  });

  test("`await v` on the last line returns v's value once (a coroutine that returns a coroutine is not awaited twice)", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("async def inner():\n    return 1\nasync def outer():\n    return inner()\nc = await outer()\ntype(c).__name__");
    expect(a.result).toBe("'coroutine'");
    const b = await rt.exec("await outer()");
    expect(b.result).toMatch(/^<coroutine object inner/);
    expect((await rt.exec("await 5")).result).toBe("5");
  });
});
