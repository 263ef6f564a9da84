// The history book on its own: numbering, both bounds, the file beside the snapshot (written, read
// back, a damaged one logged and replaced), owned sessions in memory only. Watchers are covered end
// to end (tests/e2e/watch.test.ts), over a real socket.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExecResult } from "../protocol/result.ts";
import { tempHome } from "../../tests/harness/common.ts";
import { HistoryBook } from "./history.ts";

const homes: { remove(): void }[] = [];
afterEach(() => {
  for (const h of homes.splice(0)) h.remove();
});

function home(): string {
  const h = tempHome("awrepl-history-");
  homes.push(h);
  return h.home;
}

function result(stdout = "", status: ExecResult["status"] = "ok"): ExecResult {
  return { stdout, stderr: "", value: null, exception: null, traceback: "", duration_ms: 1, truncated: false, truncated_bytes: 0, status, session: "s", display: [] };
}

function ran(book: HistoryBook, name: string, code: string, r = result(), owned = false): void {
  book.finish(name, book.begin(name, code, "cli"), r, owned);
}

describe("HistoryBook", () => {
  test("numbers cells, keeps the result object it was given, drops the oldest past the cell bound", () => {
    const book = new HistoryBook(home(), { historyMaxCells: 2, historyMaxBytes: 0 });
    const r = result("x\n");
    ran(book, "s", "a", r);
    ran(book, "s", "b");
    ran(book, "s", "c");
    const h = book.read("s")!;
    expect(h.cells.map((c) => [c.n, c.code])).toEqual([[2, "b"], [3, "c"]]);
    expect(h).toMatchObject({ total: 3, dropped: 1 });
    expect(book.read("s", 1)!.cells.map((c) => c.n)).toEqual([3]);
    expect(book.read("s", 0)!.cells).toEqual([]);
    const keep = new HistoryBook(home(), { historyMaxCells: 0, historyMaxBytes: 0 });
    ran(keep, "s", "a", r);
    expect(keep.read("s")!.cells[0]!.result).toBe(r); // not a copy
  });

  test("the size bound drops the oldest cells but always keeps the newest", () => {
    const book = new HistoryBook(home(), { historyMaxCells: 0, historyMaxBytes: 5_000 });
    for (let i = 0; i < 5; i++) ran(book, "s", `c${i}`, result("y".repeat(2_000)));
    expect(book.read("s")!.cells.map((c) => c.code)).toEqual(["c3", "c4"]);
    ran(book, "s", "big", result("z".repeat(50_000)));
    expect(book.read("s")!.cells.map((c) => c.code)).toEqual(["big"]);
    expect(book.read("s")!.dropped).toBe(5);
  });

  test("is written beside the snapshot and read back by another book, numbering on; a damaged file is logged and replaced", () => {
    const h = home();
    const book = new HistoryBook(h, { historyMaxCells: 0, historyMaxBytes: 0 });
    ran(book, "s", "x = 1");
    ran(book, "s", "1/0", result("", "error"));
    book.save("s");
    const file = join(h, "snapshots", "s", "history.json");
    expect(JSON.parse(readFileSync(file, "utf8"))).toMatchObject({ version: 1, total: 2, dropped: 0 });
    const next = new HistoryBook(h, { historyMaxCells: 0, historyMaxBytes: 0 });
    expect(next.read("s")!.cells.map((c) => [c.n, c.status])).toEqual([[1, "ok"], [2, "error"]]);
    ran(next, "s", "x");
    expect(next.read("s")!.cells.at(-1)!.n).toBe(3);
    expect(new HistoryBook(h, { historyMaxCells: 0, historyMaxBytes: 0 }).read("nothing")).toBeNull();

    mkdirSync(join(h, "snapshots", "bad"), { recursive: true });
    writeFileSync(join(h, "snapshots", "bad", "history.json"), "{ not json");
    const logged: string[] = [];
    const third = new HistoryBook(h, { historyMaxCells: 0, historyMaxBytes: 0 }, (line) => logged.push(line));
    expect(third.read("bad")).toBeNull();
    expect(logged.join("\n")).toContain("session bad: its history file is unreadable");
    ran(third, "bad", "fresh");
    third.save("bad");
    expect(JSON.parse(readFileSync(join(h, "snapshots", "bad", "history.json"), "utf8")).cells).toHaveLength(1);
  });

  test("an owned session's history is never written, and goes once its session is gone", () => {
    const h = home();
    const book = new HistoryBook(h, { historyMaxCells: 0, historyMaxBytes: 0 });
    book.startOwned("mine");
    ran(book, "mine", "secret = 1", result(), true);
    book.save("mine");
    expect(existsSync(join(h, "snapshots", "mine"))).toBe(false);
    book.sweepOwned(() => true);
    expect(book.read("mine")!.cells).toHaveLength(1);
    book.sweepOwned(() => false);
    expect(book.read("mine")).toBeNull();
    ran(book, "s", "a");
    book.forget("s");
    expect(book.read("s")).toBeNull();
  });
});
