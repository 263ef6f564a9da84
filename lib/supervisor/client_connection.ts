// One client's connection, as the supervisor holds it: what its hello said, and its outbox. Replies
// queued in one turn of the event loop (a worker's chunk of output events, say) go out in one write,
// which is what keeps a chatty cell's throughput up. Live output for a client that does not read is
// dropped past a backlog, counted, and the count said once the client reads again, so a stalled
// client costs the supervisor bounded memory and never holds up the cell.
import type { Socket } from "node:net";
import type { AwreplError } from "../core/errors.ts";
import type { DisplayItem } from "../protocol/result.ts";
import type { RequestId, SupervisorReply } from "../protocol/supervisor.ts";
import { outputFramePieces, type RawText } from "../wire/output_frames.ts";

/** Live output for a client that does not read is dropped past this much unsent data. */
export const MAX_BACKLOG_BYTES = 32 * 1024 * 1024;
const NEWLINE = Buffer.from("\n");

/** `pending` until the first line; then whether that hello was of our version and protocol. */
export type HelloState = "pending" | "ok" | "mismatch";

export class ClientConnection {
  hello: HelloState = "pending";
  /** Reply lines waiting for this turn's write: JSON text, or the pieces of a forwarded output frame. */
  private outbox: (string | Uint8Array[])[] = [];
  private outboxBytes = 0;
  /** Live output bytes dropped because the client read too slowly (said once it catches up). */
  private dropped = 0;

  constructor(private readonly socket: Socket) {}

  /** A reply as one line of JSON. */
  encode(message: SupervisorReply): string {
    // A client of another version reads replies by protocol 1's `type`: everything said before a
    // matching hello carries that spelling too, so that it learns the versions differ.
    return JSON.stringify(this.hello === "ok" ? message : { ...message, type: message.event });
  }

  reply(message: SupervisorReply): void {
    if (this.socket.destroyed || !this.socket.writable) return;
    const line = this.encode(message);
    this.queue(line, line.length);
  }

  error(id: RequestId | null, error: AwreplError): void {
    this.reply({ event: "error", id, code: error.code, message: error.message });
  }

  /** Live output, forwarded in the runtime's frame with the text's bytes as the worker wrote them. */
  output(stream: "stdout" | "stderr", id: RequestId, raw: RawText): void {
    if (this.backlogged()) {
      this.dropped += raw.bytes;
      return;
    }
    this.noteDropped(id);
    // The pieces are copied once, in #flush(), this turn: the text's bytes are still the worker's chunk.
    const { pieces, bytes } = outputFramePieces(stream, id, raw);
    this.queue(pieces, bytes);
  }

  /** A live display item: dropped (not counted: the result carries every one) while backlogged. */
  display(id: RequestId, item: DisplayItem): void {
    if (!this.backlogged()) this.reply({ event: "display", id, item });
  }

  /** Half-closes: what is queued still goes out. */
  end(): void {
    this.socket.end();
  }

  private backlogged(): boolean {
    return this.socket.writableLength + this.outboxBytes > MAX_BACKLOG_BYTES;
  }

  /** Says how much live output a slow client missed, once it reads again. */
  private noteDropped(id: RequestId): void {
    if (this.dropped === 0) return;
    const note = `\n[awrepl: ${this.dropped} bytes of live output not shown: the client read too slowly]\n`;
    this.dropped = 0;
    this.reply({ event: "stderr", id, text: note });
  }

  private queue(line: string | Uint8Array[], bytes: number): void {
    this.outbox.push(line);
    this.outboxBytes += bytes;
    if (this.outbox.length === 1) queueMicrotask(() => this.flush());
  }

  private flush(): void {
    const lines = this.outbox;
    this.outbox = [];
    this.outboxBytes = 0;
    if (lines.length === 0 || this.socket.destroyed || !this.socket.writable) return;
    if (lines.every((l) => typeof l === "string")) {
      this.socket.write(lines.join("\n") + "\n");
      return;
    }
    // One copy for the turn's lines, however many output frames they forward.
    const parts: Uint8Array[] = [];
    for (const l of lines) {
      if (typeof l === "string") parts.push(Buffer.from(l));
      else parts.push(...l);
      parts.push(NEWLINE);
    }
    this.socket.write(Buffer.concat(parts));
  }
}
