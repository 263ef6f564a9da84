// The client ⇄ supervisor protocol is declared in lib/protocol/supervisor.ts and described in
// docs/supervisor-protocol.md, the page a maintainer or the author of another client (the Python one)
// reads. This test holds the page to the declarations: the same request types, every field of each
// request named in its row, the same reply events with their fields, and every field of SessionSpec
// named in the page's paragraph on `spec`. It fails when one side gains, loses or renames one.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";

const read = (path: string) => readFileSync(new URL(path, import.meta.url), "utf8");
const declarations = read("./supervisor.ts");
const page = read("../../docs/supervisor-protocol.md");
const sorted = (names: Iterable<string>) => [...new Set(names)].sort();

/** The body of the object type literal that holds `at`: from its `{` to the matching `}`. */
function objectAround(source: string, at: number): string {
  let open = at;
  for (let depth = 0; open > 0; open--) {
    const c = source[open];
    if (c === "}") depth++;
    else if (c === "{" && depth-- === 0) break;
  }
  let close = open + 1;
  for (let depth = 0; close < source.length; close++) {
    const c = source[close];
    if (c === "{") depth++;
    else if (c === "}" && depth-- === 0) break;
  }
  return source.slice(open + 1, close);
}

/** The top-level keys of an object type literal's body (nested literals and comments skipped). */
function keysOf(body: string): string[] {
  const flat = body.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
  const keys: string[] = [];
  let depth = 0;
  for (const m of flat.matchAll(/[{}]|(?:^|[;{\n]\s*)(\w+)\??:/g)) {
    if (m[0] === "{") depth++;
    else if (m[0] === "}") depth--;
    else if (depth === 0 && m[1]) keys.push(m[1]);
  }
  return keys;
}

/**
 * Each `key: "name"` literal (or union, `"a" | "b"`) between the declarations `from` and `to`, with the
 * fields of its object. (The hello reply also carries `type`: the sections keep requests and replies apart.)
 */
function declared(key: "type" | "event", from: string, to: string): Map<string, string[]> {
  const start = declarations.indexOf(`export type ${from} =`);
  const end = declarations.indexOf(`export type ${to} =`);
  expect(start).toBeGreaterThan(-1);
  expect(end).toBeGreaterThan(start);
  const out = new Map<string, string[]>();
  for (const m of declarations.slice(start, end).matchAll(new RegExp(`\\b${key}: ((?:"\\w+"(?: \\| )?)+)`, "g"))) {
    const fields = keysOf(objectAround(declarations, start + m.index));
    for (const n of (m[1] ?? "").matchAll(/"(\w+)"/g)) out.set(n[1] ?? "", fields);
  }
  return out;
}

/** The rows of the page's table under `## heading`: first cell's names (`a` / `b`) → the whole row. */
function tableRows(heading: string): Map<string, string> {
  const start = page.indexOf(`\n## ${heading}\n`);
  expect(start).toBeGreaterThan(-1);
  const section = page.slice(start + 1, page.indexOf("\n## ", start + 1) >>> 0 || undefined);
  const rows = new Map<string, string>();
  for (const line of section.split("\n")) {
    const first = /^\| ([^|]+) \|/.exec(line)?.[1];
    if (!first || /^(type|event|-+)$/.test(first.trim())) continue;
    for (const n of first.matchAll(/`(\w+)`/g)) rows.set(n[1] ?? "", line);
  }
  return rows;
}

/** Every backticked word of a row (`name`, `name?`, `name: ...`). */
const named = (row: string) => new Set([...row.matchAll(/`(\w+)\??/g)].map((m) => m[1] ?? ""));

describe("docs/supervisor-protocol.md matches lib/protocol/supervisor.ts", () => {
  const requests = declared("type", "HelloRequest", "ClientRequest");
  const requestRows = tableRows("Requests (client → supervisor)");
  const replies = declared("event", "HelloReply", "SupervisorReply");
  const replyRows = tableRows("Replies (supervisor → client)");

  test("the same request types", () => {
    expect(sorted(requestRows.keys())).toEqual(sorted(requests.keys()));
  });

  test("each request's row names every field it declares", () => {
    const missing: string[] = [];
    for (const [type, fields] of requests) {
      const row = named(requestRows.get(type) ?? "");
      // `type` and `id` are every request's (said once above the table); `op` is protocol 1's spelling, said in "Versions".
      for (const f of fields) if (!["type", "id", "op"].includes(f) && !row.has(f)) missing.push(`${type}.${f}`);
    }
    expect(missing).toEqual([]);
  });

  test("the same reply events, and each row names the fields its event declares", () => {
    expect(sorted(replyRows.keys())).toEqual(sorted(replies.keys()));
    const missing: string[] = [];
    for (const [event, fields] of replies) {
      const row = named(replyRows.get(event) ?? "");
      for (const f of fields) if (!["event", "type"].includes(f) && !row.has(f)) missing.push(`${event}.${f}`);
    }
    expect(missing).toEqual([]);
  });

  test("the paragraph on spec names every field of SessionSpec", () => {
    const at = declarations.indexOf("export type SessionSpec = {");
    expect(at).toBeGreaterThan(-1);
    const fields = keysOf(objectAround(declarations, at + "export type SessionSpec = {".length - 1));
    expect(fields.length).toBeGreaterThan(5);
    const paragraph = page.slice(page.indexOf("`spec` says how to create the session"), page.indexOf("\n## Replies"));
    const words = named(paragraph);
    expect(fields.filter((f) => !words.has(f))).toEqual([]);
  });
});
