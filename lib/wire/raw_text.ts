// A stdout/stderr frame of the runtime read without decoding its text. A cell printing 100 MB sends
// ~11,000 frames of ~9 KB, and decoding each (UTF-8 to a string, then JSON.parse) was half of the
// host's CPU time, although the output limit keeps only the first and last few KiB. So the worker
// recognises output frames by their bytes and hands on a RawText: the exact UTF-8 length of the text
// (what the output limit counts) without decoding it, and the text itself only when asked.
//
// The runtime writes these frames as `{"event":"stdout","id":"7","text":"..."}` (runtime.py
// _text_frame: the text is the last key). Anything else — another shape, a \uXXXX escape (whose
// UTF-8 length depends on its neighbours), bytes that are not valid UTF-8 — returns null and goes
// through JSON.parse as before, so the result is the same either way.
import { isUtf8 } from "node:buffer";

const OPEN = Buffer.from('{"event":"std');
const TEXT_KEY = Buffer.from(',"text":"');
const BACKSLASH = 0x5c;
const QUOTE = 0x22;

export class RawText {
  private decoded: string | undefined;
  private owned = false;

  constructor(
    /** The JSON string's body: escapes intact, no quotes. */
    private body: Uint8Array,
    /** UTF-8 bytes of the decoded text. */
    readonly bytes: number,
    /**
     * The reader may reuse the body's memory (Bun's sockets do), so keeping it needs a copy. A child
     * process's stdout chunks are the consumer's (Node's contract: Bun carves them from 64 KiB blocks
     * it never rewrites), and copying each frame was a third of the host's CPU on a 100 MB cell.
     */
    private readonly reusedMemory = false,
  ) {}

  /** The decoded text. */
  text(): string {
    if (this.decoded === undefined) {
      const body = asBuffer(this.body).toString("utf8");
      this.decoded = this.bytes === this.body.byteLength ? body : unescape(body);
    }
    return this.decoded;
  }

  /** The text as the body of a JSON string (escaped, UTF-8, no quotes): to forward it as it came. */
  json(): Uint8Array {
    if (this.body === EMPTY && this.bytes > 0) {
      const quoted = Buffer.from(JSON.stringify(this.decoded ?? ""));
      return quoted.subarray(1, quoted.length - 1);
    }
    return this.body;
  }

  /**
   * Makes the piece safe to keep: a copy when the reader may reuse its memory. (Without a copy a
   * kept piece keeps its chunk's block alive; the output limit's tail spans a few blocks at most.)
   */
  retain(): this {
    if (this.decoded !== undefined) this.body = EMPTY; // the text is all it needs now
    else if (this.reusedMemory && !this.owned) {
      this.body = Uint8Array.prototype.slice.call(this.body);
      this.owned = true;
    }
    return this;
  }
}

const EMPTY = new Uint8Array(0);

function unescape(body: string): string {
  try {
    return JSON.parse(`"${body}"`) as string;
  } catch {
    return body; // not valid JSON after all (a runtime bug): the text as it came
  }
}

export type OutputFrame = { stream: "stdout" | "stderr"; id: string | null; raw: RawText };

const REPLY_OPEN = Buffer.from('{"event":"std');

/** `line` (one frame, without its newline) as an output frame, or null when it is not one we can read raw. */
export function readOutputFrame(line: Uint8Array): OutputFrame | null {
  const f = splitFrame(line, OPEN);
  if (!f) return null;
  const { idStart, textKey } = f;
  let id: string | null = null;
  if (textKey - idStart !== 4 || !startsWith(line, idStart, "null")) {
    id = simpleString(line, idStart, textKey);
    if (id === null) return null;
  }
  return { stream: f.stream, id, raw: new RawText(f.body, f.bytes) };
}

/**
 * The supervisor's live-output reply `{"type":"stdout","id":7,"text":"..."}` (lib/supervisor.ts
 * streamRaw) read the same way, for the client; null for any other line. Ids are numbers or strings.
 */
export function readReplyFrame(line: Uint8Array): { stream: "stdout" | "stderr"; id: number | string; raw: RawText } | null {
  const f = splitFrame(line, REPLY_OPEN);
  if (!f) return null;
  const { idStart, textKey } = f;
  let id: number | string;
  if (line[idStart] === QUOTE) {
    const s = simpleString(line, idStart, textKey);
    if (s === null) return null;
    id = s;
  } else {
    let v = 0;
    for (let i = idStart; i < textKey; i++) {
      const c = line[i] as number;
      if (c < 0x30 || c > 0x39 || i - idStart > 15) return null;
      v = v * 10 + (c - 0x30);
    }
    id = v;
  }
  // The socket's reader reuses its memory: a kept piece must be copied (RawText.retain).
  return { stream: f.stream, id, raw: new RawText(f.body, f.bytes, true) };
}

/**
 * What both frame shapes share: `<open>out"` or `<open>err"`, then `,"id":ID,"text":"BODY"}` with the
 * text last. `open` is everything before "out"/"err" (`{"event":"std`, `{"type":"std`).
 */
function splitFrame(line: Uint8Array, open: Buffer) {
  const n = line.length;
  const k = open.length;
  if (n < k + 22 || line[n - 1] !== 0x7d || line[n - 2] !== QUOTE) return null;
  for (let i = 0; i < k; i++) if (line[i] !== open[i]) return null;
  const out = line[k] === 0x6f && line[k + 1] === 0x75 && line[k + 2] === 0x74;
  const err = line[k] === 0x65 && line[k + 1] === 0x72 && line[k + 2] === 0x72;
  if ((!out && !err) || line[k + 3] !== QUOTE || line[k + 4] !== 0x2c || !startsWith(line, k + 5, '"id":')) return null;
  const idStart = k + 10;
  const textKey = asBuffer(line).indexOf(TEXT_KEY, idStart);
  if (textKey <= idStart) return null;
  const body = line.subarray(textKey + TEXT_KEY.length, n - 2);
  const bytes = decodedLength(body);
  if (bytes === null) return null;
  return { stream: out ? ("stdout" as const) : ("stderr" as const), idStart, textKey, body, bytes };
}

/** The JSON string in line[start, end) when it is quoted printable ASCII without escapes, else null. */
function simpleString(line: Uint8Array, start: number, end: number): string | null {
  if (end - start < 2 || line[start] !== QUOTE || line[end - 1] !== QUOTE) return null;
  let s = "";
  for (let i = start + 1; i < end - 1; i++) {
    const c = line[i] as number;
    if (c === BACKSLASH || c === QUOTE || c < 0x20 || c > 0x7e) return null;
    s += String.fromCharCode(c);
  }
  return s;
}

/**
 * UTF-8 length of the text a JSON string body decodes to, or null when that needs decoding (a \u
 * escape, a raw control character, invalid UTF-8, a dangling backslash).
 */
export function decodedLength(body: Uint8Array): number | null {
  const buf = asBuffer(body);
  let escapes = 0;
  let i = buf.indexOf(BACKSLASH);
  while (i >= 0) {
    const next = buf[i + 1];
    // \" \\ \/ \b \f \n \r \t each decode to one byte.
    if (next !== QUOTE && next !== BACKSLASH && next !== 0x2f && next !== 0x62 && next !== 0x66 && next !== 0x6e && next !== 0x72 && next !== 0x74) return null;
    escapes++;
    i = buf.indexOf(BACKSLASH, i + 2);
  }
  // An unescaped quote would have ended the string early: not a frame we understand.
  let q = buf.indexOf(QUOTE);
  while (q >= 0) {
    if (!escapedAt(buf, q)) return null;
    q = buf.indexOf(QUOTE, q + 1);
  }
  // (A raw control character cannot occur: the runtime escapes them; JSON.parse in text() would
  // refuse it, and text() falls back to the bytes as they are.)
  if (!isUtf8(buf)) return null;
  return buf.length - escapes;
}

/** True when the byte at `pos` is preceded by an odd number of backslashes. */
function escapedAt(buf: Uint8Array, pos: number): boolean {
  let n = 0;
  for (let i = pos - 1; i >= 0 && buf[i] === BACKSLASH; i--) n++;
  return n % 2 === 1;
}

/** A Buffer view of `bytes` (lines and their pieces are Buffers already: wrapping one costs more than the scan). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function startsWith(line: Uint8Array, at: number, ascii: string): boolean {
  for (let i = 0; i < ascii.length; i++) if (line[at + i] !== ascii.charCodeAt(i)) return false;
  return true;
}
