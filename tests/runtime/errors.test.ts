import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeAll, type Event, Runtime } from "../harness/mod.ts";

afterEach(closeAll);
let dir = "";
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "awrepl-sig-"));
  writeFileSync(
    join(dir, "demo_skill.py"),
    [
      "from dataclasses import dataclass",
      "__all__ = ['search', 'Hit']",
      "@dataclass",
      "class Hit:",
      "    title: str",
      "    score: float",
      "def search(query: str, limit: int = 10) -> list:",
      "    return [Hit(query, 1.0)][:limit]",
      "",
    ].join("\n"),
  );
  writeFileSync(join(dir, "broken_skill.py"), "raise ImportError('no backend')\n");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tbText = (e: Event | null) => ((e?.traceback as string[]) ?? []).join("");

describe("error remedies", () => {
  test("an identical failing cell gets one repeat line; a changed cell does not", async () => {
    const rt = await Runtime.start();
    const first = await rt.exec("undefined_name + 1");
    expect(tbText(first.error)).not.toContain("identical cell");
    const second = await rt.exec("undefined_name + 1");
    const lines = tbText(second.error).split("\n").filter((l) => l.includes("identical cell"));
    expect(lines.length).toBe(1);
    expect(lines[0]).toContain("1 time");
    const third = await rt.exec("undefined_name + 2");
    expect(tbText(third.error)).not.toContain("identical cell");
  });

  test("a call-shape TypeError gets the signature and the nearest legal keyword", async () => {
    const rt = await Runtime.start();
    await rt.exec("def area(width, height=1):\n    return width * height");
    const a = await rt.exec("area(widht=3)");
    expect(a.error!.ename).toBe("TypeError");
    const tb = tbText(a.error);
    expect(tb).toContain("Signature: area(width, height=1)");
    expect(tb).toContain("Did you mean width=");
    const b = await rt.exec("area(1, 2, 3)");
    expect(tbText(b.error)).toContain("Signature: area(width, height=1)");
    const c = await rt.exec("len(1)");
    expect(tbText(c.error)).not.toContain("Signature");
  });

  test("signatures indexes published calls, reports modules that fail to import, and feeds remedies", async () => {
    const rt = await Runtime.start({ env: { PYTHONPATH: dir } });
    const { done } = await rt.request({ type: "signatures", modules: ["demo_skill", "broken_skill"] });
    expect(done.status).toBe("ok");
    expect(done.calls).toBe(2);
    expect(done.failed).toEqual([{ name: "broken_skill", reason: "ImportError: no backend" }]);
    const digest = String(done.digest);
    expect(digest).toContain("demo_skill.search(query: str, limit: int = 10) -> list");
    expect(digest).toContain("demo_skill.Hit: {title: str, score: float}");
    const a = await rt.exec("import demo_skill\ndemo_skill.search(querry='x')");
    const tb = tbText(a.error);
    expect(tb).toContain("Signature: demo_skill.search(query: str, limit: int = 10) -> list");
    expect(tb).toContain("Did you mean query=");
  });

  test("without modules, signatures indexes the user's own modules in the namespace", async () => {
    const rt = await Runtime.start({ env: { PYTHONPATH: dir } });
    await rt.exec("import json, demo_skill as ds\ntry:\n    import dill\nexcept ImportError:\n    pass");
    const { done } = await rt.request({ type: "signatures" });
    expect(done.calls).toBe(2);
    expect(String(done.digest)).toContain("ds.search(");
  });
});
