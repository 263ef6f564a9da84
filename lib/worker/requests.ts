// The requests a worker has in flight and the runtime's events that belong to them: one id -> pending
// map, the frames of the protocol channel read (output frames and payload pieces without decoding or
// JSON.parse) and routed to their request's handlers (output with id null to the running execute),
// and all of them rejected at once at the worker's end. No process here: Worker writes the lines,
// takes the handshake, and says when it ends.
import { NO_HOST_BRIDGE } from "../core/host_bridge.ts";
import type { DisplayEvent, DoneEvent, ErrorEvent, IdRequest, ReadyEvent, RuntimeEvent } from "../protocol/runtime.ts";
import { readBinaryDataHeader, readDataFrame } from "../wire/data_frames.ts";
import { RawText, readOutputFrame } from "../wire/output_frames.ts";

/** Handlers for the events of one request; output with id null goes to the active execute's handlers. */
export type RequestHandlers = {
  output?(stream: "stdout" | "stderr", text: string): void;
  /** Output not yet decoded (lib/wire/output_frames.ts); when absent, `output` gets the decoded text. */
  rawOutput?(stream: "stdout" | "stderr", raw: RawText): void;
  display?(data: Record<string, unknown>, event: DisplayEvent): void;
  result?(text: string): void;
  error?(event: ErrorEvent): void;
  /**
   * A piece of the payload the request streams to the host (snapshot `to: "host"`), decoded, in order
   * from 0; a binary frame's piece may come in several parts in a row, each with the piece's seq.
   */
  data?(piece: Uint8Array, seq: number): void;
  /** A host request of the cell (`awrepl.host_request`); `reply` sends its answer. Without it: NO_HOST_BRIDGE. */
  hostRequest?(data: Record<string, unknown>, reply: (data: Record<string, unknown>) => void): void;
};

/** What the requests need of their worker. */
export type RequestChannel = {
  /** Writes one line to the runtime (a host request's reply). */
  write(line: string): boolean;
  /** Keeps a line for diagnostics: what is not the protocol, or what went wrong reading it. */
  noise(line: string): void;
  /** Output that belongs to no pending request (a background thread writing between cells). */
  unclaimed(stream: "stdout" | "stderr", text: string): void;
  /** The runtime's handshake. */
  ready(event: ReadyEvent): void;
};

export type Pending = {
  id: string;
  type: IdRequest["type"];
  handlers: RequestHandlers | undefined;
  /** Written after the process was gone: it never ran (see UndeliveredRequestError). */
  undelivered: boolean;
  /**
   * Sent while the heartbeat already went unanswered (a partition not yet declared): its silence is
   * no sign of work in progress, so it does not hold off the declaration of a lost worker.
   */
  sentIntoSilence: boolean;
  resolve(done: DoneEvent): void;
  reject(err: Error): void;
};

/** Requests the runtime's reader thread answers itself (not queued): they do not make a worker busy. */
const ANSWERED_AT_ONCE = new Set<string>(["ping", "heartbeat", "info"]);
const UTF8 = new TextDecoder();

export class PendingRequests {
  private readonly pending = new Map<string, Pending>();
  /** The execute request currently running (requests run in order; output with id null is its). */
  private active: Pending | null = null;
  private nextId = 0;

  constructor(private readonly channel: RequestChannel) {}

  /** The id the latest open() gave. */
  get lastId(): string {
    return String(this.nextId);
  }

  /**
   * A new request of `type`, pending until its `done` or the worker's end. `send` writes it with its
   * id and says whether the process can get it (false: it was gone already, the request is undelivered).
   */
  open(type: IdRequest["type"], handlers: RequestHandlers | undefined, sentIntoSilence: boolean, send: (id: string) => boolean): Promise<DoneEvent> {
    const id = String(++this.nextId);
    return new Promise<DoneEvent>((resolve, reject) => {
      const pending: Pending = { id, type, handlers, resolve, reject, undelivered: false, sentIntoSilence };
      this.pending.set(id, pending);
      if (type === "execute" && this.active === null) this.active = pending;
      pending.undelivered = !send(id);
    });
  }

  has(id: string): boolean {
    return this.pending.has(id);
  }

  /** A request other than the reader thread's own (ping, heartbeat, info) is pending: the worker is at work. */
  get busy(): boolean {
    for (const p of this.pending.values()) if (!ANSWERED_AT_ONCE.has(p.type)) return true;
    return false;
  }

  /** busy with a request the worker was answering when it went out: its silence may be a C loop. */
  get busyAtWork(): boolean {
    for (const p of this.pending.values()) if (!ANSWERED_AT_ONCE.has(p.type) && !p.sentIntoSilence) return true;
    return false;
  }

  /** Rejects every pending request, each with the error `errorOf` gives it. */
  failAll(errorOf: (p: Pending) => Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    this.active = null;
    for (const p of all) p.reject(errorOf(p));
  }

  /** The binary data frame whose raw bytes the channel is reading now (see onRaw). */
  private raw: { id: string; seq: number } | null = null;

  /**
   * One frame's bytes: output frames are read without decoding their text, the rest parsed. Returns
   * the count of raw bytes that follow on the channel when the line is a binary data frame's header
   * (LineSplitter.split hands them to onRaw).
   */
  readonly onFrame = (line: Uint8Array): number | void => {
    if (line.length === 0) return;
    if (line[10] === 0x64 && line[11] === 0x61) {
      // `{"event":"da...`: a payload piece, decoded without JSON.parse.
      const header = line[line.length - 2] !== 0x22 ? readBinaryDataHeader(line) : null;
      if (header) {
        this.raw = { id: header.id, seq: header.seq };
        return header.bytes;
      }
      const data = readDataFrame(line);
      if (data) {
        try {
          this.pending.get(data.id)?.handlers?.data?.(data.piece, data.seq);
        } catch (err) {
          this.keepHandlerFailure("data", err);
        }
        return;
      }
    }
    const frame = readOutputFrame(line);
    if (!frame) {
      this.onLine(UTF8.decode(line));
      return;
    }
    try {
      this.deliverOutput(frame.stream, frame.id, frame.raw);
    } catch (err) {
      this.keepHandlerFailure(frame.stream, err);
    }
  };

  /** A part of the raw bytes of the binary data frame read last: to its request's data handler (a finished request's are dropped). */
  readonly onRaw = (part: Uint8Array): void => {
    const raw = this.raw;
    if (!raw) return;
    try {
      this.pending.get(raw.id)?.handlers?.data?.(part, raw.seq);
    } catch (err) {
      this.keepHandlerFailure("data", err);
    }
  };

  /** A handler that throws must not stop the frames that follow (the done would never arrive): said in diagnostics. */
  private keepHandlerFailure(event: string, err: unknown): void {
    this.channel.noise(`[a handler failed on a ${event} event: ${(err as Error)?.message ?? err}]`);
  }

  /**
   * The request that output or a display belongs to: the one its id names while that one is pending;
   * id null (fd-level output) and ids of finished cells (their background tasks) belong to the execute
   * that runs now, if any.
   */
  private ownerOf(id: string | null): Pending | null {
    return (id === null ? undefined : this.pending.get(id)) ?? this.active;
  }

  /**
   * Output to its owner's handlers, one path whichever way the frame was read (raw, or decoded by
   * JSON.parse: a \u escape); the text decoded only for handlers that want it so; else unclaimed.
   */
  private deliverOutput(stream: "stdout" | "stderr", id: string | null, output: RawText): void {
    const handlers = this.ownerOf(id)?.handlers;
    if (handlers?.rawOutput) {
      handlers.rawOutput(stream, output);
      return;
    }
    const text = output.text();
    if (handlers?.output) handlers.output(stream, text);
    else this.channel.unclaimed(stream, text);
  }

  private onLine(line: string): void {
    let event: RuntimeEvent;
    try {
      event = JSON.parse(line);
    } catch {
      // Not a frame (a remote shell's banner, a crash message): keep it for diagnostics.
      this.channel.noise(line.slice(0, 500));
      return;
    }
    try {
      this.dispatch(event);
    } catch (err) {
      this.keepHandlerFailure(String((event as { event?: unknown } | null)?.event), err);
    }
  }

  private dispatch(event: RuntimeEvent): void {
    switch (event.event) {
      case "stdout":
      case "stderr":
        this.deliverOutput(event.event, event.id, RawText.fromText(event.text));
        return;
      case "result":
        this.pending.get(event.id)?.handlers?.result?.(event.text);
        return;
      case "display":
        this.ownerOf(event.id)?.handlers?.display?.(event.data, event);
        return;
      case "error": {
        if (event.id === null) {
          // A ProtocolError for a line we sent: nothing to attach it to but diagnostics.
          this.channel.noise(`${event.ename}: ${event.evalue}`);
          return;
        }
        this.pending.get(event.id)?.handlers?.error?.(event);
        return;
      }
      case "done": {
        const p = this.pending.get(event.id);
        if (!p) return;
        this.pending.delete(event.id);
        if (this.active === p) this.active = this.nextActiveExecute();
        p.resolve(event);
        return;
      }
      case "ready":
        this.channel.ready(event);
        return;
      case "data":
        this.pending.get(event.id)?.handlers?.data?.(Buffer.from(event.data, "base64"), event.seq);
        return;
      case "host_request": {
        // The running cell's handler answers (the awaiting cell is the active execute); without one,
        // the answer is at once, so the cell does not hang.
        const reply = (data: Record<string, unknown>) => void this.channel.write(JSON.stringify({ type: "host_reply", id: event.id, data }));
        const handlers = this.active?.handlers;
        if (handlers?.hostRequest) handlers.hostRequest(event.data, reply);
        else reply(NO_HOST_BRIDGE);
        return;
      }
    }
  }

  private nextActiveExecute(): Pending | null {
    for (const p of this.pending.values()) if (p.type === "execute") return p;
    return null;
  }
}
