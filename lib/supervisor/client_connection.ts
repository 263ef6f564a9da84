// One client's connection, as the supervisor holds it: what its hello said, and its outbox. Replies
// queued in one turn of the event loop (a worker's chunk of output events, say) go out in one write,
// which is what keeps a chatty cell's throughput up. Live output for a client that does not read is
// dropped past a backlog, counted, and the count said once the client reads again, so a stalled
// client costs the supervisor bounded memory and never holds up the cell. A `watch` has a tighter bound
// (WATCH_BACKLOG_BYTES): past it, whole replies are left out and their number said once it reads again.
import type { Socket } from "node:net";
import type { AwreplError } from "../core/errors.ts";
import { WATCH_BACKLOG_BYTES } from "../core/limits.ts";
import type { DisplayItem } from "../protocol/result.ts";
import type { ClientKind, RequestId, SupervisorReply } from "../protocol/supervisor.ts";
import { outputFramePieces, type RawText } from "../wire/output_frames.ts";

/** How long a watch's JSON replies may wait to go out together. */
const WATCH_FLUSH_MS = 20;
/** Live output for a client that does not read is dropped past this much unsent data. */
export const MAX_BACKLOG_BYTES = 32 * 1024 * 1024;
const NEWLINE = Buffer.from("\n");

/** `pending` until the first line; then whether that hello was of our version and protocol. */
export type HelloState = "pending" | "ok" | "mismatch";

export class ClientConnection {
  hello: HelloState = "pending";
  /** Who the client is, as its hello said (absent: a library). */
  kind: ClientKind = "library";
  /** Reply lines waiting for this turn's write: JSON text, or the pieces of a forwarded output frame. */
  private outbox: (string | Uint8Array[])[] = [];
  private outboxBytes = 0;
  /** Live output bytes dropped because the client read too slowly (said once it catches up). */
  private dropped = 0;
  /** A flush is scheduled: at the end of this turn (replies), or after WATCH_FLUSH_MS (only watch replies waiting). */
  private flushing: "turn" | "timer" | null = null;
  private flushTimer: ReturnType<typeof setTimeout> | null = null;
  /** Watch replies left out because the watcher read too slowly (said, per watch, once it catches up). */
  private watchDropped = new Map<RequestId, number>();

  constructor(private readonly socket: Socket) {}

  /** Runs `hook` once the connection has closed (now, if it has). */
  onClosed(hook: () => void): void {
    if (this.socket.destroyed) hook();
    else this.socket.once("close", hook);
  }

  /** A reply of watch `id`: left out (counted) while the connection's backlog is over WATCH_BACKLOG_BYTES. */
  watchReply(message: SupervisorReply & { id: RequestId }): void {
    if (!this.watchRoom(message.id) || this.socket.destroyed || !this.socket.writable) return;
    const line = this.encode(message);
    this.queue(line, line.length, true);
  }

  /** Live output for watch `id`, in the runtime's frame, not decoded; left out (counted) like watchReply's. */
  watchOutput(stream: "stdout" | "stderr", id: RequestId, raw: RawText): void {
    if (!this.watchRoom(id) || this.socket.destroyed || !this.socket.writable) return;
    // Written this turn, as any client's live output (the frame's text is still the worker's chunk).
    const { pieces, bytes } = outputFramePieces(stream, id, raw);
    this.queue(pieces, bytes);
  }

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

  /** Whether a watch reply fits; says first how many did not, once one fits again. */
  private watchRoom(id: RequestId): boolean {
    if (this.socket.writableLength + this.outboxBytes > WATCH_BACKLOG_BYTES) {
      this.watchDropped.set(id, (this.watchDropped.get(id) ?? 0) + 1);
      return false;
    }
    const lines = this.watchDropped.get(id);
    if (lines !== undefined) {
      this.watchDropped.delete(id);
      const line = this.encode({ event: "dropped", id, lines });
      this.queue(line, line.length, true);
    }
    return true;
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

  /**
   * `later`: a watch's JSON reply, which may wait WATCH_FLUSH_MS for others: a person's terminal needs
   * no faster updates, and a cell of 0.2 ms then costs the supervisor one write per many cells, not two
   * per cell (and the watcher's process as few wake-ups).
   */
  private queue(line: string | Uint8Array[], bytes: number, later = false): void {
    this.outbox.push(line);
    this.outboxBytes += bytes;
    if (this.flushing === "turn") return;
    if (!later) {
      this.flushing = "turn";
      queueMicrotask(() => this.flush());
    } else if (this.flushing === null) {
      this.flushing = "timer";
      this.flushTimer = setTimeout(() => this.flush(), WATCH_FLUSH_MS);
    }
  }

  private flush(): void {
    this.flushing = null;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
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
