import { afterEach, describe, expect, test } from "bun:test";
import { bootstrapSource, closeAll, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

describe("the remote bootstrap", () => {
  test("the bootstrap is one line without quotes, backslashes or dollars a remote shell would mangle", () => {
    const b = bootstrapSource();
    expect(b).not.toMatch(/[\n'\\$`!]/);
    expect(b.length).toBeLessThan(400);
  });

  test("python -c BOOTSTRAP reads the length line and the source from fd 0, then speaks the protocol", async () => {
    const rt = await Runtime.start({ bootstrap: true });
    expect(rt.events[0]!.event).toBe("ready");
    const a = await rt.exec("import os\nos.write(1, b'raw\\n')\nprint('py')\n1/0");
    expect(a.stdout).toBe("py\n");
    expect(a.rawStdout).toBe("raw\n");
    expect(a.error!.ename).toBe("ZeroDivisionError");
    const tb = (a.error!.traceback as string[]).join("");
    expect(tb).toContain('File "<cell-');
    expect(tb).not.toContain("awrepl-runtime");
    const b = await rt.exec("import time\nprint('started', flush=True)\ntime.sleep(30)", 500).catch(() => null);
    expect(b).toBeNull(); // still sleeping: now interrupt it
    rt.send({ type: "interrupt" });
    const done = await rt.waitFor((e) => e.event === "done" && e.status === "error" && e.id !== a.done.id);
    expect(done.status).toBe("error");
    const { done: bye } = await rt.request({ type: "shutdown" });
    expect(bye.status).toBe("ok");
    expect(await rt.waitExit(5000)).toBe(true);
  });

  test("snapshot and pickle work when the runtime was exec'd from a string", async () => {
    const rt = await Runtime.start({ bootstrap: true });
    await rt.exec("import pickle\nclass A: pass\nx = pickle.loads(pickle.dumps([1, 2]))");
    expect((await rt.exec("x")).result).toBe("[1, 2]");
  });
});
