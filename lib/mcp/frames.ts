// The MCP stdio framing, bounded: one JSON-RPC message per line, a line at most `maxBytes` long. A
// longer line is not an error that ends the stream (the SDK's own ReadBuffer closes its transport
// there): it is discarded as it streams past, never held whole, and comes out as one "oversized"
// frame, with what its reply needs (FrameIdScanner), once its newline arrives. Reading goes on after it.
import { type FrameHead, FrameIdScanner } from "./frame_id.ts";

export type Frame = { kind: "line"; bytes: Uint8Array } | ({ kind: "oversized"; bytes: number } & FrameHead);

export class FrameReader {
  /** The line so far, in pieces (joined once, at its newline: a big frame is not copied per chunk). */
  private parts: Uint8Array[] = [];
  private size = 0;
  /** Set while a line over the limit streams past. */
  private discarding: FrameIdScanner | null = null;

  constructor(readonly maxBytes: number) {}

  /** Calls `onFrame` with each frame `chunk` completes; a line's bytes may share `chunk`'s memory (use them at once). */
  push(chunk: Uint8Array, onFrame: (frame: Frame) => void): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl < 0) break;
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.take(piece)) onFrame(this.finish(piece));
      else onFrame(this.finishOversized());
    }
    // The unfinished end of a line: copied (Buffer.from copies; a Buffer's slice() would not), since the
    // stream may reuse the chunk's memory, and a small piece must not pin a whole chunk.
    if (start < chunk.length && this.take(chunk.subarray(start))) this.parts.push(Buffer.from(chunk.subarray(start)));
  }

  /** Bytes of a line begun and not finished (at EOF: a message cut short). */
  pending(): number {
    return this.size;
  }

  /** Counts `piece` in; true while the line is within the limit (the piece is still to be kept), false once it is discarded. */
  private take(piece: Uint8Array): boolean {
    this.size += piece.length;
    if (this.discarding === null && this.size <= this.maxBytes) return true;
    if (this.discarding === null) {
      this.discarding = new FrameIdScanner();
      for (const part of this.parts) this.discarding.push(part);
      this.parts = [];
    }
    this.discarding.push(piece);
    return false;
  }

  private finish(last: Uint8Array): Frame {
    const bytes = this.parts.length === 0 ? last : Buffer.concat([...this.parts, last], this.size);
    this.parts = [];
    this.size = 0;
    return { kind: "line", bytes };
  }

  private finishOversized(): Frame {
    const frame: Frame = { kind: "oversized", bytes: this.size, ...(this.discarding as FrameIdScanner).head() };
    this.discarding = null;
    this.size = 0;
    return frame;
  }
}
