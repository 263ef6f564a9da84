// One cell's stdout+stderr under one byte limit, with memory bounded by that limit however much the
// cell prints. The first half of the limit is kept as the head; the last half rolls as the tail; the
// middle is counted and dropped. Sizes are UTF-8 bytes; cuts land on character boundaries only, so a
// kept string never ends or starts inside a multi-byte character, and on a line boundary where one
// is within LINE_SNAP_BYTES (the head cut back, the tail forward), counted with the rest.
//
// Output can arrive undecoded (addRaw, a RawText from lib/wire/output_frames.ts): once the head is full such a
// piece is only counted and, if it is still in the tail when the result is made, decoded. The tail
// drops whole pieces as later ones arrive and cuts inside its first piece only in result(), so a
// piece passing through is never decoded; it holds at most the tail's limit plus one piece.
import { byteLimit, LINE_SNAP_BYTES } from "../core/limits.ts";
import { utf8Length, utf8Prefix, utf8Suffix } from "../core/utf8.ts";
import type { RawText } from "../wire/output_frames.ts";

export type Stream = "stdout" | "stderr";

type TailPiece = { stream: Stream; piece: string | RawText; bytes: number };

function textOf(piece: string | RawText): string {
  return typeof piece === "string" ? piece : piece.text();
}

export type CollectedOutput = {
  stdout: string;
  stderr: string;
  truncated: boolean;
  /** Exact number of UTF-8 bytes dropped (markers are not counted as kept output). */
  truncated_bytes: number;
};

/** The marker line put where a stream lost bytes. */
export function truncationMarker(droppedBytes: number): string {
  return `... [${droppedBytes} bytes truncated] ...\n`;
}

/** A text under a byte limit on its own (a value, an exception, a display payload): the cut text and the bytes dropped. */
export type CappedText = { text: string; dropped: number };

/**
 * `text` cut like a stream: when its UTF-8 encoding is over `limit` bytes, the first half of the limit,
 * one marker line, and the last half; cuts on character boundaries. A short text (at most 3 bytes per
 * UTF-16 unit) is returned without being measured.
 */
export function capText(text: string, limit: number): CappedText {
  if (text.length * 3 <= limit) return { text, dropped: 0 };
  const bytes = utf8Length(text);
  if (bytes <= limit) return { text, dropped: 0 };
  const headLimit = Math.ceil(limit / 2);
  const [head, headBytes] = headToLine(...utf8Prefix(text, headLimit));
  const [rawTail, rawTailBytes] = utf8Suffix(text, limit - headLimit);
  const [tail, tailBytes] = tailToLine(rawTail, rawTailBytes, text.charCodeAt(text.length - rawTail.length - 1) === NEWLINE);
  const dropped = bytes - headBytes - tailBytes;
  return { text: joinCut(head, dropped, tail), dropped };
}

/** A kept head (and its bytes) cut back to its last newline, when one is within LINE_SNAP_BYTES of its end. */
function headToLine(head: string, bytes: number): [string, number] {
  if (head === "" || head.endsWith("\n")) return [head, bytes];
  const nl = head.lastIndexOf("\n");
  if (nl < 0 || head.length - nl - 1 > LINE_SNAP_BYTES) return [head, bytes];
  const partial = utf8Length(head.slice(nl + 1));
  return partial <= LINE_SNAP_BYTES ? [head.slice(0, nl + 1), bytes - partial] : [head, bytes];
}

const NEWLINE = 0x0a;
const BACKSLASH = 0x5c;

/**
 * A kept tail (and its bytes) cut forward past its first newline, when it does not start a line
 * already (`atLine`: the byte before it was a newline), a newline is within LINE_SNAP_BYTES of its
 * start, and something follows it.
 */
function tailToLine(tail: string, bytes: number, atLine: boolean): [string, number] {
  if (atLine) return [tail, bytes];
  const nl = tail.indexOf("\n");
  if (nl < 0 || nl > LINE_SNAP_BYTES || nl === tail.length - 1) return [tail, bytes];
  const partial = utf8Length(tail.slice(0, nl + 1));
  return partial <= LINE_SNAP_BYTES ? [tail.slice(nl + 1), bytes - partial] : [tail, bytes];
}

/** Below this share per entry, capEntries cuts the joined text instead (the entries would be unreadable). */
const MIN_ENTRY_SHARE = 64;

/**
 * Entries (a traceback's frames and exception lines) joined under one limit, the largest cut first:
 * each entry keeps up to an even share of the limit, and the ones over it are cut to it, so a
 * 10 MB exception message cannot push the frames out. With too many entries for a useful share,
 * the joined text is cut like capText.
 */
export function capEntries(entries: readonly string[], limit: number): CappedText {
  const sizes = entries.map(utf8Length);
  if (sizes.reduce((a, b) => a + b, 0) <= limit) return { text: entries.join(""), dropped: 0 };
  const ascending = [...sizes].sort((a, b) => a - b);
  let rest = limit;
  let share = 0;
  for (let i = 0; i < ascending.length; i++) {
    const even = Math.floor(rest / (ascending.length - i));
    const size = ascending[i] as number;
    if (size > even) {
      share = even;
      break;
    }
    rest -= size;
  }
  if (share < MIN_ENTRY_SHARE) return capText(entries.join(""), limit);
  let dropped = 0;
  const kept = entries.map((entry, i) => {
    if ((sizes[i] as number) <= share) return entry;
    const capped = capText(entry, share);
    dropped += capped.dropped;
    return capped.text;
  });
  return { text: kept.join(""), dropped };
}

/** True when the piece's text ends with a newline; an undecoded one is asked through its escaped JSON body (`\n`), not decoded. */
function endsWithNewline(piece: string | RawText): boolean {
  if (typeof piece === "string") return piece.endsWith("\n");
  const body = piece.json();
  let i = body.length - 1;
  if (i < 1 || body[i] !== 0x6e || body[i - 1] !== BACKSLASH) return false;
  let slashes = 0;
  for (i -= 1; i >= 0 && body[i] === BACKSLASH; i--) slashes++;
  return slashes % 2 === 1; // `\n` is an escaped newline; `\\n` an escaped backslash and an n
}

/** Head, one marker line for the bytes dropped (none when nothing was), tail. */
function joinCut(head: string, dropped: number, tail: string): string {
  if (dropped === 0) return head + tail;
  // The marker is a line of its own: start it on a fresh line when the head ends mid-line.
  const sep = head === "" || head.endsWith("\n") ? "" : "\n";
  return head + sep + truncationMarker(dropped) + tail;
}

export class OutputCollector {
  readonly limit: number;
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private headBytes = 0;
  /** Once the head is full, every later byte goes through the tail. */
  private headFull = false;
  private readonly head: Record<Stream, string[]> = { stdout: [], stderr: [] };
  private tail: TailPiece[] = [];
  private tailStart = 0; // index of the first live piece in `tail` (avoids shift() per eviction)
  private tailBytes = 0;
  private readonly dropped: Record<Stream, number> = { stdout: 0, stderr: 0 };
  /** Whether the last byte a stream dropped before its tail ends a line (its tail then starts one). */
  private readonly cutAtLine: Record<Stream, boolean> = { stdout: false, stderr: false };
  /** Total bytes received, kept or not. */
  totalBytes = 0;

  /** `limit`: UTF-8 bytes kept; 0 (or Infinity) keeps everything (lib/core/limits.ts byteLimit). */
  constructor(limit: number) {
    if (Number.isNaN(limit) || limit < 0) throw new RangeError(`Output limit must be a non-negative number, not ${limit}`);
    this.limit = byteLimit(Math.floor(limit));
    this.headLimit = Math.ceil(this.limit / 2);
    // With no limit everything is head: the tail is never reached.
    this.tailLimit = Number.isFinite(this.limit) ? this.limit - this.headLimit : Number.POSITIVE_INFINITY;
  }

  add(stream: Stream, text: string): void {
    if (text.length === 0) return;
    const bytes = utf8Length(text);
    this.totalBytes += bytes;
    if (!this.headFull) {
      if (this.headBytes + bytes <= this.headLimit) {
        this.head[stream].push(text);
        this.headBytes += bytes;
        return;
      }
      // Split: what fits goes to the head, the rest starts the tail.
      const [prefix, prefixBytes] = utf8Prefix(text, this.headLimit - this.headBytes);
      if (prefixBytes > 0) this.head[stream].push(prefix);
      this.headBytes += prefixBytes;
      this.headFull = true;
      if (prefixBytes === bytes) return;
      this.addTail(stream, text.slice(prefix.length), bytes - prefixBytes);
      return;
    }
    this.addTail(stream, text, bytes);
  }

  /** Output not decoded yet: decoded only if it lands in the head or stays in the tail. */
  addRaw(stream: Stream, raw: RawText): void {
    if (!this.headFull) {
      this.add(stream, raw.text());
      return;
    }
    if (raw.bytes === 0) return;
    this.totalBytes += raw.bytes;
    this.addTail(stream, raw, raw.bytes);
  }

  private addTail(stream: Stream, piece: string | RawText, bytes: number): void {
    if (bytes >= this.tailLimit) {
      // This piece alone fills the tail: everything before it is dropped.
      for (let i = this.tailStart; i < this.tail.length; i++) {
        const p = this.tail[i] as TailPiece;
        this.dropped[p.stream] += p.bytes;
        this.cutAtLine[p.stream] = endsWithNewline(p.piece);
      }
      this.tail = [];
      this.tailStart = 0;
      this.tailBytes = 0;
      if (typeof piece !== "string") {
        // Undecoded, it stays whole until result() cuts it (settleTail): a small limit must not mean
        // decoding every frame of a cell printing 100 MB (each is larger than the tail then).
        this.tail.push({ stream, piece: piece.retain(), bytes });
        this.tailBytes = bytes;
        return;
      }
      const [suffix, suffixBytes] = utf8Suffix(piece, this.tailLimit);
      this.dropped[stream] += bytes - suffixBytes;
      if (suffixBytes < bytes) this.cutAtLine[stream] = piece.charCodeAt(piece.length - suffix.length - 1) === NEWLINE;
      if (suffixBytes > 0) this.tail.push({ stream, piece: suffix, bytes: suffixBytes });
      this.tailBytes = suffixBytes;
      return;
    }
    this.tail.push({ stream, piece: typeof piece === "string" ? piece : piece.retain(), bytes });
    this.tailBytes += bytes;
    // Drop whole pieces from the front while the rest still fills the tail (see settleTail()).
    for (;;) {
      const first = this.tail[this.tailStart] as TailPiece;
      if (this.tailBytes - first.bytes < this.tailLimit) break;
      this.dropped[first.stream] += first.bytes;
      this.cutAtLine[first.stream] = endsWithNewline(first.piece);
      this.tailBytes -= first.bytes;
      this.tailStart++;
    }
    if (this.tailStart > 64 && this.tailStart * 2 > this.tail.length) {
      this.tail = this.tail.slice(this.tailStart);
      this.tailStart = 0;
    }
  }

  /** Cuts the tail's first piece so the tail is exactly within its limit (on a character boundary). */
  private settleTail(): void {
    const excess = this.tailBytes - this.tailLimit;
    if (excess <= 0) return;
    const first = this.tail[this.tailStart] as TailPiece;
    const text = textOf(first.piece);
    const [suffix, suffixBytes] = utf8Suffix(text, first.bytes - excess);
    this.dropped[first.stream] += first.bytes - suffixBytes;
    this.cutAtLine[first.stream] = text.charCodeAt(text.length - suffix.length - 1) === NEWLINE;
    this.tailBytes -= first.bytes - suffixBytes;
    if (suffixBytes === 0) this.tailStart++;
    else this.tail[this.tailStart] = { stream: first.stream, piece: suffix, bytes: suffixBytes };
  }

  get truncatedBytes(): number {
    this.settleTail();
    return this.dropped.stdout + this.dropped.stderr;
  }

  /** The kept text of each stream: head, one marker line if that stream lost bytes, tail. */
  result(): CollectedOutput {
    this.settleTail();
    const tails: Record<Stream, string[]> = { stdout: [], stderr: [] };
    for (let i = this.tailStart; i < this.tail.length; i++) {
      const p = this.tail[i] as TailPiece;
      tails[p.stream].push(textOf(p.piece));
    }
    let moved = 0;
    const join = (stream: Stream): string => {
      const head = this.head[stream].join("");
      const tail = tails[stream].join("");
      if (this.dropped[stream] === 0) return head + tail;
      // Cut on line boundaries where they are near; what moves from the kept text is counted.
      const [headBytes, tailBytes] = [utf8Length(head), utf8Length(tail)];
      const [lineHead, lineHeadBytes] = headToLine(head, headBytes);
      const [lineTail, lineTailBytes] = tailToLine(tail, tailBytes, this.cutAtLine[stream]);
      const cut = headBytes - lineHeadBytes + tailBytes - lineTailBytes;
      moved += cut;
      return joinCut(lineHead, this.dropped[stream] + cut, lineTail);
    };
    const stdout = join("stdout");
    const stderr = join("stderr");
    const truncated_bytes = this.truncatedBytes + moved;
    return { stdout, stderr, truncated: truncated_bytes > 0, truncated_bytes };
  }
}
