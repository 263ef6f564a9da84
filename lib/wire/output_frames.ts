// Live output frames, read and written without decoding their text. Both protocols carry a cell's
// output in the same frame, `{"event":"stdout","id":ID,"text":"..."}` with the text last: the runtime
// writes it (runtime.py _text_frame; ids are strings, or null for fd-level output), and the supervisor
// forwards its bytes to a client in it (ids are the client's: numbers or strings). This module is the
// one place that knows that shape.
//
// Why undecoded: a cell printing 100 MB sends ~11,000 frames of ~9 KB, and decoding each (UTF-8 to a
// string, then JSON.parse) was half of the host's CPU time, although the output limit keeps only the
// first and last few KiB. So a frame is recognised by its bytes and its text handed on as a RawText:
// the exact UTF-8 length of the text (what the output limit counts) without decoding it, the escaped
// JSON body (to forward as it came), and the text itself only when asked. Anything else — another
// shape, a \uXXXX escape (whose UTF-8 length depends on its neighbours), bytes that are not valid UTF-8
// — reads as null and goes through JSON.parse as before, so the result is the same either way.

/**
 * node:buffer's isUtf8, looked up on first use: the CLI's hot path loads this module, and a static
 * import of node:buffer costs ~0.4 ms of every start in the executable (this lookup ~0.05 ms).
 */
let isUtf8 = (bytes: Uint8Array): boolean => (isUtf8 = process.getBuiltinModule("node:buffer").isUtf8)(bytes);

const OPEN = Buffer.from('{"event":"std');
const ID_KEY = '"id":';
const TEXT_KEY = Buffer.from(',"text":"');
const CLOSE = Buffer.from('"}');
const BACKSLASH = 0x5c;
const QUOTE = 0x22;
/** Digits of the longest numeric id read (ids are counters: Number.MAX_SAFE_INTEGER has 16). */
const MAX_ID_DIGITS = 15;

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

  /** Text that arrived decoded (a frame JSON.parse read), for a consumer of RawText. */
  static fromText(text: string): RawText {
    const raw = new RawText(EMPTY, Buffer.byteLength(text));
    raw.decoded = text;
    return raw;
  }

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

type Stream = "stdout" | "stderr";

/** A runtime's output frame: its ids are strings, or null for output no request owns. */
export type OutputFrame = { stream: Stream; id: string | null; raw: RawText };
/** The supervisor's live-output reply: the client's request id, a number or a string. */
export type ReplyFrame = { stream: Stream; id: number | string; raw: RawText };

/** `line` (one runtime frame, without its newline) as an output frame, or null when it is not one we can read raw. */
export function readOutputFrame(line: Uint8Array): OutputFrame | null {
  const frame = readFrame(line, false);
  return frame && typeof frame.id !== "number" ? (frame as OutputFrame) : null;
}

/** `line` (one supervisor reply, without its newline) as a live-output reply, or null. */
export function readReplyFrame(line: Uint8Array): ReplyFrame | null {
  // The socket's reader reuses its memory: a kept piece must be copied (RawText.retain).
  const frame = readFrame(line, true);
  return frame && frame.id !== null ? (frame as ReplyFrame) : null;
}

/**
 * The frame `{"event":"<stream>","id":<id>,"text":"<raw>"}` in pieces, the text's bytes as they came
 * (the caller writes them before the memory they share is reused), and its length in bytes.
 */
export function outputFramePieces(stream: Stream, id: number | string, raw: RawText): { pieces: Uint8Array[]; bytes: number } {
  const head = Buffer.from(`{"event":"${stream}","id":${JSON.stringify(id)},"text":"`);
  const text = raw.json();
  return { pieces: [head, text, CLOSE], bytes: head.length + text.length + CLOSE.length };
}

/** `{"event":"stdout"|"stderr","id":ID,"text":"BODY"}` with ID null, a plain string, or a non-negative integer. */
function readFrame(line: Uint8Array, reusedMemory: boolean): { stream: Stream; id: string | number | null; raw: RawText } | null {
  const n = line.length;
  const k = OPEN.length;
  if (n < k + 22 || line[n - 1] !== 0x7d || line[n - 2] !== QUOTE) return null;
  for (let i = 0; i < k; i++) if (line[i] !== OPEN[i]) return null;
  const out = line[k] === 0x6f && line[k + 1] === 0x75 && line[k + 2] === 0x74;
  const err = line[k] === 0x65 && line[k + 1] === 0x72 && line[k + 2] === 0x72;
  if ((!out && !err) || line[k + 3] !== QUOTE || line[k + 4] !== 0x2c || !startsWith(line, k + 5, ID_KEY)) return null;
  const idStart = k + 5 + ID_KEY.length;
  const textKey = asBuffer(line).indexOf(TEXT_KEY, idStart);
  if (textKey <= idStart) return null;
  const id = readId(line, idStart, textKey);
  if (id === undefined) return null;
  const body = line.subarray(textKey + TEXT_KEY.length, n - 2);
  const bytes = decodedLength(body);
  if (bytes === null) return null;
  return { stream: out ? "stdout" : "stderr", id, raw: new RawText(body, bytes, reusedMemory) };
}

/** The id in line[start, end): null, a quoted printable-ASCII string without escapes, or a non-negative integer; undefined for anything else. */
function readId(line: Uint8Array, start: number, end: number): string | number | null | undefined {
  if (end - start === 4 && startsWith(line, start, "null")) return null;
  if (line[start] === QUOTE) {
    if (end - start < 2 || line[end - 1] !== QUOTE) return undefined;
    let s = "";
    for (let i = start + 1; i < end - 1; i++) {
      const c = line[i] as number;
      if (c === BACKSLASH || c === QUOTE || c < 0x20 || c > 0x7e) return undefined;
      s += String.fromCharCode(c);
    }
    return s;
  }
  if (end - start > MAX_ID_DIGITS) return undefined;
  let v = 0;
  for (let i = start; i < end; i++) {
    const c = line[i] as number;
    if (c < 0x30 || c > 0x39) return undefined;
    v = v * 10 + (c - 0x30);
  }
  return v;
}

/**
 * UTF-8 length of the text a JSON string body decodes to, or null when that needs decoding (a \u
 * escape, a raw control character, invalid UTF-8, a dangling backslash).
 */
function decodedLength(body: Uint8Array): number | null {
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
