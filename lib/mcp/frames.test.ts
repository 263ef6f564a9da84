// The MCP stdio framing's pieces on their own: FrameReader (bounded lines, oversized ones discarded as
// they stream) and FrameIdScanner (the id of a frame too big to parse). The process: tests/e2e/mcp_framing.test.ts.
import { describe, expect, test } from "bun:test";
import { FrameIdScanner } from "./frame_id.ts";
import { type Frame, FrameReader } from "./frames.ts";

/** The frames of `chunks` fed in order, lines decoded. */
function frames(reader: FrameReader, ...chunks: string[]): (string | Omit<Frame & { kind: "oversized" }, "kind">)[] {
  const out: (string | Omit<Frame & { kind: "oversized" }, "kind">)[] = [];
  for (const chunk of chunks) {
    reader.push(Buffer.from(chunk), (f) => {
      if (f.kind === "line") out.push(Buffer.from(f.bytes).toString());
      else out.push({ bytes: f.bytes, id: f.id, response: f.response });
    });
  }
  return out;
}

/** What the scanner finds in `text`, fed in pieces of `step` bytes. */
function head(text: string, step = 1) {
  const bytes = Buffer.from(text);
  const s = new FrameIdScanner();
  for (let i = 0; i < bytes.length; i += step) s.push(bytes.subarray(i, i + step));
  return s.head();
}

describe("FrameReader", () => {
  test("gives every line, joined across chunks; a line's end waits for its newline", () => {
    const r = new FrameReader(100);
    expect(frames(r, "a\n\nb", "c", "d\ne", "\n", "rest")).toEqual(["a", "", "bcd", "e"]);
    expect(r.pending()).toBe(4);
    expect(frames(r, "\n")).toEqual(["rest"]);
    expect(r.pending()).toBe(0);
  });

  test("a line over the limit is one oversized frame (its size, its id) once its newline comes; the lines around it are intact", () => {
    const r = new FrameReader(10);
    const big = `{"method":"x","params":"${"p".repeat(30)}","jsonrpc":"2.0","id":7}`;
    // Cut anywhere: in the first chunk, across several, at the limit exactly.
    expect(frames(r, "ok\n", big.slice(0, 5), big.slice(5, 40), big.slice(40), "\nafter\n")).toEqual(["ok", { bytes: big.length, id: 7, response: false }, "after"]);
    expect(frames(r, `0123456789\n${big}\n`, "0123456789a\nz\n")).toEqual(["0123456789", { bytes: big.length, id: 7, response: false }, { bytes: 11, id: null, response: false }, "z"]);
  });

  test("holds no more than the limit of a line: what streams past is dropped, not kept", () => {
    const MiB = 1024 * 1024;
    const r = new FrameReader(MiB);
    Bun.gc(true);
    const before = process.memoryUsage().arrayBuffers;
    let frame: Frame | undefined;
    for (let i = 0; i < 64; i++) r.push(Buffer.alloc(MiB, "a"), (f) => (frame = f)); // fresh chunks, as a stream gives them
    Bun.gc(true);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(8 * MiB); // held whole: 64 MiB
    expect(frame).toBeUndefined();
    expect(r.pending()).toBe(64 * MiB);
    r.push(Buffer.from("\n"), (f) => (frame = f));
    expect(frame).toEqual({ kind: "oversized", bytes: 64 * MiB, id: null, response: false });
    expect(r.pending()).toBe(0);
  });
});

describe("FrameIdScanner", () => {
  test("finds the top-level id first or last, a string or an integer, fed a byte at a time or whole", () => {
    for (const step of [1, 3, 1000]) {
      expect(head(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"code":"x"}}`, step)).toEqual({ id: 42, response: false });
      expect(head(`{"method":"tools/call","params":{"code":"x"},"jsonrpc":"2.0","id":"a\\"b"}`, step)).toEqual({ id: 'a"b', response: false });
      expect(head(` { "id" : -3 , "method" : "m" } `, step)).toEqual({ id: -3, response: false });
    }
  });

  test("an id inside the params, or inside a string, is not the message's", () => {
    expect(head(`{"method":"m","params":{"id":1,"a":[{"id":2}]},"jsonrpc":"2.0"}`)).toEqual({ id: null, response: false });
    expect(head(`{"method":"m","params":{"code":"\\",\\"id\\":3,\\""},"id":4}`)).toEqual({ id: 4, response: false });
    expect(head(`{"params":{"id":5},"x":"id","id":6}`)).toEqual({ id: 6, response: false });
  });

  test("an id that is no valid id, a frame that is no object, or one cut short give null", () => {
    expect(head(`{"id":{"n":1},"method":"m"}`).id).toBeNull();
    expect(head(`{"id":[1],"method":"m"}`).id).toBeNull();
    expect(head(`{"id":null,"method":"m"}`).id).toBeNull();
    expect(head(`{"id":1.5,"method":"m"}`).id).toBeNull();
    expect(head(`{"id":"${"x".repeat(300)}","method":"m"}`).id).toBeNull();
    expect(head(`[{"id":1,"method":"m"}]`).id).toBeNull();
    expect(head(`garbage "id":1`).id).toBeNull();
    expect(head(`{"method":"m","params":{"code":"xxxx`).id).toBeNull();
    // Whatever follows the message's own object is not its.
    expect(head(`{"method":"m"} {"id":1}`).id).toBeNull();
    // A cut-off number at the end of the line is still read.
    expect(head(`{"method":"m","id":12`).id).toBe(12);
  });

  test("a member name spelt with escapes is the same name; responses are told apart", () => {
    expect(head(`{"\\u0069d":8,"method":"m"}`).id).toBe(8);
    expect(head(`{"jsonrpc":"2.0","id":9,"result":{"big":"..."}}`)).toEqual({ id: 9, response: true });
    expect(head(`{"jsonrpc":"2.0","id":9,"error":{"code":1}}`)).toEqual({ id: 9, response: true });
    expect(head(`{"jsonrpc":"2.0","id":9,"method":"m","params":{"result":1}}`)).toEqual({ id: 9, response: false });
  });
});
