import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HistoryFile, historyPath, UNNAMED_HISTORY } from "./history.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function home(): string {
  const d = mkdtempSync(join(tmpdir(), "awrepl-history-"));
  dirs.push(d);
  return d;
}

test("one file per session under history/, a shared one for unnamed sessions", () => {
  expect(historyPath("/s", "data")).toBe(join("/s", "history", "data"));
  expect(historyPath("/s", undefined)).toBe(join("/s", "history", UNNAMED_HISTORY));
});

test("appended lines come back newest first in the next run; blanks and repeats are skipped", () => {
  const path = historyPath(home(), "a");
  const first = new HistoryFile(path);
  expect(first.load()).toEqual([]);
  for (const line of ["x = 1", "x = 1", "   ", "def f():", "    return x"]) first.append(line);
  expect(new HistoryFile(path).load()).toEqual(["    return x", "def f():", "x = 1"]);
  expect(statSync(path).mode & 0o777).toBe(0o600);
});

test("two runs of the same session append to one file without overwriting each other", () => {
  const path = historyPath(home(), "shared");
  const a = new HistoryFile(path);
  const b = new HistoryFile(path);
  a.load();
  b.load();
  a.append("from a");
  b.append("from b");
  a.append("a again");
  expect(new HistoryFile(path).load()).toEqual(["a again", "from b", "from a"]);
});

test("the file is bounded: past twice the limit it is cut back to the newest entries", () => {
  const path = historyPath(home(), "big");
  const h = new HistoryFile(path, 10);
  h.load();
  for (let i = 0; i < 25; i++) h.append(`line ${i}`);
  const loaded = new HistoryFile(path, 10).load();
  expect(loaded).toHaveLength(10);
  expect(loaded[0]).toBe("line 24");
  expect(readFileSync(path, "utf8").trim().split("\n")).toHaveLength(10);
});

test("an unwritable history never breaks the REPL", () => {
  const dir = home();
  writeFileSync(join(dir, "history"), "a file where the directory should be");
  const h = new HistoryFile(historyPath(dir, "x"));
  expect(h.load()).toEqual([]);
  expect(() => h.append("x = 1")).not.toThrow();
});
