// Writes requests to a child's stdin pipe. A request line goes out with one fs.writeSync on the pipe's
// fd when the pipe takes it whole right away (the common case: a small line, an idle pipe), which
// skips the Writable stream machinery, about a third of the host's CPU per execute() round trip.
// Anything the pipe does not take at once (EAGAIN, a partial write of a big cell) goes through the
// stream, and every later write waits behind it in the stream, so bytes never change order.
import { writeSync } from "node:fs";
import type { Writable } from "node:stream";

export class PipeWriter {
  private readonly stream: Writable | null;
  private fd: number | null | undefined; // undefined: not looked up yet; null: none, stream only
  private streamWrites = 0; // stream writes not yet flushed; while any, writes queue behind them
  private readerGone = false; // a write failed with EPIPE: nothing written from now on is read
  private endCalled = false;

  constructor(stream: Writable | null) {
    this.stream = stream;
  }

  /**
   * Writes data after everything written before. Returns false when the data is known not to reach the
   * reader: the pipe's reading end is closed (EPIPE: the child is gone) or the stream is. Otherwise
   * true, which means "written or queued", not "read". Errors are left to the child's exit handler.
   */
  write(data: string | Uint8Array): boolean {
    return this.send(data, undefined);
  }

  /**
   * As write(), resolving once the pipe has taken the bytes (at once when it took them whole): a
   * sender of a large payload (a snapshot restored into a remote worker) awaits each piece, so at most
   * one piece waits in memory. Resolves (never rejects) also when the reader is gone.
   */
  writeAndWait(data: string | Uint8Array): Promise<void> {
    return new Promise((resolve) => {
      this.send(data, resolve);
    });
  }

  private send(data: string | Uint8Array, taken: (() => void) | undefined): boolean {
    const stream = this.stream;
    if (!stream || stream.destroyed || stream.writableEnded || this.readerGone) {
      taken?.();
      return false;
    }
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    let written = 0;
    const fd = this.streamWrites === 0 ? this.pipeFd() : null;
    if (fd !== null) {
      try {
        written = writeSync(fd, bytes);
      } catch (err) {
        // EAGAIN: the pipe is full, the stream waits for room. EPIPE: no reader will ever read it
        // (the caller can tell a request that never reached the child). Anything else the stream
        // reports on its own error path, which the worker already handles.
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EPIPE") {
          this.readerGone = true;
          taken?.();
          return false;
        }
        if (code !== "EAGAIN") this.fd = null;
      }
      if (written === bytes.length) {
        taken?.();
        return true;
      }
    }
    this.streamWrites++;
    stream.write(written === 0 ? bytes : bytes.subarray(written), () => {
      this.streamWrites--;
      taken?.();
    });
    return true;
  }

  /** Ends the stream after everything queued. */
  end(): void {
    this.endCalled = true;
    this.stream?.end();
  }

  /** True once end() was called (even if the stream threw): the reader gets EOF after what was queued. */
  get ended(): boolean {
    return this.endCalled;
  }

  /**
   * The pipe's fd, or null when the runtime does not expose one. Node keeps it on the stream's libuv
   * handle; Bun on the stream's FileSink. Both set the pipe non-blocking, so writeSync never blocks.
   */
  private pipeFd(): number | null {
    if (this.fd === undefined) this.fd = findFd(this.stream);
    return this.fd;
  }
}

function findFd(stream: Writable | null): number | null {
  if (!stream) return null;
  const candidate = stream as unknown as Record<string | symbol, unknown> & { _handle?: { fd?: unknown } };
  const nodeFd = candidate._handle?.fd;
  if (typeof nodeFd === "number" && nodeFd >= 0) return nodeFd;
  for (const sym of Object.getOwnPropertySymbols(candidate)) {
    if (sym.description !== "kWriteStreamFastPath") continue;
    const sink = candidate[sym] as { _getFd?: () => unknown } | undefined;
    const bunFd = typeof sink?._getFd === "function" ? sink._getFd() : undefined;
    if (typeof bunFd === "number" && bunFd >= 0) return bunFd;
  }
  return null;
}
