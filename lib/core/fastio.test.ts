import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileExists, homeDir, joinPath, listDir, resolvePath, statFile } from "./fastio.ts";

const dir = mkdtempSync(join(tmpdir(), "awrepl-fastio-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("path helpers agree with node:path", () => {
  const segments = ["", ".", "..", "a", "b/", "/c", "../d", "e/../f", "/", "./g", "h//i", "j/."];

  test("joinPath is path.join", () => {
    let compared = 0;
    for (const a of segments) {
      for (const b of segments) {
        for (const c of segments) {
          expect({ parts: [a, b, c], joined: joinPath(a, b, c) }).toEqual({ parts: [a, b, c], joined: join(a, b, c) });
          compared++;
        }
      }
    }
    expect(joinPath()).toBe(join());
    expect(compared).toBe(segments.length ** 3);
  });

  test("resolvePath is path.resolve (relative to the working directory)", () => {
    for (const a of segments) {
      for (const b of segments) {
        for (const c of segments) {
          expect({ parts: [a, b, c], resolved: resolvePath(a, b, c) }).toEqual({ parts: [a, b, c], resolved: resolve(a, b, c) });
        }
      }
    }
    expect(resolvePath()).toBe(resolve());
  });

  test("homeDir is os.homedir", () => {
    expect(homeDir()).toBe(homedir());
  });
});

describe("files", () => {
  test("statFile: a file's size and mtime; a directory exists; nothing there is null", () => {
    const file = join(dir, "f.txt");
    writeFileSync(file, "12345");
    expect(statFile(file)?.size).toBe(5);
    expect(Math.abs((statFile(file)?.mtimeMs ?? 0) - Date.now())).toBeLessThan(60_000);
    expect(fileExists(dir)).toBe(true);
    expect(fileExists(join(dir, "missing"))).toBe(false);
    // Bun reports a path it cannot stat with a sentinel mtime (fastio.ts): an empty file is not that.
    const empty = join(dir, "empty");
    writeFileSync(empty, "");
    expect(statFile(empty)).toEqual({ size: 0, mtimeMs: expect.any(Number) });
    // Not found below a file (ENOTDIR), nor through a dangling link.
    expect(fileExists(join(file, "below"))).toBe(false);
    symlinkSync(join(dir, "nowhere"), join(dir, "dangling"));
    expect(fileExists(join(dir, "dangling"))).toBe(false);
  });

  test("listDir is readdirSync: every name, dot files too; a missing directory throws ENOENT", () => {
    const d = join(dir, "list");
    mkdirSync(join(d, "sub"), { recursive: true });
    for (const n of ["a.pkl", ".hidden", "b c"]) writeFileSync(join(d, n), "");
    expect(listDir(d).sort()).toEqual([".hidden", "a.pkl", "b c", "sub"]);
    expect(() => listDir(join(dir, "no-such-dir"))).toThrow(expect.objectContaining({ code: "ENOENT" }));
  });
});
