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

  test("a line announcing raw bytes: they go to onRaw unsearched, wherever the chunks cut the stream, then lines resume", () => {
    // Raw bytes that look like the protocol: newlines, a frame's opening, invalid UTF-8, and an announcement of more raw bytes.
    const raw = Buffer.concat([Buffer.from('\n{"event":"done","id":"1"}\n\n'), Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0x0a]), Buffer.from("RAW 5\n")]);
    const stream = Buffer.concat([Buffer.from(`a\nRAW ${raw.length}\n`), raw, Buffer.from("b\nRAW 0\nc\n")]);
    const expected = ["line:a", `line:RAW ${raw.length}`, `raw:${raw.toString("hex")}`, "line:b", "line:RAW 0", "line:c"];
    for (let cut1 = 0; cut1 <= stream.length; cut1 += 3) {
      for (let cut2 = cut1; cut2 <= stream.length; cut2 += 5) {
        const s = new LineSplitter(1024, false, false);
        const out: string[] = [];
        let rawHex = "";
        const onLine = (line: Uint8Array) => {
          if (rawHex) out.push(`raw:${rawHex}`), (rawHex = "");
          const text = Buffer.from(line).toString();
          out.push(`line:${text}`);
          const m = /^RAW (\d+)$/.exec(text);
          return m ? Number(m[1]) : undefined;
        };
        for (const chunk of [stream.subarray(0, cut1), stream.subarray(cut1, cut2), stream.subarray(cut2)]) {
          s.split(chunk, onLine, (part) => (rawHex += Buffer.from(part).toString("hex")));
        }
        expect(out).toEqual(expected);
        expect(s.rawPending).toBe(0);
      }
    }
  });

  test("without onRaw a callback's return value is ignored (push and pushBytes keep reading lines)", () => {
    const s = new LineSplitter(64);
    expect(s.pushBytes(Buffer.from("3\nabc\n")).map((l) => Buffer.from(l).toString())).toEqual(["3", "abc"]);
    const counted: string[] = [];
    s.split(Buffer.from("x\ny\n"), (l) => counted.push(Buffer.from(l).toString()));
    expect(counted).toEqual(["x", "y"]);
  });

  test("a stream that ends inside the raw bytes leaves them owed (the reader's end is the writer's death)", () => {
    const s = new LineSplitter(64, false, false);
    let got = 0;
    s.split(Buffer.from("H\nabc"), () => 10, (part) => (got += part.length));
    expect(got).toBe(3);
    expect(s.rawPending).toBe(7);
  });
});
