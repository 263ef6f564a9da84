import { describe, expect, test } from "bun:test";
import { OutputCollector, type Stream } from "../session/output.ts";
import { outputFramePieces, RawText, readOutputFrame, readReplyFrame } from "./output_frames.ts";

/** A frame as runtime.py writes it (compact JSON, text last). */
function frame(stream: Stream, id: string | null, text: string): Buffer {
  return Buffer.from(JSON.stringify({ event: stream, id, text }));
}

describe("readOutputFrame", () => {
  const texts = ["hello\n", 'a "quoted" \\ back\tslash\r\n/', "ünïcödé € 𝄞 中文\n", "x".repeat(5000), '\\\\\\""\\n'];
  for (const text of texts) {
    test(`reads ${JSON.stringify(text.slice(0, 20))} without decoding: exact UTF-8 length, same text`, () => {
      for (const id of ["7", "12", null]) {
        const f = readOutputFrame(frame("stderr", id, text));
        expect(f).not.toBeNull();
        expect(f?.stream).toBe("stderr");
        expect(f?.id).toBe(id);
        expect(f?.raw.bytes).toBe(Buffer.byteLength(text));
        expect(f?.raw.retain().text()).toBe(text);
      }
    });
  }

  test("leaves everything else to JSON.parse: \\u escapes, other events, other shapes, invalid UTF-8", () => {
    expect(readOutputFrame(frame("stdout", "1", "\u0001 control"))).toBeNull();
    expect(readOutputFrame(frame("stdout", "1", "lone \ud800 surrogate"))).toBeNull();
    expect(readOutputFrame(Buffer.from(JSON.stringify({ event: "result", id: "1", text: "x".repeat(50) })))).toBeNull();
    expect(readOutputFrame(Buffer.from(JSON.stringify({ event: "stdout", text: "x".repeat(50), id: "1" })))).toBeNull();
    expect(readOutputFrame(Buffer.from(JSON.stringify({ event: "stdout", id: 'a"b', text: "x".repeat(50) })))).toBeNull();
    expect(readOutputFrame(Buffer.from(JSON.stringify({ event: "stdout", id: 7, text: "x".repeat(50) })))).toBeNull();
    const bad = Buffer.concat([Buffer.from('{"event":"stdout","id":"1","text":"abc'), Buffer.from([0xff, 0xfe]), Buffer.from('xxxxxxxxxxxxxxxxx"}')]);
    expect(readOutputFrame(bad)).toBeNull();
    // An unescaped quote inside the text is not a frame we understand.
    expect(readOutputFrame(Buffer.from('{"event":"stdout","id":"1","text":"abc"def xxxxxxxxxxxxxxxxxx"}'))).toBeNull();
  });
});

describe("readReplyFrame", () => {
  test("reads the supervisor's live-output replies, numeric or string ids, and nothing else", () => {
    for (const id of [1, 4711, "req-7"]) {
      for (const text of ["plain\n", 'ünï "q" \\ \t 𝄞\n', "x".repeat(3000)]) {
        const f = readReplyFrame(Buffer.from(JSON.stringify({ event: "stdout", id, text })));
        expect(f?.stream).toBe("stdout");
        expect(f?.id).toBe(id);
        expect(f?.raw.bytes).toBe(Buffer.byteLength(text));
        expect(f?.raw.text()).toBe(text);
      }
    }
    expect(readReplyFrame(Buffer.from(JSON.stringify({ event: "stderr", id: 2, text: "x".repeat(40) })))?.stream).toBe("stderr");
    expect(readReplyFrame(Buffer.from(JSON.stringify({ event: "result", id: 2, result: { text: "x".repeat(40) } })))).toBeNull();
    expect(readReplyFrame(Buffer.from(JSON.stringify({ event: "stdout", id: -2, text: "x".repeat(40) })))).toBeNull();
    // No reply goes to nobody: a null id is the runtime's.
    expect(readReplyFrame(frame("stdout", null, "x".repeat(40)))).toBeNull();
    expect(readOutputFrame(frame("stdout", null, "x".repeat(40)))?.id).toBeNull();
    expect(readReplyFrame(Buffer.from(JSON.stringify({ event: "stdout", id: 2, text: "\u0002".repeat(40) })))).toBeNull();
  });
});

describe("outputFramePieces", () => {
  test("writes the frame both readers read back: the text's bytes forwarded as they came", () => {
    for (const text of ["plain\n", 'ünï "q" \\ \t 𝄞\n', "x".repeat(3000)]) {
      const runtime = readOutputFrame(frame("stderr", "5", text));
      for (const id of [3, "req-3"]) {
        const { pieces, bytes } = outputFramePieces("stderr", id, runtime!.raw);
        expect(pieces[1]).toBe(runtime!.raw.json()); // not copied until the outbox writes it
        const line = Buffer.concat(pieces);
        expect(line.length).toBe(bytes);
        expect(JSON.parse(line.toString())).toEqual({ event: "stderr", id, text });
        const reply = readReplyFrame(line);
        expect(reply?.id).toBe(id);
        expect(reply?.raw.text()).toBe(text);
      }
    }
  });

  test("text that arrived decoded is written escaped", () => {
    const text = 'tab\t \u0001 "quoted" é\n';
    const raw = RawText.fromText(text);
    expect(raw.bytes).toBe(Buffer.byteLength(text));
    expect(JSON.parse(Buffer.concat(outputFramePieces("stdout", 1, raw).pieces).toString())).toEqual({ event: "stdout", id: 1, text });
  });
});

describe("OutputCollector.addRaw", () => {
  test("keeps exactly what add() keeps, whatever mix of pieces, streams and limits", () => {
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const alphabet = ["a", "b", "\n", "é", "€", "𝄞", '"', "\\", "\t"];
    for (let round = 0; round < 300; round++) {
      const limit = [0, 1, 7, 64, 100, 1000][rand(6)] as number;
      const eager = new OutputCollector(limit);
      const lazy = new OutputCollector(limit);
      const pieces = 1 + rand(40);
      for (let p = 0; p < pieces; p++) {
        const stream: Stream = rand(4) === 0 ? "stderr" : "stdout";
        let text = "";
        const len = 1 + rand(p % 5 === 0 ? 400 : 30);
        for (let i = 0; i < len; i++) text += alphabet[rand(alphabet.length)];
        eager.add(stream, text);
        const f = readOutputFrame(frame(stream, "1", text));
        if (f) lazy.addRaw(stream, f.raw);
        else lazy.add(stream, text);
      }
      expect(lazy.result()).toEqual(eager.result());
      expect(lazy.totalBytes).toBe(eager.totalBytes);
    }
  });

  test("a kept piece read from memory the reader reuses (a socket's) is copied first", () => {
    const c = new OutputCollector(1000);
    c.add("stdout", "h".repeat(600));
    const chunk = Buffer.from(JSON.stringify({ event: "stdout", id: 1, text: "t".repeat(100) }));
    const f = readReplyFrame(chunk);
    c.addRaw("stdout", f!.raw);
    chunk.fill(0x20); // the reader's buffer is reused
    expect(c.result().stdout.endsWith("t".repeat(100))).toBe(true);
  });
});
