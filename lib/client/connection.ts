// One connection from a client to the supervisor: hello, then requests multiplexed by id. Finding
// or starting the supervisor lives in lib/client_start.ts; the session-shaped API in lib/client.ts.
import { AwreplError, isErrorCode } from "../core/errors.ts";
import type { ClientRequest, HelloReply, OkValue, RequestId, StreamReply, SupervisorReply } from "../protocol/supervisor.ts";
import type { ExecResult } from "../protocol/result.ts";
import { AWREPL_VERSION, buildId, SUPERVISOR_PROTOCOL } from "../core/version.ts";
import { type HomeLayout } from "../settings/home.ts";
import { type RawText, readReplyFrame } from "../wire/raw_text.ts";
import { connectLines, type LineConnection } from "../wire/socket.ts";

/** How long a client waits for the supervisor's hello. */
const HELLO_TIMEOUT_MS = 15_000;

type Pending = {
  resolve(value: unknown): void;
  reject(error: Error): void;
  onStream?: (reply: StreamReply) => void;
  /** Live output undecoded (lib/raw_text.ts); without it, onStream gets the decoded text. */
  onRawOutput?: (stream: "stdout" | "stderr", raw: RawText) => void;
};

/** Requests as the caller writes them: the connection adds the id. */
type Outgoing<R extends ClientRequest = ClientRequest> = R extends unknown ? Omit<R, "id"> : never;

export class SupervisorConnection {
  private nextId = 1;
  private readonly pending = new Map<RequestId, Pending>();
  private line: LineConnection | null = null;
  private closedError: Error | null = null;
  private helloWaiter: { resolve(h: HelloReply): void; reject(e: Error): void } | null = null;
  /** True when the supervisor accepted the connection but did not answer hello in time. */
  unanswered = false;
  /** True once the supervisor answered hello (before that, a closed connection ran nothing). */
  helloReceived = false;
  /** The supervisor's hello; rejects if the connection closes first. */
  readonly hello: Promise<HelloReply>;

  private constructor(readonly paths: HomeLayout) {
    this.hello = new Promise((resolve, reject) => {
      this.helloWaiter = { resolve, reject };
    });
    this.hello.catch(() => {});
  }

  /**
   * Connects and sends hello. Resolves null when nobody listens (no socket, or a stale one);
   * other failures (permissions, ...) are errors.
   */
  static async connect(paths: HomeLayout): Promise<SupervisorConnection | null> {
    const conn = new SupervisorConnection(paths);
    try {
      conn.line = await connectLines(paths.socket, {
        onLine: (text) => conn.onLine(text),
        onLineBytes: (bytes) => conn.onLineBytes(bytes),
        onClose: (error) => conn.onClose(error),
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ECONNREFUSED" || code === "ECONNRESET") return null;
      throw new AwreplError("supervisor_unreachable", `Cannot connect to the supervisor at ${paths.socket}: ${(err as Error).message}`);
    }
    conn.line.write(JSON.stringify({ op: "hello", protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION, build: buildId() }));
    // A supervisor that accepts but never answers (stopped, wedged) must not hang every client.
    const timer = setTimeout(() => {
      if (!conn.helloReceived) {
        conn.unanswered = true;
        conn.fail(new AwreplError("supervisor_unreachable", `The supervisor did not answer within ${HELLO_TIMEOUT_MS / 1000} s; see its log: ${paths.log}`));
      }
    }, HELLO_TIMEOUT_MS);
    timer.unref?.();
    void conn.hello.then(
      () => clearTimeout(timer),
      () => clearTimeout(timer),
    );
    return conn;
  }

  get closed(): boolean {
    return this.closedError !== null;
  }

  /** Sends a request whose answer is an `ok` reply. */
  call<K extends keyof OkValue>(request: Outgoing & { op: K }): Promise<OkValue[K]> {
    return this.send(request) as Promise<OkValue[K]>;
  }

  /** Sends an execute request; stream replies go to `onStream` until the result arrives. */
  execute(
    request: Outgoing & { op: "execute" },
    onStream?: (reply: StreamReply) => void,
    onRawOutput?: Pending["onRawOutput"],
  ): Promise<ExecResult> & { id: RequestId } {
    const id = this.nextId;
    const promise = this.send(request, onStream, onRawOutput) as Promise<ExecResult>;
    return Object.assign(promise, { id });
  }

  /** Fire-and-forget: no reply is awaited (used for cancel on abort). */
  notify(request: Outgoing): void {
    this.send(request).catch(() => {});
  }

  private send(request: Outgoing, onStream?: (reply: StreamReply) => void, onRawOutput?: Pending["onRawOutput"]): Promise<unknown> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onStream, onRawOutput });
      this.line?.write(JSON.stringify({ ...request, id }));
    });
  }

  close(): void {
    this.line?.close();
  }

  /** A live-output line, read without decoding its text (a cell printing 100 MB sends 11,000). */
  private onLineBytes(bytes: Uint8Array): boolean {
    const frame = readReplyFrame(bytes);
    if (!frame) return false;
    const pending = this.pending.get(frame.id);
    if (!pending) return true; // a reply for a request we gave up on
    if (pending.onRawOutput) pending.onRawOutput(frame.stream, frame.raw);
    else pending.onStream?.({ type: frame.stream, id: frame.id, text: frame.raw.text() });
    return true;
  }

  private onLine(text: string): void {
    let reply: SupervisorReply;
    try {
      reply = JSON.parse(text) as SupervisorReply;
    } catch {
      this.fail(new AwreplError("protocol", `The supervisor sent a line that is not JSON: ${text.slice(0, 80)}`));
      return;
    }
    if (reply.type === "hello") {
      this.helloReceived = true;
      this.helloWaiter?.resolve(reply);
      this.helloWaiter = null;
      return;
    }
    const pending = reply.id === null ? undefined : this.pending.get(reply.id);
    if (!pending) return; // a reply for a request we gave up on
    switch (reply.type) {
      case "stdout":
      case "stderr":
      case "display":
        pending.onStream?.(reply);
        return;
      case "result":
        this.pending.delete(reply.id);
        pending.resolve(reply.result);
        return;
      case "ok":
        this.pending.delete(reply.id as RequestId);
        pending.resolve(reply.value);
        return;
      case "error":
        this.pending.delete(reply.id as RequestId);
        pending.reject(new AwreplError(isErrorCode(reply.code) ? reply.code : "internal", reply.message));
        return;
    }
  }

  private onClose(error?: Error): void {
    const why = error ? `: ${error.message}` : "";
    this.fail(
      new AwreplError(
        "supervisor_unreachable",
        `The supervisor closed the connection${why} (its log: ${this.paths.log})`,
      ),
    );
  }

  fail(error: Error): void {
    if (this.closedError) return;
    this.closedError = error;
    this.helloWaiter?.reject(error);
    this.helloWaiter = null;
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
    this.line?.close();
  }
}
