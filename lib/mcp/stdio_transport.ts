// The server's stdio transport (the SDK's Transport interface, handed to its serveStdio), in place of
// the SDK's StdioServerTransport, whose reader does not fit a REPL's traffic: it closes itself on a line
// over 10 MiB (a big cell) and pauses stdin, after which EOF never arrives; it drops a line that is not
// JSON without a word and leaves an invalid request unanswered; and it joins its whole buffer again on
// every chunk, quadratic in a big frame. Here lines are read by FrameReader, bounded (MAX_FRAME_BYTES;
// longer ones are discarded as they stream and answered with an error), judged by readLine (JSON-RPC's
// errors answered here, as the SDK's HTTP transports answer theirs), and only valid messages reach
// the SDK. The transport closes on stdin EOF, error or close and on a broken stdout, and `closed` says
// why, whoever holds `onclose` (serveStdio does).
import { once } from "node:events";
import type { Readable, Writable } from "node:stream";
import { type JSONRPCMessage, ProtocolErrorCode, serializeMessage, type Transport } from "@modelcontextprotocol/server";
import { type Frame, FrameReader } from "./frames.ts";
import { readLine, type Rejection } from "./inbound.ts";

/**
 * The longest message read: the supervisor's own request limit (MAX_REQUEST_BYTES in
 * lib/supervisor/supervisor.ts), so that any cell the supervisor takes fits in a `run` call (the code
 * is JSON-escaped alike in both).
 */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

export class StdioLineTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport["onmessage"];
  /** Resolves, with the reason, once the transport closed (on its own or by close()). */
  readonly closed: Promise<string>;
  private settleClosed!: (why: string) => void;
  private isClosed = false;
  private readonly reader: FrameReader;

  constructor(
    private readonly stdin: Readable,
    private readonly stdout: Writable,
    maxFrameBytes = MAX_FRAME_BYTES,
  ) {
    this.reader = new FrameReader(maxFrameBytes);
    this.closed = new Promise((resolve) => (this.settleClosed = resolve));
  }

  async start(): Promise<void> {
    this.stdin.on("data", this.onData);
    this.stdin.on("end", this.onEnd);
    this.stdin.on("close", this.onStdinClose);
    this.stdin.on("error", this.onStdinError);
    this.stdout.on("error", this.onStdoutError);
    if (this.stdin.readableEnded || this.stdin.destroyed) setImmediate(() => this.shut("stdin was closed before the server started"));
  }

  async send(message: JSONRPCMessage): Promise<void> {
    await this.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    this.shut("the server closed its transport");
  }

  private readonly onData = (chunk: Buffer | string) => {
    this.reader.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk, this.onFrame);
  };

  private readonly onFrame = (frame: Frame) => {
    if (this.isClosed) return;
    if (frame.kind === "oversized") return this.oversized(frame);
    const inbound = readLine(frame.bytes);
    if (inbound.kind === "message") this.onmessage?.(inbound.message);
    else if (inbound.kind === "reject") this.reject(inbound.rejection);
    else if (inbound.kind === "ignore") this.onerror?.(new Error(inbound.why));
  };

  private oversized(frame: Frame & { kind: "oversized" }): void {
    const limit = `${this.reader.maxBytes} bytes (${Math.round(this.reader.maxBytes / 1024 / 1024)} MiB)`;
    const what = `a message of ${frame.bytes} bytes is over the limit of ${limit} and was discarded unread`;
    // A response is not answered (a peer that answers responses can loop); say so on the log only.
    if (frame.response) return this.onerror?.(new Error(`Discarded a JSON-RPC response: ${what}`));
    this.reject({ id: frame.id, code: ProtocolErrorCode.InvalidRequest, message: `Invalid Request: ${what}; pass large data to a cell through a file` });
  }

  /** Answers a line the SDK never sees, and logs it. */
  private reject(r: Rejection): void {
    this.onerror?.(new Error(`${r.message} (answered with error ${r.code}, id ${JSON.stringify(r.id)})`));
    this.write(`${JSON.stringify({ jsonrpc: "2.0", id: r.id, error: { code: r.code, message: r.message } })}\n`).catch((e: Error) => this.onerror?.(e));
  }

  private async write(line: string): Promise<void> {
    if (this.isClosed) throw new Error("the MCP stdio transport is closed");
    // Backpressure as the SDK's transport does it: a full pipe resolves on drain (or rejects on error).
    // The race: a stdout that closes without an error never drains.
    if (!this.stdout.write(line)) await Promise.race([once(this.stdout, "drain"), this.closed]);
  }

  private readonly onEnd = () => {
    const cut = this.reader.pending();
    if (cut > 0) this.onerror?.(new Error(`stdin ended in the middle of a message (${cut} bytes without a newline); it was not read`));
    this.shut("stdin EOF");
  };
  private readonly onStdinClose = () => this.shut("stdin closed");
  private readonly onStdinError = (e: Error) => this.shut(`stdin: ${e.message}`);
  private readonly onStdoutError = (e: Error) => this.shut(`stdout: ${e.message}`);

  private shut(why: string): void {
    if (this.isClosed) return;
    this.isClosed = true;
    // Nothing more reaches the SDK. The other listeners stay: an error on either stream after the close
    // must not be an uncaught one (and shut() is idempotent).
    this.stdin.off("data", this.onData);
    this.settleClosed(why);
    this.onclose?.();
  }
}
