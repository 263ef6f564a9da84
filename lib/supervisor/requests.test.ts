import { describe, expect, test } from "bun:test";
import { parseRequestLine } from "./requests.ts";

function errorOf(line: string) {
  const parsed = parseRequestLine(line);
  if (!("error" in parsed)) throw new Error(`expected an error for ${line}`);
  return parsed;
}

describe("parseRequestLine", () => {
  test("accepts a well-formed execute", () => {
    const parsed = parseRequestLine(JSON.stringify({ op: "execute", id: 1, session: "a", code: "1+1", stream: true, spec: { cwd: "/" } }));
    expect("request" in parsed && parsed.request.op).toBe("execute");
  });

  test("rejects non-JSON, non-objects and binary with no id", () => {
    for (const line of ["not json", "[1,2]", "42", "\u0000\u00ff\u0001", ""]) {
      const e = errorOf(line);
      expect(e.id).toBeNull();
      expect(e.error.code).toBe("protocol");
    }
  });

  test("names the unknown op and keeps the id so the caller's request gets the error", () => {
    const e = errorOf(JSON.stringify({ op: "launch_missiles", id: 7 }));
    expect(e.id).toBe(7);
    expect(e.error.message).toContain("launch_missiles");
  });

  test("validates session names, field types and numbers", () => {
    expect(errorOf(JSON.stringify({ op: "execute", id: 1, session: "../etc", code: "x" })).error.code).toBe("usage");
    expect(errorOf(JSON.stringify({ op: "execute", id: 1, session: "a", code: 5 })).error.message).toContain("code");
    expect(errorOf(JSON.stringify({ op: "execute", id: 1, session: "a", code: "x", timeoutMs: -1 })).error.message).toContain("timeoutMs");
    expect(errorOf(JSON.stringify({ op: "open", id: 1, session: "a", spec: { env: { A: 1 } } })).error.message).toContain("spec.env.A");
    expect(errorOf(JSON.stringify({ op: "list" })).error.message).toContain("needs an id");
    expect(errorOf(JSON.stringify({ op: "close", id: 1, session: "a", keep: "yes" })).error.message).toContain("keep");
    expect(errorOf(JSON.stringify({ op: "close_all", id: 1, keep: 1 })).error.message).toContain("keep");
    expect(errorOf(JSON.stringify({ op: "open", id: 1, session: "a", spec: { autosave: "on" } })).error.message).toContain("spec.autosave");
    expect("request" in parseRequestLine(JSON.stringify({ op: "close", id: 1, session: "a", keep: true }))).toBe(true);
    expect(errorOf(JSON.stringify({ op: "execute", id: 1, session: "a", code: "x", filename: 3 })).error.message).toContain("filename");
    expect(errorOf(JSON.stringify({ op: "execute", id: 1, session: "a", code: "x", filename: "a".repeat(4097) })).error.code).toBe("usage");
    expect("request" in parseRequestLine(JSON.stringify({ op: "execute", id: 1, session: "a", code: "x", filename: "/tmp/x.py" }))).toBe(true);
  });

  test("hello needs its protocol and version; stop needs nothing", () => {
    expect(errorOf(JSON.stringify({ op: "hello", version: "1" })).error.message).toContain("protocol");
    expect("request" in parseRequestLine(JSON.stringify({ op: "stop" }))).toBe(true);
  });
});
