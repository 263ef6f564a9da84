// readLine on its own: what one stdin line becomes (a message for the SDK, an error reply, or nothing).
// The process answering them: tests/e2e/mcp_framing.test.ts.
import { describe, expect, test } from "bun:test";
import { readLine } from "./inbound.ts";

const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : Buffer.from(p))));
const rejection = (line: Uint8Array) => {
  const r = readLine(line);
  if (r.kind !== "reject") throw new Error(`not rejected: ${JSON.stringify(r)}`);
  return r.rejection;
};

describe("readLine", () => {
  test("a valid message passes (a trailing CR is whitespace); a blank line is nothing", () => {
    expect(readLine(bytes('{"jsonrpc":"2.0","id":1,"method":"ping"}\r'))).toEqual({ kind: "message", message: { jsonrpc: "2.0", id: 1, method: "ping" } });
    expect(readLine(bytes(" \r"))).toEqual({ kind: "blank" });
  });

  test("invalid UTF-8 is a parse error naming where the broken sequence starts", () => {
    const at = (b: number[]) => rejection(bytes('{"method":"', b, '"}')).message;
    expect(at([0xff])).toContain("not valid UTF-8 at byte 11 (0xff)");
    expect(at([0x61, 0xc0, 0x80])).toContain("at byte 12 (0xc0)"); // overlong
    expect(at([0xed, 0xa0, 0x80])).toContain("at byte 11 (0xed)"); // a surrogate
    expect(at([0xf4, 0x90, 0x80, 0x80])).toContain("at byte 11 (0xf4)"); // past U+10FFFF
    expect(at([0xe2, 0x82])).toContain("at byte 11 (0xe2)"); // cut short
    expect(rejection(bytes('{"method":"', [0xe2, 0x82, 0xac, 0xc3], '"}'))).toMatchObject({ id: null, code: -32700, message: expect.stringContaining("at byte 14 (0xc3)") });
  });

  test("a long line is named by its start and its length", () => {
    const r = rejection(bytes(`nonsense ${"x".repeat(500)}`));
    expect(r.message).toContain('"nonsense xxx');
    expect(r.message).toContain("(509 characters)");
    expect(r.message.length).toBeLessThan(300);
  });

  test("a malformed response is not answered; a request's invalid id is replaced by null, a valid one kept", () => {
    expect(readLine(bytes('{"jsonrpc":"2.0","id":3,"error":"x"}')).kind).toBe("ignore");
    expect(rejection(bytes('{"jsonrpc":"2.0","id":true,"method":"m"}'))).toMatchObject({ id: null, code: -32600 });
    expect(rejection(bytes('{"jsonrpc":"2.0","id":9007199254740993,"method":"m"}'))).toMatchObject({ id: null, code: -32600 });
    expect(rejection(bytes('{"jsonrpc":"2.0","id":"s","method":"m","extra":1}'))).toMatchObject({ id: "s", message: expect.stringContaining('unknown member "extra"') });
  });
});
