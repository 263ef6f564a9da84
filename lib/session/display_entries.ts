// One cell's display entries under its bounds: at most `maxEntries` entries, and inline text (HTML,
// markdown, JSON, ...) of at most the output limit in all; past either, entries are dropped and
// counted. Images and other binary payloads go to files (display.ts) and the entry carries the path
// and the byte size. Memory stays bounded however many entries a cell makes: a dropped entry is
// never kept, and a kept one holds at most the limit's worth of text. One payload over the cap on
// a payload (the runtime leaves those out itself; this is the host's own check) is neither decoded
// nor written, and MIME keys are cut as the runtime cuts them; the entry's `error` says so.
import type { DisplayEvent } from "../protocol/runtime.ts";
import type { DisplayFileInfo, DisplayItem } from "../protocol/result.ts";
import type { DisplayFiles } from "./display.ts";
import { cutMimeKey, isTextMime, storedAsFile } from "./mime.ts";
import { capText } from "./output.ts";
import { byteLimit, DEFAULTS } from "../core/limits.ts";
import { utf8Length } from "../core/utf8.ts";

const BASE64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/;
/** Below this many bytes per text payload an entry's text is left out rather than cut to nothing useful. */
const MIN_TEXT_SHARE = 64;
/** An entry's `error` (what its repr methods raised) is cut to this. */
const MAX_ERROR_BYTES = 4096;

export class CellDisplays {
  readonly items: DisplayItem[] = [];
  /** Entries left out: over the count, or with no room left for their text. */
  dropped = 0;
  /** Bytes cut from the text payloads that were kept. */
  cutBytes = 0;
  private textLeft: number;
  /** Bytes of one payload (the folder's `maxPayloadBytes`, else the default); Infinity for none. */
  private readonly payloadCap: number;

  /** `maxEntries`: 0 = no limit; `textLimit`: the cell's output limit (0 = none), shared by every entry's text. */
  constructor(
    private readonly files: DisplayFiles,
    private readonly maxEntries: number,
    textLimit: number,
  ) {
    this.textLeft = byteLimit(textLimit);
    this.payloadCap = byteLimit(files.limits.maxPayloadBytes ?? DEFAULTS.displayMaxPayloadBytes);
  }

  /** One display event as an entry of the result; null when it is dropped. */
  add(data: Record<string, unknown>, event?: Pick<DisplayEvent, "source" | "error">): DisplayItem | null {
    if (this.maxEntries > 0 && this.items.length >= this.maxEntries) {
      this.dropped++;
      return null;
    }
    const item: DisplayItem = {};
    const texts: [string, string][] = [];
    const metadata: Record<string, DisplayFileInfo> = {};
    const notes: string[] = event?.error ? [event.error] : [];
    for (const [given, payload] of Object.entries(data)) {
      const { key: mime, note } = cutMimeKey(given);
      if (note) notes.push(mime in item ? `${note}, the same as an earlier one: left out` : note);
      if (mime in item) continue;
      const text = typeof payload === "string" ? payload : (JSON.stringify(payload) ?? String(payload));
      const size = payloadBytes(mime, text);
      if (size > this.payloadCap) {
        notes.push(`${mime} display data of ${size} bytes (${sizeText(size)}) left out: over the cap of ${this.payloadCap} bytes (${sizeText(this.payloadCap)}) on one display payload`);
        continue;
      }
      const bytes = typeof payload === "string" && storedAsFile(mime) ? fileBytes(mime, payload) : null;
      if (bytes === null) {
        texts.push([mime, text]);
        item[mime] = ""; // keeps the bundle's order; filled (or removed) below
        continue;
      }
      const written = this.files.write(mime, bytes);
      if ("path" in written) {
        item[mime] = written.path;
        metadata[mime] = { bytes: bytes.length };
      } else {
        item[mime] = written.failure;
      }
    }
    this.fitText(item, texts);
    if (Object.keys(metadata).length > 0) item.metadata = metadata;
    if (event?.source === "value") item.source = "value";
    if (notes.length > 0) {
      const cut = capText(notes.join("; "), MAX_ERROR_BYTES);
      this.cutBytes += cut.dropped;
      item.error = cut.text;
    }
    if (!Object.keys(item).some((k) => k.includes("/")) && item.error === undefined) {
      this.dropped++;
      return null;
    }
    this.items.push(item);
    return item;
  }

  /** The entry's text payloads, whole if the cell's text budget holds them, else cut to an even share of what is left, else left out. */
  private fitText(item: DisplayItem, texts: [string, string][]): void {
    if (texts.length === 0) return;
    const total = texts.reduce((sum, [, text]) => sum + utf8Length(text), 0);
    if (total <= this.textLeft) {
      for (const [mime, text] of texts) item[mime] = text;
      this.textLeft -= total;
      return;
    }
    const share = Math.floor(this.textLeft / texts.length);
    if (share < MIN_TEXT_SHARE) {
      for (const [mime] of texts) delete item[mime];
      // An entry that keeps a file loses only its text: say how much; one that keeps nothing is dropped.
      if (Object.keys(item).some((k) => k.includes("/"))) this.cutBytes += total;
      return;
    }
    for (const [mime, text] of texts) {
      const cut = capText(text, share);
      item[mime] = cut.text;
      this.cutBytes += cut.dropped;
      this.textLeft -= utf8Length(text) - cut.dropped;
    }
    this.textLeft = Math.max(0, this.textLeft);
  }
}

/** A payload's size as it would be kept: the bytes its base64 stands for, else its UTF-8 text. */
function payloadBytes(mime: string, text: string): number {
  if (!isTextMime(mime) && BASE64.test(text)) return Buffer.byteLength(text, "base64");
  return utf8Length(text);
}

function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB"];
  let n = bytes;
  for (const unit of units) {
    n /= 1024;
    if (n < 1024 || unit === "GiB") return `${n.toFixed(1)} ${unit}`;
  }
  return `${bytes} B`;
}

/** The bytes of a payload kept in a file: SVG as UTF-8, binary types from base64; null when it is not base64 (kept inline). */
function fileBytes(mime: string, payload: string): Buffer | null {
  if (isTextMime(mime)) return Buffer.from(payload, "utf8");
  return BASE64.test(payload) ? Buffer.from(payload, "base64") : null;
}
