import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

describe("what users will do to it", () => {
  for (const code of ["exit()", "quit()", "raise SystemExit(3)", "import sys\nsys.exit('bye')"]) {
    test(`${code.split("\n").at(-1)} is reported as an error and the worker lives`, async () => {
      const rt = await Runtime.start();
      const a = await rt.exec(code);
      expect(a.done.status).toBe("error");
      expect(a.error!.ename).toBe("SystemExit");
      expect((await rt.exec("try:\n    input()\nexcept EOFError:\n    r = 'eof'\nr")).result).toBe("'eof'");
    });
  }

  test("os.fork(): the child never writes frames; its prints arrive as raw output", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(
      "import os\npid = os.fork()\nif pid == 0:\n    print('child print')\n    import awrepl\n    awrepl.emit({'text/plain': 'x'})\n    os._exit(0)\nos.waitpid(pid, 0)\n'parent'",
    );
    expect(rt.badLines).toEqual([]);
    expect(a.result).toBe("'parent'");
    expect(a.rawStdout).toBe("child print\n");
    expect(rt.events.some((e) => e.event === "display")).toBe(false);
    expect((await rt.exec("1")).result).toBe("1");
  });

  test("a forked child that keeps running the cell does not answer requests", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(0.3)\n    os._exit(0)\npid > 0");
    expect(a.result).toBe("True");
    const b = await rt.exec("2");
    expect(b.result).toBe("2");
    expect(rt.events.filter((e) => e.event === "done" && e.id === b.done.id).length).toBe(1);
  });

  test("malformed lines get a ProtocolError event and the runtime keeps serving", async () => {
    const rt = await Runtime.start();
    const start = rt.events.length;
    rt.sendRaw('not json\n[1,2]\n{"type":"execute"}\n{"type":"execute","id":7,"code":"1"}\n\xff\xfe\n\n');
    rt.sendRaw(new Uint8Array([0xff, 0xfe, 0x0a]));
    rt.send({ type: "nonsense", id: "n1" });
    rt.send({ type: "execute", id: "bad-code", code: 12 });
    const n1 = await rt.waitFor((e) => e.event === "done" && e.id === "n1", 10_000, start);
    expect(n1.status).toBe("error");
    const badCode = await rt.waitFor((e) => e.event === "done" && e.id === "bad-code", 10_000, start);
    expect(badCode.status).toBe("error");
    const errors = rt.events.slice(start).filter((e) => e.event === "error" && e.ename === "ProtocolError");
    expect(errors.filter((e) => e.id === null).length).toBe(6);
    expect(errors.some((e) => e.id === "n1")).toBe(true);
    expect((await rt.exec("'alive'")).result).toBe("'alive'");
  });

  test("a 10 MB cell", async () => {
    const rt = await Runtime.start();
    const code = "s = '" + "a".repeat(10 * 1024 * 1024) + "'\nlen(s)";
    const a = await rt.exec(code, 30_000);
    expect(a.result).toBe(String(10 * 1024 * 1024));
  });

  test("100 MB of output arrives complete and in order", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("line = 'x' * 1023\nfor i in range(100 * 1024):\n    print(line)", 60_000);
    expect(a.done.status).toBe("ok");
    expect(a.stdout.length).toBe(100 * 1024 * 1024);
  }, 60_000);

  test("NaN and infinities as values", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("[float('nan'), float('inf')]");
    expect(a.result).toBe("[nan, inf]");
    expect((await rt.request({ type: "variables" })).done.status).toBe("ok");
  });

  test("a cell that replaces sys.stdout and closes sys.stdin does not break the protocol", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import sys, io\nsys.stdin.close()\nold = sys.stdout\nsys.stdout = io.StringIO()\nprint('hidden')\nsys.stdout = old\nprint('shown')");
    expect(a.stdout).toBe("shown\n");
    expect((await rt.exec("try:\n    input()\nexcept EOFError:\n    r = 1\nr")).result).toBe("1");
  });
});
