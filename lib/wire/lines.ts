// Line splitting for every newline-delimited stream awrepl reads (the supervisor's socket on both ends,
// a worker's protocol pipe): bytes in, complete lines out, a cap on one line's length.

/**
 * Splits a byte stream into lines; a line longer than `maxBytes` is an error, not a buffer.
 * With `strict`, a line that is not valid UTF-8 comes out of push() as null (the server rejects it)
 * instead of being decoded with replacement characters.
 */
export class LineSplitter {
  private parts: Uint8Array[] = [];
  private size = 0;
  private rawLeft = 0;
  private readonly decoder: TextDecoder;
  constructor(
    private readonly maxBytes: number,
    strict = false,
    /**
     * The reader may rewrite a chunk's memory after handing it over (Bun's sockets do), so the
     * unfinished end of a line is copied. A child process's stdout chunks are the consumer's (see
     * RawText): a worker passes false and keeps the piece itself, which saves a copy per chunk of a
     * cell's big output.
     */
    private readonly readerReusesMemory = true,
  ) {
    this.decoder = new TextDecoder("utf-8", { fatal: strict });
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
    this.split(chunk, (line) => lines.push(line));
    return lines;
  }

  /**
   * Calls `onLine` with each complete line in `chunk`, as bytes that may share `chunk`'s memory (use
   * them before the next chunk arrives). A line past the cap throws a RangeError once the lines before
   * it were delivered, and what was buffered is dropped. No array per chunk: a worker's hot path.
   *
   * With `onRaw`, a line may announce raw bytes (a binary data frame, docs/protocol.md): when `onLine`
   * returns a count N > 0, the next N bytes of the stream, wherever the chunks cut them, go to `onRaw`
   * (in one or more parts, sharing the chunk's memory) and are never searched for newlines; lines
   * resume after them.
   */
  split(chunk: Uint8Array, onLine: (line: Uint8Array) => number | void, onRaw?: (part: Uint8Array) => void): void {
    let start = 0;
    if (this.rawLeft > 0) {
      start = this.takeRaw(chunk, 0, onRaw);
      if (this.rawLeft > 0) return;
    }
    let nl = chunk.indexOf(10, start);
    if (nl >= 0 && this.size > 0) {
      // The end of the line the previous chunks began.
      this.checkCap(nl - start);
      this.parts.push(chunk.subarray(start, nl));
      const line = Buffer.concat(this.parts, this.size + nl - start);
      this.parts = [];
      this.size = 0;
      start = nl + 1;
      const raw = onLine(line);
      if (onRaw && typeof raw === "number" && raw > 0) {
        this.rawLeft = raw;
        start = this.takeRaw(chunk, start, onRaw);
        if (this.rawLeft > 0) return;
      }
      nl = chunk.indexOf(10, start);
    }
    while (nl >= 0) {
      if (nl - start > this.maxBytes) throw this.tooLong();
      const raw = onLine(chunk.subarray(start, nl));
      start = nl + 1;
      if (onRaw && typeof raw === "number" && raw > 0) {
        this.rawLeft = raw;
        start = this.takeRaw(chunk, start, onRaw);
        if (this.rawLeft > 0) return;
      }
      nl = chunk.indexOf(10, start);
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.checkCap(rest.length);
      this.parts.push(this.readerReusesMemory ? new Uint8Array(rest) : rest);
      this.size += rest.length;
    }
  }

  /** Raw bytes still owed to the frame a line announced (0: reading lines). */
  get rawPending(): number {
    return this.rawLeft;
  }

  /** Gives up to rawLeft bytes of `chunk` from `start` to onRaw; returns where lines resume. */
  private takeRaw(chunk: Uint8Array, start: number, onRaw: ((part: Uint8Array) => void) | undefined): number {
    const end = Math.min(chunk.length, start + this.rawLeft);
    if (end > start) {
      this.rawLeft -= end - start;
      onRaw?.(chunk.subarray(start, end));
    }
    return end;
  }

  private checkCap(more: number): void {
    if (this.size + more > this.maxBytes) throw this.tooLong();
  }

  private tooLong(): RangeError {
    this.parts = [];
    this.size = 0;
    return new RangeError(`Line longer than ${this.maxBytes} bytes`);
  }

  private decode(bytes: Uint8Array): string | null {
    try {
      return this.decoder.decode(bytes);
    } catch {
      return null;
    }
  }
}
