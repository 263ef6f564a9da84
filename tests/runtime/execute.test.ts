import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

describe("handshake and execute", () => {
  test("ready announces protocol 3, the python version, capabilities and the pid", async () => {
    const rt = await Runtime.start();
    const ready = rt.events[0]!;
    expect(ready.event).toBe("ready");
    expect(ready.protocol).toBe(3);
    expect(ready.python).toMatch(/^3\.\d+\.\d+$/);
    expect(ready.capabilities).toContain("signatures");
    expect(ready.pid).toBe(rt.pid);
  });

  test("stdout, the trailing expression's repr as result, and _ bound to it", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("print('hi')\n6*7");
    expect(a.stdout).toBe("hi\n");
    expect(a.result).toBe("42");
    expect(a.done.status).toBe("ok");
    const b = await rt.exec("_ + 1");
    expect(b.result).toBe("43");
    const c = await rt.exec("x = None\nx");
    expect(c.result).toBeNull();
  });

  test("done is the last event of its request", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import sys\nprint('a')\nprint('b', file=sys.stderr)\n'v'");
    expect(a.events.at(-1)!.event).toBe("done");
    expect(a.stderr).toBe("b\n");
    expect(a.result).toBe("'v'");
  });

  test("an exception: error event with the runtime's frames stripped and the cell line shown", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("def f(x):\n    return 1 / x\nf(0)");
    expect(a.done.status).toBe("error");
    expect(a.error!.ename).toBe("ZeroDivisionError");
    expect(a.error!.evalue).toBe("division by zero");
    const tb = (a.error!.traceback as string[]).join("");
    expect(tb).toMatch(/File "<cell-\d+>", line 3, in <module>\n\s+f\(0\)/);
    expect(tb).toContain("return 1 / x");
    expect(tb).not.toContain("runtime");
    expect(tb.trimEnd().endsWith("ZeroDivisionError: division by zero")).toBe(true);
  });

  test("a syntax error is reported with the cell's line", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("x = (1,\ny = 2 +");
    expect(a.error!.ename).toBe("SyntaxError");
    expect(a.done.status).toBe("error");
    const ok = await rt.exec("1");
    expect(ok.result).toBe("1");
  });

  test("cell sources are in linecache under <cell-N>", async () => {
    const rt = await Runtime.start();
    await rt.exec("def g():\n    return 'body line'");
    const a = await rt.exec("import inspect\ninspect.getsource(g)");
    expect(a.result).toContain("def g():\\n    return 'body line'");
  });

  test("state persists between cells; imports too", async () => {
    const rt = await Runtime.start();
    await rt.exec("import json\ndata = {'a': [1, 2]}");
    const a = await rt.exec("json.dumps(data)");
    expect(a.result).toBe(`'{"a": [1, 2]}'`);
  });
});
