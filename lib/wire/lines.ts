// Line splitting for every newline-delimited stream awrepl reads (the supervisor's socket on both ends,
// a worker's protocol pipe): bytes in, complete lines out, a cap on one line's length.

/**
 * Splits a byte stream into UTF-8 lines; a line longer than `maxBytes` is an error, not a buffer.
 * With `strict`, a line that is not valid UTF-8 comes out as null (the server rejects it) instead of
 * being decoded with replacement characters.
 */
export class LineSplitter {
  private parts: Uint8Array[] = [];
  private size = 0;
  private readonly decoder: TextDecoder;
  constructor(
    private readonly maxBytes: number,
    strict = false,
  ) {
    this.decoder = new TextDecoder("utf-8", { fatal: strict });
  }

  private decode(bytes: Uint8Array): string | null {
    try {
      return this.decoder.decode(bytes);
    } catch {
      return null;
    }
  }

  /** Returns the complete lines in `chunk`, or throws a RangeError when a line passes the cap. */
  push(chunk: Uint8Array): (string | null)[] {
    return this.pushBytes(chunk).map((line) => this.decode(line));
  }

  /**
   * The complete lines in `chunk` as bytes, not decoded; they may share `chunk`'s memory, so use
   * them before the next chunk arrives. Throws a RangeError when a line passes the cap.
   */
  pushBytes(chunk: Uint8Array): Uint8Array[] {
    const lines: Uint8Array[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      if (nl < 0) break;
      const piece = chunk.subarray(start, nl);
      if (this.size + piece.length > this.maxBytes) throw new RangeError(`Line longer than ${this.maxBytes} bytes`);
      if (this.size === 0) lines.push(piece);
      else {
        this.parts.push(piece);
        lines.push(Buffer.concat(this.parts));
        this.parts = [];
        this.size = 0;
      }
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (this.size + rest.length > this.maxBytes) throw new RangeError(`Line longer than ${this.maxBytes} bytes`);
      // Copy: the caller may reuse the chunk's memory (Bun does).
      this.parts.push(new Uint8Array(rest));
      this.size += rest.length;
    }
    return lines;
  }
}
