import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

describe("display and host bridges", () => {
  test("awrepl.emit ships one display event with the cell's id, data verbatim", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import awrepl\nawrepl.emit({'text/html': '<b>hi</b>', 'application/json': {'a': [1, 2]}})");
    const d = a.events.find((e) => e.event === "display")!;
    expect(d.data).toEqual({ "text/html": "<b>hi</b>", "application/json": { a: [1, 2] } });
    expect(a.done.status).toBe("ok");
  });

  test("from awrepl import emit works, also from a user thread (id null)", async () => {
    const rt = await Runtime.start();
    await rt.exec("from awrepl import emit\nimport threading\nt = threading.Thread(target=emit, args=({'text/plain': 'from thread'},))\nt.start(); t.join()");
    const d = rt.events.find((e) => e.event === "display")!;
    expect(d.id).toBeNull();
    expect(d.data).toEqual({ "text/plain": "from thread" });
  });

  test("emit rejects an empty dict or non-string keys with a clear TypeError", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import awrepl\nawrepl.emit({})");
    expect(a.error!.ename).toBe("TypeError");
    expect(a.error!.evalue).toContain("non-empty dict");
    const b = await rt.exec("awrepl.emit({1: 'x'})");
    expect(b.error!.ename).toBe("TypeError");
    const c = await rt.exec("awrepl.emit({'a/b': object()})");
    expect(c.error!.evalue).toContain("JSON");
  });

  test("NaN in emitted data becomes null; the frame stays valid JSON", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import awrepl\nawrepl.emit({'application/json': {'v': float('nan'), 'w': [float('inf'), 1.5]}})");
    expect(rt.badLines).toEqual([]);
    expect(a.events.find((e) => e.event === "display")!.data).toEqual({ "application/json": { v: null, w: [null, 1.5] } });
  });

  test("await awrepl.host_request round-trips through host_reply", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("h");
    const start = rt.events.length;
    rt.send({ type: "execute", id, code: "import awrepl\nreply = await awrepl.host_request({'op': 'ask', 'q': 1})\nreply['answer']" });
    const req = await rt.waitFor((e) => e.event === "host_request", 10_000, start);
    expect(req.data).toEqual({ op: "ask", q: 1 });
    expect(typeof req.id).toBe("string");
    rt.send({ type: "host_reply", id: "unknown-id", data: { answer: "wrong" } });
    rt.send({ type: "host_reply", id: req.id, data: { answer: 42 } });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 10_000, start);
    expect(done.status).toBe("ok");
    expect(rt.events.find((e) => e.event === "result" && e.id === id)!.text).toBe("42");
  });

  test("a reply for a cancelled host_request is dropped", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("h");
    const start = rt.events.length;
    rt.send({ type: "execute", id, code: "import awrepl\nawait awrepl.host_request({'op': 'slow'})" });
    const req = await rt.waitFor((e) => e.event === "host_request", 10_000, start);
    rt.send({ type: "interrupt", id });
    await rt.waitFor((e) => e.event === "done" && e.id === id, 10_000, start);
    rt.send({ type: "host_reply", id: req.id, data: { late: true } });
    expect((await rt.exec("'still serving'")).result).toBe("'still serving'");
  });

  test("is_active() is true while serving; importing the module is fine", async () => {
    const rt = await Runtime.start();
    expect((await rt.exec("import awrepl\nawrepl.is_active()")).result).toBe("True");
    expect(
      (await rt.exec("import os\npid = os.fork()\nif pid == 0:\n    import awrepl\n    os.write(1, b'child active=%d\\n' % awrepl.is_active())\n    os._exit(0)\nos.waitpid(pid, 0)[1]")).rawStdout,
    ).toBe("child active=0\n");
  });

  test("reset gives a fresh namespace; builtins and awrepl still work", async () => {
    const rt = await Runtime.start();
    await rt.exec("x = 1\nimport awrepl");
    const { done } = await rt.request({ type: "reset" });
    expect(done.status).toBe("ok");
    const a = await rt.exec("x");
    expect(a.error!.ename).toBe("NameError");
    const b = await rt.exec("import awrepl\nawrepl.emit({'text/plain': 'ok'})\nlen([1, 2])");
    expect(b.result).toBe("2");
    expect(b.events.some((e) => e.event === "display")).toBe(true);
  });
});
