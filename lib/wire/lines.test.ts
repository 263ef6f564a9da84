// LineSplitter.split, the callback form a worker's protocol pipe uses (push and pushBytes, which the
// sockets use, are tested in socket.test.ts).
import { describe, expect, test } from "bun:test";
import { LineSplitter } from "./lines.ts";

function splitAll(splitter: LineSplitter, ...chunks: string[]): string[] {
  const lines: string[] = [];
  for (const chunk of chunks) splitter.split(Buffer.from(chunk), (line) => lines.push(Buffer.from(line).toString()));
  return lines;
}

describe("LineSplitter.split", () => {
  test("gives every complete line, empty ones included, joining lines cut across chunks", () => {
    const s = new LineSplitter(1024);
    expect(splitAll(s, "a\n\nb", "c", "d\ne", "\n")).toEqual(["a", "", "bcd", "e"]);
    expect(splitAll(s, "rest")).toEqual([]);
  });

  test("a line past the cap throws after the lines before it were given, and what was kept is dropped", () => {
    const s = new LineSplitter(4);
    const lines: string[] = [];
    expect(() => s.split(Buffer.from("ok\ntoo long\n"), (l) => lines.push(Buffer.from(l).toString()))).toThrow("Line longer than 4 bytes");
    expect(lines).toEqual(["ok"]);
    expect(() => splitAll(s, "abc", "de")).toThrow(RangeError);
    expect(splitAll(s, "new\n")).toEqual(["new"]);
  });

  test("with chunks that are the reader's own, an unfinished line is kept without a copy", () => {
    const own = new LineSplitter(64, false, false);
    const chunk = Buffer.from("abc");
    own.split(chunk, () => undefined);
    chunk.write("xyz");
    expect(splitAll(own, "\n")).toEqual(["xyz"]);
    const copying = new LineSplitter(64);
    const reused = Buffer.from("abc");
    copying.split(reused, () => undefined);
    reused.write("xyz");
    expect(splitAll(copying, "\n")).toEqual(["abc"]);
  });
});
