import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

const SCRIPT = "/tmp/awrepl-test-project/script.py";

describe("execute with a filename", () => {
  test("__file__ is the filename while the cell runs, and is put back afterwards", async () => {
    const rt = await Runtime.start();
    const a = await rt.request({ type: "execute", code: "import os\nseen = __file__\nos.path.basename(__file__)", filename: SCRIPT });
    expect(a.events.find((e) => e.event === "result")!.text).toBe("'script.py'");
    expect((await rt.exec("seen")).result).toBe(`'${SCRIPT}'`);
    expect((await rt.exec("'__file__' in globals()")).result).toBe("False");
    // A __file__ of the session's own is restored, and one the cell sets itself is kept.
    await rt.exec("__file__ = 'mine'");
    await rt.request({ type: "execute", code: "x = __file__", filename: SCRIPT });
    expect((await rt.exec("x, __file__")).result).toBe(`('${SCRIPT}', 'mine')`);
    await rt.request({ type: "execute", code: "__file__ = 'set by the script'", filename: SCRIPT });
    expect((await rt.exec("__file__")).result).toBe("'set by the script'");
  });

  test("tracebacks name the file and show its lines; an error still puts __file__ back", async () => {
    const rt = await Runtime.start();
    const code = "def f():\n    return 1 / 0\n\nf()\n";
    const { events } = await rt.request({ type: "execute", code, filename: SCRIPT });
    const error = events.find((e) => e.event === "error")!;
    const tb = (error.traceback as string[]).join("");
    expect(tb).toContain(`File "${SCRIPT}", line 4, in <module>`);
    expect(tb).toContain(`File "${SCRIPT}", line 2, in f`);
    expect(tb).toContain("return 1 / 0");
    expect((await rt.exec("'__file__' in globals()")).result).toBe("False");
    const syntax = await rt.request({ type: "execute", code: "x = (\n", filename: SCRIPT });
    const se = syntax.events.find((e) => e.event === "error")!;
    expect(se.ename).toBe("SyntaxError");
    expect((se.traceback as string[]).join("")).toContain(SCRIPT);
  });

  test("on the event loop too (top-level await)", async () => {
    const rt = await Runtime.start();
    const a = await rt.request({ type: "execute", code: "import asyncio\nawait asyncio.sleep(0)\n__file__", filename: SCRIPT });
    expect(a.events.find((e) => e.event === "result")!.text).toBe(`'${SCRIPT}'`);
    expect((await rt.exec("'__file__' in globals()")).result).toBe("False");
  });

  test("a filename that is not a non-empty string is a protocol error", async () => {
    const rt = await Runtime.start();
    for (const filename of [12, "", ["a"]]) {
      const { done } = await rt.request({ type: "execute", code: "1", filename });
      expect(done.status).toBe("error");
      expect(done.reason as string).toContain("'filename' must be a non-empty string");
    }
    expect((await rt.exec("2")).result).toBe("2");
  });
});
