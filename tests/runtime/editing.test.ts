import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

describe("complete and is_complete", () => {
  test("is_complete puts complete|incomplete|invalid in done.status, with the next indent", async () => {
    const rt = await Runtime.start();
    const cases: Array<[string, string, string]> = [
      ["x = 1", "complete", ""],
      ["if x:", "incomplete", "    "],
      ["for i in x:\n    if i:", "incomplete", "        "],
      ["if x:\n    y = 1", "incomplete", "    "],
      ["if x:\n    y = 1\n\n", "complete", ""],
      ["(1,", "incomplete", ""],
      ["x = [1,\n  2]", "complete", ""],
      ["def f(:", "invalid", ""],
      ["await thing()", "complete", ""],
      ["", "complete", ""],
    ];
    for (const [code, status, indent] of cases) {
      const { done } = await rt.request({ type: "is_complete", code });
      expect([code, done.status, done.indent]).toEqual([code, status, indent]);
    }
  });

  test("complete offers names, attributes and dict keys", async () => {
    const rt = await Runtime.start();
    await rt.exec("import json\nconfig = {'server': 1, 'session': 2, 'port': 3}\nconfigure = 5");
    const m = async (code: string, cursor?: number) => (await rt.request({ type: "complete", code, cursor })).done.matches as string[];
    expect(await m("conf")).toEqual(["config", "configure"]);
    expect(await m("json.dum")).toEqual(["json.dump", "json.dumps"]);
    expect(await m("config['se")).toEqual(["server", "session"]);
    expect(await m("pri")).toContain("print");
    expect(await m("x = conf + 1", 8)).toEqual(["config", "configure"]);
    expect(await m("nosuch.attr")).toEqual([]);
    const bad = await rt.request({ type: "complete", code: "abc", cursor: 99 });
    expect(bad.done.status).toBe("error");
  });
});
