import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DisplayWriter, extensionFor, isTextMime } from "./display.ts";
import { tempHome } from "../../tests/harness/mod.ts";

let tmp: ReturnType<typeof tempHome>;
beforeEach(() => {
  tmp = tempHome();
});
afterEach(() => tmp.remove());

describe("DisplayWriter", () => {
  test("text payloads stay inline; JSON payloads become JSON text", () => {
    const w = new DisplayWriter(join(tmp.home, "display"), "s");
    const item = w.item({ "text/plain": "hi", "text/html": "<b>x</b>", "application/json": { a: [1, 2] }, "image/svg+xml": "<svg/>" });
    expect(item).toEqual({ "text/plain": "hi", "text/html": "<b>x</b>", "application/json": '{"a":[1,2]}', "image/svg+xml": "<svg/>" });
  });

  test("base64 binary payloads are written to private files and replaced by their path", () => {
    const w = new DisplayWriter(join(tmp.home, "display"), "sess");
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]);
    const first = w.item({ "image/png": bytes.toString("base64") })["image/png"] as string;
    const second = w.item({ "image/png": bytes.toString("base64") })["image/png"] as string;
    expect(first).toStartWith(join(tmp.home, "display", "sess-"));
    expect(first).toEndWith(".png");
    expect(second).not.toBe(first);
    expect(readFileSync(first).equals(bytes)).toBe(true);
    expect(statSync(first).mode & 0o777).toBe(0o600);
    expect(statSync(join(tmp.home, "display")).mode & 0o777).toBe(0o700);
  });

  test("a binary MIME type whose payload is not base64 stays inline", () => {
    const w = new DisplayWriter(join(tmp.home, "display"), "s");
    expect(w.item({ "image/png": "not base64 at all!" })).toEqual({ "image/png": "not base64 at all!" });
  });

  test("MIME helpers", () => {
    expect(isTextMime("text/markdown")).toBe(true);
    expect(isTextMime("application/vnd.custom+json")).toBe(true);
    expect(isTextMime("image/png")).toBe(false);
    expect(extensionFor("image/jpeg")).toBe("jpg");
    expect(extensionFor("application/x-thing")).toBe("xthing");
    expect(extensionFor("weird")).toBe("bin");
  });
});

describe("DisplayWriter failures", () => {
  test("a directory that cannot be written says so in place of the path", () => {
    const blocker = join(tmp.home, "file");
    writeFileSync(blocker, "not a directory");
    const w = new DisplayWriter(join(blocker, "display"), "s");
    const text = w.item({ "image/png": Buffer.from("png").toString("base64") })["image/png"] as string;
    expect(text).toStartWith("[image/png display data (3 bytes) not written to");
  });
});
