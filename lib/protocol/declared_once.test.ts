// The runtime protocol is declared in three places a reader may open: the TypeScript types
// (lib/protocol/runtime.ts), runtime.py's docstring table, and docs/protocol.md. This test reads the
// request and event names from each and fails when one of them gains, loses or renames one; and it
// holds runtime.py's dispatch table (_REQUESTS: every request type, which are answered at once) to
// the same request names and to the at-once list of runtime.ts (AtOnceType) and docs/protocol.md.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";

const read = (path: string) => readFileSync(new URL(path, import.meta.url), "utf8");
const sorted = (names: Iterable<string>) => [...new Set(names)].sort();

/** The names in `literal: "a" | "b"` positions of the TypeScript section between two banners. */
function typeScriptNames(key: "type" | "event"): string[] {
  const source = read("./runtime.ts");
  const [start, end] = key === "type" ? ["host -> runtime requests", "runtime -> host events"] : ["runtime -> host events", "export type InspectInfo"];
  const section = source.slice(source.indexOf(start), source.indexOf(end));
  return sorted([...section.matchAll(new RegExp(`\\b${key}: ((?:"\\w+"(?: \\| )?)+)`, "g"))].flatMap((m) => [...(m[1] ?? "").matchAll(/"(\w+)"/g)].map((n) => n[1] ?? "")));
}

/** The names in runtime.py's docstring: `{"type":"x"` and `{"event":"x"|"y"`. */
function runtimeNames(key: "type" | "event"): string[] {
  const doc = read("../../runtime.py").split('"""')[1] ?? "";
  return sorted([...doc.matchAll(new RegExp(`\\{"${key}":((?:"\\w+"\\|?)+)`, "g"))].flatMap((m) => [...(m[1] ?? "").matchAll(/"(\w+)"/g)].map((n) => n[1] ?? "")));
}

/** runtime.py's dispatch table, `_REQUESTS = {` to `}`: one `"type": (now, run),` row per request. */
function dispatchRows(): { type: string; now: boolean; run: boolean }[] {
  const table = /^_REQUESTS = \{\n([\s\S]*?)^\}/m.exec(read("../../runtime.py"))?.[1] ?? "";
  return [...table.matchAll(/^ +"(\w+)": +\((\w+), +(\w+)\),$/gm)].map((m) => ({ type: m[1] ?? "", now: m[2] !== "None", run: m[3] !== "None" }));
}

/** runtime.ts's `export type AtOnceType = "a" | "b";`. */
function typeScriptAtOnce(): string[] {
  const m = /^export type AtOnceType = ((?:"\w+"(?: \| )?)+);$/m.exec(read("./runtime.ts"));
  return sorted([...(m?.[1] ?? "").matchAll(/"(\w+)"/g)].map((n) => n[1] ?? ""));
}

/** docs/protocol.md, "Requests": the names in its "Requests other than … run strictly in order" sentence. */
function docsAtOnce(): string[] {
  const m = /^Requests other than ([^]*?) run strictly in order/m.exec(read("../../docs/protocol.md"));
  return sorted([...(m?.[1] ?? "").matchAll(/`(\w+)`/g)].map((n) => n[1] ?? ""));
}

/** The first column of the docs table whose header cell is `header` (`request` or `event`). */
function docsNames(header: "request" | "event"): string[] {
  const lines = read("../../docs/protocol.md").split("\n");
  const at = lines.findIndex((l) => l.startsWith(`| ${header} |`));
  const names: string[] = [];
  for (const line of lines.slice(at + 2)) {
    if (!line.startsWith("|")) break;
    const cell = line.split("|")[1] ?? "";
    names.push(...[...cell.matchAll(/`(\w+)`/g)].map((m) => m[1] ?? ""));
  }
  return sorted(names);
}

describe("the runtime protocol is declared once", () => {
  test("request names agree: TypeScript, runtime.py, docs/protocol.md", () => {
    const ts = typeScriptNames("type");
    expect(ts.length).toBeGreaterThan(10);
    expect(runtimeNames("type")).toEqual(ts);
    expect(docsNames("request")).toEqual(ts);
  });

  test("runtime.py's dispatch table has a row for every request, and answers at once those runtime.ts and docs/protocol.md name", () => {
    const rows = dispatchRows();
    expect(sorted(rows.map((r) => r.type))).toEqual(typeScriptNames("type"));
    expect(rows.length).toBe(new Set(rows.map((r) => r.type)).size);
    expect(rows.filter((r) => !r.now && !r.run)).toEqual([]);
    const atOnce = sorted(rows.filter((r) => r.now).map((r) => r.type));
    expect(atOnce).toContain("interrupt");
    expect(typeScriptAtOnce()).toEqual(atOnce);
    expect(docsAtOnce()).toEqual(atOnce);
  });

  test("event names agree: TypeScript, runtime.py, docs/protocol.md", () => {
    const ts = typeScriptNames("event");
    expect(ts).toContain("done");
    expect(runtimeNames("event")).toEqual(ts);
    expect(docsNames("event")).toEqual(ts);
  });
});
