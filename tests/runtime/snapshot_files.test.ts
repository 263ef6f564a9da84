import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeAll, Runtime } from "../harness/mod.ts";

let dir = "";
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awrepl-snapfiles-"));
});
afterEach(() => {
  closeAll();
  rmSync(dir, { recursive: true, force: true });
});

const mode = (p: string) => statSync(p).mode & 0o777;

describe("snapshot files on disk", () => {
  test("payload and manifest are 0600, also when they replace 0644 files", async () => {
    const rt = await Runtime.start();
    await rt.exec("token = 'secret'");
    const path = join(dir, "s.pkl");
    const manifest_path = join(dir, "s.json");
    const first = await rt.request({ type: "snapshot", path, manifest_path });
    expect(first.done.status).toBe("ok");
    expect(mode(path)).toBe(0o600);
    expect(mode(manifest_path)).toBe(0o600);
    writeFileSync(path, "old", { mode: 0o644 });
    const again = await rt.request({ type: "snapshot", path, manifest_path });
    expect(again.done.status).toBe("ok");
    expect(mode(path)).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual(["s.json", "s.pkl"]); // no temp file left
  });

  for (
    const [what, content] of [
      ["text", "precious\n"],
      ["JSON that is not a manifest", '{"version": 1, "other": true}\n'],
      ["a JSON list", "[1, 2]\n"],
    ] as const
  ) {
    test(`a manifest_path holding ${what} is refused and nothing is written`, async () => {
      const rt = await Runtime.start();
      await rt.exec("a = 1");
      const path = join(dir, "y");
      const manifest_path = join(dir, "y.json");
      writeFileSync(manifest_path, content);
      const { done } = await rt.request({ type: "snapshot", path, manifest_path });
      expect(done.status).toBe("error");
      expect(done.reason as string).toContain(`refusing to overwrite ${manifest_path}`);
      expect(readFileSync(manifest_path, "utf8")).toBe(content);
      expect(existsSync(path)).toBe(false);
      expect((await rt.exec("a")).result).toBe("1"); // the namespace is untouched
    });
  }

  test("a directory at manifest_path is refused; an earlier awrepl manifest is replaced", async () => {
    const rt = await Runtime.start();
    await rt.exec("a = 1");
    mkdirSync(join(dir, "d.json"));
    const refused = await rt.request({ type: "snapshot", path: join(dir, "d.pkl"), manifest_path: join(dir, "d.json") });
    expect(refused.done.status).toBe("error");
    expect(existsSync(join(dir, "d.pkl"))).toBe(false);
    const path = join(dir, "ok.pkl");
    const manifest_path = join(dir, "ok.json");
    expect((await rt.request({ type: "snapshot", path, manifest_path })).done.status).toBe("ok");
    await rt.exec("b = 2");
    const second = await rt.request({ type: "snapshot", path, manifest_path });
    expect(second.done.status).toBe("ok");
    expect(JSON.parse(readFileSync(manifest_path, "utf8")).savedNames).toEqual(["a", "b"]);
  });
});
