import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, Runtime, tempHome } from "../harness/mod.ts";

afterEach(closeAll);

// A cell may delete or replace any builtin or module; the runtime resolves its own at start-up.
describe("user code tampering with builtins and modules", () => {
  test("del builtins.len: the cell finishes, state and the listing survive", async () => {
    const rt = await Runtime.start();
    await rt.exec("x = [1, 2, 3]");
    const a = await rt.exec("import builtins\ndel builtins.len");
    expect(a.done.status).toBe("ok");
    const b = await rt.exec("x");
    expect(b.result).toBe("[1, 2, 3]");
    const c = await rt.exec("len(x)");
    expect(c.done.status).toBe("error");
    expect(c.error!.ename).toBe("NameError");
    const v = await rt.request({ type: "variables" });
    expect((v.done.variables as Record<string, string>).x).toBe("list[int] len 3: [1, 2, 3]");
    expect(rt.badLines).toEqual([]);
  });

  test("builtins.__import__ = None: the cell gets its value, the worker keeps serving", async () => {
    const rt = await Runtime.start();
    const pid = rt.pid;
    const a = await rt.exec("import builtins\nbuiltins.__import__ = None\n8");
    expect(a.result).toBe("8");
    expect((await rt.exec("9")).result).toBe("9");
    const c = await rt.exec("def f():\n    return 1/0\nf()");
    expect(c.error!.ename).toBe("ZeroDivisionError");
    expect((c.error!.traceback as string[]).join("")).toContain("ZeroDivisionError");
    const d = await rt.exec("import json");
    expect(d.done.status).toBe("error");
    expect(d.error!.ename).toBe("TypeError");
    expect((await rt.exec("'alive'")).result).toBe("'alive'");
    expect(rt.pid).toBe(pid);
    expect(rt.exitCode).toBeNull();
  });

  test("repr, isinstance, print replaced: the runtime reports with its own", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import builtins\nbuiltins.repr = builtins.isinstance = builtins.print = None\n7");
    expect(a.result).toBe("7");
    expect((await rt.exec("{'a': (1, 2)}")).result).toBe("{'a': (1, 2)}");
    const e = await rt.exec("raise ValueError('still reported')");
    expect(e.error!.evalue).toBe("still reported");
    expect(e.done.status).toBe("error");
  });

  test("a value whose repr fails still gets its error and done", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("class B:\n    def __repr__(self):\n        raise RuntimeError('no repr')\nB()");
    expect(a.done.status).toBe("error");
    expect(a.error!.evalue).toBe("no repr");
    expect((await rt.exec("1 + 1")).result).toBe("2");
  });

  test("sys.stdout replaced, sys.modules entries removed: results, errors and snapshots still work", async () => {
    const tmp = tempHome("awrepl-tamper-");
    const dir = tmp.home;
    try {
      const rt = await Runtime.start();
      await rt.exec("data = {'k': [1, 2]}");
      const first = await rt.request({ type: "snapshot", path: join(dir, "a.pkl"), manifest_path: join(dir, "a.json") });
      expect(first.done.status).toBe("ok");
      const t = await rt.exec(
        "import io, sys\nsys.stdout = io.StringIO()\nfor m in ('json', 'traceback', 'linecache', 'pickle', 'reprlib', '_ast'):\n    sys.modules[m] = None",
      );
      expect(t.done.status).toBe("ok");
      expect((await rt.exec("data['k']")).result).toBe("[1, 2]");
      const e = await rt.exec("x = 1\ny = undefined_name");
      expect(e.error!.ename).toBe("NameError");
      const s = await rt.request({ type: "snapshot", path: join(dir, "b.pkl"), manifest_path: join(dir, "b.json") });
      expect(s.done.status).toBe("ok");
      expect(s.done.saved).toContain("data");
      expect(JSON.parse(readFileSync(join(dir, "b.json"), "utf8")).savedNames).toContain("data");
      const v = await rt.request({ type: "variables" });
      expect((v.done.variables as Record<string, string>).data).toBe("dict[str, list] len 1: {'k': [1, 2]}");
      expect(rt.badLines).toEqual([]);
    } finally {
      tmp.remove();
    }
  });

  test("os.write and os.read replaced: the framing does not use them", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import os\nos.write = os.read = None\nprint('framed')\n5");
    expect(a.stdout).toBe("framed\n");
    expect(a.result).toBe("5");
    expect((await rt.exec("6")).result).toBe("6");
  });
});

test("through the remote bootstrap too: del builtins.len and __import__ = None leave the runtime serving", async () => {
  const rt = await Runtime.start({ bootstrap: true });
  await rt.exec("x = [1, 2]");
  expect((await rt.exec("import builtins\ndel builtins.len\nbuiltins.__import__ = None\n3")).result).toBe("3");
  expect((await rt.exec("x")).result).toBe("[1, 2]");
  const v = await rt.request({ type: "variables" });
  expect((v.done.variables as Record<string, string>).x).toBe("list[int] len 2: [1, 2]");
});
