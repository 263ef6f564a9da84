import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { ClientRequest } from "../protocol/supervisor.ts";
import { checkRequest, namesSession, readRequestLine, type RejectedLine, REQUEST_TYPES } from "./requests.ts";

/** Both steps, as the supervisor takes them on a connection whose hello matched. */
function parse(value: unknown): { request: ClientRequest } | RejectedLine {
  const read = readRequestLine(typeof value === "string" ? value : JSON.stringify(value));
  if ("error" in read) return read;
  try {
    return { request: checkRequest(read) };
  } catch (err) {
    return { error: err as RejectedLine["error"], id: read.id };
  }
}

function errorOf(value: unknown): RejectedLine {
  const parsed = parse(value);
  if (!("error" in parsed)) throw new Error(`expected an error for ${JSON.stringify(value)}`);
  return parsed;
}

function accepted(value: unknown): boolean {
  return "request" in parse(value);
}

describe("reading a request line", () => {
  test("accepts a well-formed execute", () => {
    const parsed = parse({ type: "execute", id: 1, session: "a", code: "1+1", stream: true, live_limit: 10, spec: { cwd: "/", timeout_ms: 5, python_given: true } });
    expect("request" in parsed && parsed.request.type).toBe("execute");
  });

  test("rejects non-JSON, non-objects and binary with no id", () => {
    for (const line of ["not json", "[1,2]", "42", "\u0000\u00ff\u0001", ""]) {
      const e = errorOf(line);
      expect(e.id).toBeNull();
      expect(e.error.code).toBe("protocol");
    }
  });

  test("names the unknown type and keeps the id so the caller's request gets the error", () => {
    const e = errorOf({ type: "launch_missiles", id: 7 });
    expect(e.id).toBe(7);
    expect(e.error.message).toContain("launch_missiles");
  });

  test("validates session names, field types and numbers, in snake_case", () => {
    expect(errorOf({ type: "execute", id: 1, session: "../etc", code: "x" }).error.code).toBe("usage");
    expect(errorOf({ type: "execute", id: 1, session: "a", code: 5 }).error.message).toContain("code");
    expect(errorOf({ type: "execute", id: 1, session: "a", code: "x", timeout_ms: -1 }).error.message).toContain("timeout_ms");
    expect(errorOf({ type: "execute", id: 1, session: "a", code: "x", live_limit: "all" }).error.message).toContain("live_limit");
    expect(errorOf({ type: "open", id: 1, session: "a", spec: { env: { A: 1 } } }).error.message).toContain("spec.env.A");
    expect(errorOf({ type: "open", id: 1, session: "a", spec: { grace_ms: -3 } }).error.message).toContain("spec.grace_ms");
    expect(errorOf({ type: "list" }).error.message).toContain("needs an id");
    expect(errorOf({ type: "close", id: 1, session: "a", keep: "yes" }).error.message).toContain("keep");
    expect(errorOf({ type: "close_all", id: 1, keep: 1 }).error.message).toContain("keep");
    expect(errorOf({ type: "open", id: 1, session: "a", spec: { autosave: "on" } }).error.message).toContain("spec.autosave");
    expect(errorOf({ type: "open", id: 1, session: "a", spec: { python_given: 1 } }).error.message).toContain("spec.python_given");
    expect(accepted({ type: "close", id: 1, session: "a", keep: true })).toBe(true);
    expect(errorOf({ type: "inspect", id: 1, session: "a", name: "x", full: "yes" }).error.message).toBe("Field full must be true or false");
    expect(accepted({ type: "inspect", id: 1, session: "a", name: "x", full: true })).toBe(true);
    expect(errorOf({ type: "execute", id: 1, session: "a", code: "x", filename: 3 }).error.message).toContain("filename");
    expect(errorOf({ type: "execute", id: 1, session: "a", code: "x", filename: "a".repeat(4097) }).error.code).toBe("usage");
    expect(accepted({ type: "execute", id: 1, session: "a", code: "x", filename: "/tmp/x.py" })).toBe(true);
    expect(accepted({ type: "execute", id: 1, session: "a", code: "x", detach: true })).toBe(true);
    expect(errorOf({ type: "execute", id: 1, session: "a", code: "x", detach: "yes" }).error.message).toContain("detach");
  });

  test("owned, idempotency keys, collect by key and spec.venv are checked (protocol 3)", () => {
    expect(accepted({ type: "open", id: 1, session: "a", owned: true })).toBe(true);
    expect(errorOf({ type: "open", id: 1, session: "a", owned: "yes" }).error.message).toContain("owned");
    expect(errorOf({ type: "execute", id: 1, session: "a", code: "x", owned: 1 }).error.message).toContain("owned");
    expect(accepted({ type: "execute", id: 1, session: "a", code: "x", idempotency_key: "k-1" })).toBe(true);
    for (const bad of ["", "k".repeat(129), 7]) {
      const { error } = errorOf({ type: "execute", id: 1, session: "a", code: "x", idempotency_key: bad });
      expect(error.code).toBe("usage");
      expect(error.message).toContain("idempotency_key");
    }
    expect(accepted({ type: "collect", id: 1, session: "a", key: "k-1", wait_ms: 10 })).toBe(true);
    expect(errorOf({ type: "collect", id: 1, session: "a", key: "" }).error.message).toContain("key");
    expect(accepted({ type: "open", id: 1, session: "a", spec: { venv: "/tmp/env" } })).toBe(true);
    expect(errorOf({ type: "open", id: 1, session: "a", spec: { venv: "env" } }).error.message).toContain("spec.venv");
  });

  test("collect takes a bounded wait_ms; keep_result needs a target", () => {
    expect(accepted({ type: "collect", id: 1, session: "a" })).toBe(true);
    expect(accepted({ type: "collect", id: 1, session: "a", wait_ms: 5000 })).toBe(true);
    expect(errorOf({ type: "collect", id: 1, session: "a", wait_ms: -1 }).error.message).toContain("wait_ms");
    expect(errorOf({ type: "collect", id: 1, session: "a", wait_ms: 2 ** 31 }).error.message).toContain("wait_ms must be at most");
    expect(errorOf({ type: "collect", id: 1 }).error.code).toBe("usage");
    expect(accepted({ type: "keep_result", id: 2, target: 1 })).toBe(true);
    expect(errorOf({ type: "keep_result", id: 2 }).error.message).toContain("keep_result needs a target id");
  });

  test("a spec's sandbox: false or a profile of net, env names and absolute paths; restore and snapshot take a timeout", () => {
    const open = (sandbox: unknown) => ({ type: "open", id: 1, session: "a", spec: { sandbox } });
    expect(accepted(open(false))).toBe(true);
    expect(accepted(open({ network: true, env: ["GITHUB_TOKEN", "_X1"], writable: ["/data"] }))).toBe(true);
    expect(errorOf(open(true)).error.message).toContain("spec.sandbox must be false or an object");
    expect(errorOf(open({ network: "yes" })).error.message).toContain("spec.sandbox.network must be true or false");
    expect(errorOf(open({ env: ["A=B"] })).error.message).toBe('Field spec.sandbox.env has "A=B": not an environment variable name');
    expect(errorOf(open({ writable: ["relative/dir"] })).error.message).toContain("not an absolute path");
    expect(errorOf(open({ writable: "/data" })).error.message).toContain("must be a list");
    expect(errorOf(open({ seccomp: true })).error.message).toContain("spec.sandbox.seccomp is not a sandbox field");
    expect(errorOf(open({ env: Array.from({ length: 300 }, (_, i) => `V${i}`) })).error.code).toBe("usage");
    expect(accepted({ type: "restore", id: 1, session: "a", path: "/x.pkl", timeout_ms: 500 })).toBe(true);
    expect(errorOf({ type: "restore", id: 1, session: "a", timeout_ms: "soon" }).error.message).toContain("timeout_ms");
  });

  test("hello needs its protocol and version; stop needs nothing", () => {
    expect(errorOf({ type: "hello", version: "1" }).error.message).toContain("protocol");
    expect(accepted({ type: "stop" })).toBe(true);
  });

  test("hello and stop are read in protocol 1's spelling (op) too, and come out with their type", () => {
    const hello = parse({ op: "hello", protocol: 1, version: "0.0.1" });
    expect("request" in hello && hello.request).toMatchObject({ type: "hello", protocol: 1 });
    const stop = parse({ op: "stop", id: 4 });
    expect("request" in stop && stop.request).toMatchObject({ type: "stop", id: 4 });
    // Everything else spelled that way has no type: unknown, but its id is kept for the error (a
    // supervisor answers it with version_mismatch when the hello did not match).
    const old = readRequestLine(JSON.stringify({ op: "execute", id: 2, session: "a", code: "x" }));
    expect(old).toMatchObject({ type: null, id: 2 });
    expect(errorOf({ op: "execute", id: 2, session: "a", code: "x" })).toMatchObject({ id: 2, error: { code: "protocol" } });
  });
});

describe("the request table", () => {
  test("says which requests name a session", () => {
    expect(REQUEST_TYPES.filter(namesSession).sort()).toEqual<string[]>(
      ["close", "collect", "complete", "execute", "history", "inspect", "interrupt", "is_complete", "open", "reset", "restore", "snapshot", "variables", "watch"].sort(),
    );
    // A request that names a session is refused without a valid one; the others do not look.
    for (const type of REQUEST_TYPES.filter(namesSession)) expect(errorOf({ type, id: 1, session: "bad name" }).error.code).toBe("usage");
    expect(accepted({ type: "list", id: 1, session: "bad name" })).toBe(true);
  });

  test("lists exactly the requests of docs/supervisor-protocol.md's request table", () => {
    const doc = readFileSync(new URL("../../docs/supervisor-protocol.md", import.meta.url), "utf8");
    const section = doc.slice(doc.indexOf("## Requests"), doc.indexOf("## Replies"));
    const documented = [...section.matchAll(/^\| ([^|]+) \|/gm)]
      .flatMap((row) => [...(row[1] as string).matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as string))
      .sort();
    expect(documented).toEqual([...REQUEST_TYPES].sort());
  });
});

describe("history, watch and hello's client", () => {
  test("hello's client is one of the kinds, named in the error otherwise", () => {
    const hello = { type: "hello", op: "hello", protocol: 3, version: "0" };
    for (const client of ["cli", "serve", "mcp", "library", "python", "kernel"]) expect(accepted({ ...hello, client })).toBe(true);
    expect(accepted(hello)).toBe(true);
    const e = errorOf({ ...hello, client: "notebook" });
    expect(e.error.code).toBe("usage");
    expect(e.error.message).toContain('"notebook"');
    expect(e.error.message).toContain("kernel");
    expect(errorOf({ ...hello, client: 3 }).error.message).toContain("client must be one of");
  });

  test("history takes a whole, non-negative last; watch names a session", () => {
    expect(accepted({ type: "history", id: 1, session: "a" })).toBe(true);
    expect(accepted({ type: "history", id: 1, session: "a", last: 0 })).toBe(true);
    expect(accepted({ type: "history", id: 1, session: "a", last: 5 })).toBe(true);
    expect(errorOf({ type: "history", id: 1, session: "a", last: -1 }).error.message).toContain("last");
    expect(errorOf({ type: "history", id: 1, session: "a", last: 1.5 }).error.message).toContain("1.5");
    expect(errorOf({ type: "history", id: 1, session: "a", last: "3" }).error.message).toContain("last");
    expect(errorOf({ type: "history", id: 1, session: "../x" }).error.code).toBe("usage");
    expect(errorOf({ type: "history", session: "a" }).error.code).toBe("protocol");
    expect(accepted({ type: "watch", id: "w", session: "a" })).toBe(true);
    expect(errorOf({ type: "watch", id: 1 }).error.code).toBe("usage");
    expect(namesSession("watch") && namesSession("history")).toBe(true);
  });
});
