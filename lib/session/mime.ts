// MIME types of display data and the keys of a display entry: pure functions, no file access, so the
// renderer on the CLI's hot path can use them without loading node:fs.
import type { DisplayItem } from "../protocol/result.ts";

const TEXT_TYPES = new Set(["application/json", "application/javascript", "application/xml", "image/svg+xml"]);
const EXTENSIONS: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/gif": "gif",
  "image/webp": "webp",
  "image/bmp": "bmp",
  "image/tiff": "tiff",
  "image/svg+xml": "svg",
  "application/pdf": "pdf",
  "application/octet-stream": "bin",
};

/** A payload that is text as it travels (not base64): text/*, JSON, XML, SVG. */
export function isTextMime(mime: string): boolean {
  return mime.startsWith("text/") || TEXT_TYPES.has(mime) || mime.endsWith("+json") || mime.endsWith("+xml");
}

/**
 * A payload kept in a file rather than inline: every image (SVG too: a plot's SVG is hundreds of KB
 * that no reader wants cut in half) and every type that travels as base64 (PNG, PDF, ...).
 */
export function storedAsFile(mime: string): boolean {
  return mime.startsWith("image/") || !isTextMime(mime);
}

export function extensionFor(mime: string): string {
  const known = EXTENSIONS[mime];
  if (known) return known;
  const sub = (mime.split("/")[1] ?? "").replace(/[^A-Za-z0-9]/g, "").slice(0, 10);
  return sub || "bin";
}

/** A MIME type from user code is cut to this many characters in an entry's keys (runtime.py's MIME_KEY_CHARS). */
export const MIME_KEY_CHARS = 100;

/**
 * `mime` as an entry's key: itself, or its first MIME_KEY_CHARS characters (code points, as Python
 * counts them) and "..." with a note saying so: a 5,000-character key from a cell must not be echoed
 * whole in every result. A key the runtime cut already (100 characters and "...") passes as it is.
 */
export function cutMimeKey(mime: string): { key: string; note?: string } {
  if (mime.length <= MIME_KEY_CHARS + 3) return { key: mime };
  const chars = Array.from(mime);
  if (chars.length <= MIME_KEY_CHARS + 3) return { key: mime };
  return { key: `${chars.slice(0, MIME_KEY_CHARS).join("")}...`, note: `a MIME type of ${chars.length} characters was cut to its first ${MIME_KEY_CHARS}` };
}

/** A key of a display entry that names a MIME type (they all have a "/"; `metadata`, `source`, `error` do not). */
export function isMimeKey(key: string): boolean {
  return key.includes("/");
}

/** The entry's representations: MIME type -> inline text or file path, in the entry's order. */
export function representations(item: DisplayItem): [string, string][] {
  const out: [string, string][] = [];
  for (const [key, value] of Object.entries(item)) if (isMimeKey(key) && typeof value === "string") out.push([key, value]);
  return out;
}

/** The MIME types of `item` written to files (their paths are the values). */
export function fileMimes(item: DisplayItem): string[] {
  return Object.keys(item.metadata ?? {}).filter((mime) => typeof item.metadata?.[mime]?.bytes === "number" && typeof item[mime] === "string");
}
