// Display payloads (`display` events: MIME type -> JSON payload). Text payloads stay inline; binary
// ones (base64 by Jupyter's convention: image/png, application/pdf, ...) are written to files under
// the state directory and replaced by their path, so a JSON result never carries megabytes of base64.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensurePrivateDir } from "../settings/home.ts";
import type { DisplayItem } from "../protocol/result.ts";

const TEXT_TYPES = new Set(["application/json", "application/javascript", "application/xml", "image/svg+xml"]);
const EXTENSIONS: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/gif": "gif",
  "image/webp": "webp",
  "image/bmp": "bmp",
  "image/tiff": "tiff",
  "application/pdf": "pdf",
  "application/octet-stream": "bin",
};
const BASE64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/;

export function isTextMime(mime: string): boolean {
  return mime.startsWith("text/") || TEXT_TYPES.has(mime) || mime.endsWith("+json") || mime.endsWith("+xml");
}

export function extensionFor(mime: string): string {
  const known = EXTENSIONS[mime];
  if (known) return known;
  const sub = (mime.split("/")[1] ?? "").replace(/[^A-Za-z0-9]/g, "").slice(0, 10);
  return sub || "bin";
}

export class DisplayWriter {
  private count = 0;
  private dirReady = false;
  /** `dir`: where binary payloads go; `prefix`: the start of their file names (the session id). */
  constructor(
    readonly dir: string,
    readonly prefix: string,
  ) {}

  /** Turns one display event's data into a DisplayItem: text inline, binary as a file path. */
  item(data: Record<string, unknown>): DisplayItem {
    const out: DisplayItem = {};
    for (const [mime, payload] of Object.entries(data)) {
      if (typeof payload !== "string") {
        out[mime] = JSON.stringify(payload) ?? String(payload);
      } else if (isTextMime(mime) || !BASE64.test(payload)) {
        out[mime] = payload;
      } else {
        out[mime] = this.writeFile(mime, Buffer.from(payload, "base64"));
      }
    }
    return out;
  }

  private writeFile(mime: string, bytes: Buffer): string {
    const name = `${this.prefix}-${Date.now().toString(36)}-${process.pid}-${++this.count}.${extensionFor(mime)}`;
    const path = join(this.dir, name);
    try {
      if (!this.dirReady) {
        ensurePrivateDir(this.dir);
        this.dirReady = true;
      }
      writeFileSync(path, bytes, { mode: 0o600 });
    } catch (err) {
      // A full disk must not lose the cell's result: say what happened in place of the path.
      return `[${mime} display data (${bytes.length} bytes) not written to ${path}: ${(err as Error).message}]`;
    }
    return path;
  }
}
