import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type DisplayFileLimits, DisplayFiles, displayFolder } from "./display.ts";
import { CellDisplays } from "./display_entries.ts";
import { extensionFor, fileMimes, isTextMime, representations, storedAsFile } from "./mime.ts";
import { tempHome } from "../../tests/harness/mod.ts";

let tmp: ReturnType<typeof tempHome>;
beforeEach(() => {
  tmp = tempHome();
});
afterEach(() => tmp.remove());

const NO_LIMITS = { maxFiles: 0, maxBytes: 0 };
const b64 = (bytes: Uint8Array | string) => Buffer.from(bytes).toString("base64");

function files(limits: DisplayFileLimits = NO_LIMITS, id = "s", kept = false): DisplayFiles {
  return new DisplayFiles(displayFolder(tmp.home, id, kept), id, limits, kept);
}

describe("CellDisplays: one cell's entries", () => {
  test("text payloads stay inline; JSON payloads become JSON text", () => {
    const cell = new CellDisplays(files(), 0, 65536);
    const item = cell.add({ "text/plain": "hi", "text/html": "<b>x</b>", "application/json": { a: [1, 2] }, "text/markdown": "# t" });
    expect(item).toEqual({ "text/plain": "hi", "text/html": "<b>x</b>", "application/json": '{"a":[1,2]}', "text/markdown": "# t" });
    expect(cell.items).toEqual([item!]);
  });

  test("binary payloads go to private files in the session's folder; the entry has the path and the byte size", () => {
    const cell = new CellDisplays(files(NO_LIMITS, "sess"), 0, 65536);
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]);
    const first = cell.add({ "text/plain": "<Figure>", "image/png": b64(bytes) })!;
    const second = cell.add({ "image/png": b64(bytes) })!;
    const path = first["image/png"] as string;
    expect(path.startsWith(join(tmp.home, "display", "sess", "sess-"))).toBe(true);
    expect(path).toEndWith(".png");
    expect(second["image/png"]).not.toBe(path);
    expect(first.metadata).toEqual({ "image/png": { bytes: 8 } });
    expect(first["text/plain"]).toBe("<Figure>");
    expect(fileMimes(first)).toEqual(["image/png"]);
    expect(readFileSync(path).equals(bytes)).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(tmp.home, "display")).mode & 0o777).toBe(0o700);
    expect(statSync(join(tmp.home, "display", "sess")).mode & 0o777).toBe(0o700);
  });

  test("SVG is written to a file as text, not inlined", () => {
    const cell = new CellDisplays(files(), 0, 65536);
    const svg = `<svg xmlns="http://www.w3.org/2000/svg">${"<g/>".repeat(100)}</svg>`;
    const item = cell.add({ "image/svg+xml": svg })!;
    expect(item["image/svg+xml"]).toEndWith(".svg");
    expect(readFileSync(item["image/svg+xml"] as string, "utf8")).toBe(svg);
    expect(item.metadata).toEqual({ "image/svg+xml": { bytes: svg.length } });
  });

  test("a binary MIME type whose payload is not base64 stays inline", () => {
    const cell = new CellDisplays(files(), 0, 65536);
    expect(cell.add({ "image/png": "not base64 at all!" })).toEqual({ "image/png": "not base64 at all!" });
  });

  test("source and error are kept; an entry with only an error is kept", () => {
    const cell = new CellDisplays(files(), 0, 65536);
    expect(cell.add({ "text/html": "<i>v</i>" }, { source: "value" })).toEqual({ "text/html": "<i>v</i>", source: "value" });
    expect(cell.add({}, { source: "value", error: "_repr_html_() raised ValueError: boom" })).toEqual({ source: "value", error: "_repr_html_() raised ValueError: boom" });
    expect(cell.items).toHaveLength(2);
  });

  test("past the entry count, entries are dropped, counted, and write no file", () => {
    const f = files();
    const cell = new CellDisplays(f, 3, 65536);
    for (let i = 0; i < 10; i++) cell.add({ "text/plain": `${i}`, "image/png": b64("x") });
    expect(cell.items.map((i) => i["text/plain"])).toEqual(["0", "1", "2"]);
    expect(cell.dropped).toBe(7);
    expect(f.usage.files).toBe(3);
  });

  test("the entries' text shares one budget: whole while it lasts, then cut to an even share, then dropped and counted", () => {
    const cell = new CellDisplays(files(), 0, 1000);
    const kb = "a".repeat(400);
    expect(cell.add({ "text/plain": kb })!["text/plain"]).toBe(kb); // 600 left
    const cut = cell.add({ "text/plain": "b".repeat(300) + "c".repeat(700) })!; // cut to the 600 left
    expect(cut["text/plain"]).toStartWith("b".repeat(300));
    expect(cut["text/plain"]).toContain("[400 bytes truncated]");
    expect(cut["text/plain"]).toEndWith("c".repeat(300));
    expect(cell.cutBytes).toBe(400);
    // Nothing left: a text-only entry is dropped; one with a file keeps the file and loses its text.
    expect(cell.add({ "text/plain": "more" })).toBeNull();
    const withFile = cell.add({ "text/plain": "<Figure>", "image/png": b64("png") })!;
    expect(withFile["text/plain"]).toBeUndefined();
    expect(withFile["image/png"]).toEndWith(".png");
    expect(cell.dropped).toBe(1);
    expect(cell.cutBytes).toBe(400 + 8);
  });

  test("15 MB of emitted text under a 64 KB limit keeps about 64 KB", () => {
    const cell = new CellDisplays(files(), 100, 65536);
    const chunk = "x".repeat(100_000);
    for (let i = 0; i < 150; i++) cell.add({ "text/plain": chunk });
    const kept = cell.items.reduce((n, i) => n + (i["text/plain"] as string).length, 0);
    expect(kept).toBeLessThan(70_000);
    expect(cell.items.length + cell.dropped).toBe(150);
  });
});

describe("CellDisplays: one payload's cap and the MIME keys (what a runtime should have cut already)", () => {
  test("a payload over the folder's maxPayloadBytes is not decoded or written: the entry's error names its type, size and the cap", () => {
    const f = files({ maxFiles: 0, maxBytes: 0, maxPayloadBytes: 1000 });
    const cell = new CellDisplays(f, 0, 65536);
    const item = cell.add({ "image/png": b64(Buffer.alloc(1001)), "text/html": "é".repeat(501), "text/plain": "<Big>" }, { error: "_repr_svg_() raised ValueError: x" })!;
    expect(item).toEqual({
      "text/plain": "<Big>",
      error: "_repr_svg_() raised ValueError: x; image/png display data of 1001 bytes (1001 B) left out: over the cap of 1000 bytes (1000 B) on one display payload; " +
        "text/html display data of 1002 bytes (1002 B) left out: over the cap of 1000 bytes (1000 B) on one display payload",
    });
    expect(f.usage.files).toBe(0);
    const kept = cell.add({ "image/png": b64(Buffer.alloc(1000)) })!;
    expect(kept.metadata).toEqual({ "image/png": { bytes: 1000 } });
    expect(f.usage.files).toBe(1);
  });

  test("without maxPayloadBytes the default cap (32 MiB) holds; 0 means none", () => {
    const over = "A".repeat(Math.ceil(((32 * 1024 * 1024 + 3) * 4) / 3));
    const dflt = new CellDisplays(files(), 0, 0).add({ "image/png": over })!;
    expect(dflt.error).toStartWith("image/png display data of 33554435 bytes (32.0 MiB) left out: over the cap of 33554432 bytes (32.0 MiB)");
    const f = files({ maxFiles: 0, maxBytes: 0, maxPayloadBytes: 0 });
    const none = new CellDisplays(f, 0, 0).add({ "image/png": b64(Buffer.alloc(2000)) })!;
    expect(none.metadata).toEqual({ "image/png": { bytes: 2000 } });
  });

  test("a MIME key over 100 characters is cut, and the cut is said", () => {
    const cell = new CellDisplays(files(), 0, 65536);
    const long = `text/${"x".repeat(4995)}`;
    const item = cell.add({ [long]: "v", [`${long}y`]: "w", "text/plain": "p" })!;
    expect(item).toEqual({
      [`${long.slice(0, 100)}...`]: "v",
      "text/plain": "p",
      error: "a MIME type of 5000 characters was cut to its first 100; a MIME type of 5001 characters was cut to its first 100, the same as an earlier one: left out",
    });
  });
});

describe("DisplayFiles: the session's folder", () => {
  test("past the file count the oldest files go", () => {
    const f = files({ maxFiles: 3, maxBytes: 0 });
    const paths = Array.from({ length: 5 }, (_, i) => (f.write("image/png", Buffer.from(`${i}`)) as { path: string }).path);
    expect(paths.map((p) => existsSync(p))).toEqual([false, false, true, true, true]);
    expect(readdirSync(f.dir)).toHaveLength(3);
    expect(f.usage).toEqual({ files: 3, bytes: 3 });
  });

  test("past the byte cap the oldest files go; the newest stays even when it alone is over", () => {
    const f = files({ maxFiles: 0, maxBytes: 100 });
    const a = (f.write("image/png", Buffer.alloc(60)) as { path: string }).path;
    const b = (f.write("image/png", Buffer.alloc(30)) as { path: string }).path;
    expect([existsSync(a), existsSync(b)]).toEqual([true, true]);
    const c = (f.write("image/png", Buffer.alloc(20)) as { path: string }).path; // 110: a goes
    expect([existsSync(a), existsSync(b), existsSync(c)]).toEqual([false, true, true]);
    const big = (f.write("application/pdf", Buffer.alloc(500)) as { path: string }).path;
    expect([existsSync(b), existsSync(c), existsSync(big)]).toEqual([false, false, true]);
    expect(big).toEndWith(".pdf");
  });

  test("files already in the folder (a session re-created after a crash) count, oldest first", () => {
    const dir = displayFolder(tmp.home, "s", false);
    mkdirSync(join(tmp.home, "display"), { mode: 0o700 });
    mkdirSync(dir, { mode: 0o700 });
    const old = join(dir, "old.png");
    writeFileSync(old, "old");
    utimesSync(old, new Date(1000), new Date(1000));
    const f = files({ maxFiles: 1, maxBytes: 0 });
    f.write("image/png", Buffer.from("new"));
    expect(existsSync(old)).toBe(false);
    expect(readdirSync(dir)).toHaveLength(1);
  });

  test("remove() deletes the folder; a kept folder (_id) stays", () => {
    const f = files();
    const p = (f.write("image/png", Buffer.from("x")) as { path: string }).path;
    f.remove();
    expect(existsSync(p)).toBe(false);
    expect(existsSync(f.dir)).toBe(false);
    const kept = files(NO_LIMITS, "run", true);
    const q = (kept.write("image/png", Buffer.from("x")) as { path: string }).path;
    expect(q.startsWith(join(tmp.home, "display", "_run"))).toBe(true);
    kept.remove();
    expect(existsSync(q)).toBe(true);
  });

  test("a folder that cannot be made says so in place of the path", () => {
    const blocker = join(tmp.home, "file");
    writeFileSync(blocker, "not a directory");
    const f = new DisplayFiles(join(blocker, "display", "s"), "s", NO_LIMITS);
    const cell = new CellDisplays(f, 0, 65536);
    const text = cell.add({ "image/png": b64("png") })!["image/png"] as string;
    expect(text).toStartWith("[image/png display data (3 bytes) not written to");
  });
});

describe("MIME helpers", () => {
  test("text, files, extensions, representations", () => {
    expect(isTextMime("text/markdown")).toBe(true);
    expect(isTextMime("application/vnd.custom+json")).toBe(true);
    expect(isTextMime("image/png")).toBe(false);
    expect(storedAsFile("image/svg+xml")).toBe(true);
    expect(storedAsFile("application/pdf")).toBe(true);
    expect(storedAsFile("text/html")).toBe(false);
    expect(extensionFor("image/jpeg")).toBe("jpg");
    expect(extensionFor("image/svg+xml")).toBe("svg");
    expect(extensionFor("application/x-thing")).toBe("xthing");
    expect(extensionFor("weird")).toBe("bin");
    expect(representations({ "text/plain": "a", metadata: { "image/png": { bytes: 1 } }, "image/png": "/p", source: "value" })).toEqual([
      ["text/plain", "a"],
      ["image/png", "/p"],
    ]);
  });
});
