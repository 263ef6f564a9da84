// One connection from a client to the supervisor: hello, then requests multiplexed by id over one
// pending map; when the connection goes, every pending request fails with one error saying why.
// Finding or starting the supervisor lives in start.ts; the session-shaped API in attach.ts.
import { deadline, DeadlineError } from "../core/deadline.ts";
import { AwreplError, isErrorCode } from "../core/errors.ts";
import type { ClientKind, ClientRequest, HelloReply, OkValue, RequestId, SupervisorReply, WatchReply } from "../protocol/supervisor.ts";
import type { DisplayItem } from "../protocol/result.ts";
import type { ExecResult } from "../protocol/result.ts";
import { AWREPL_VERSION, buildId, SUPERVISOR_PROTOCOL } from "../core/version.ts";
import { type HomeLayout } from "../settings/home.ts";
import { RawText, readReplyFrame } from "../wire/output_frames.ts";
import { connectLines, type LineConnection } from "../wire/socket.ts";

/** How long a client waits for the supervisor's hello. */
const HELLO_TIMEOUT_MS = 15_000;

/** Who this process is to the supervisor (hello's `client`): what a session's history says ran each cell. */
let clientKind: ClientKind | undefined;

/** Set once by the program (the CLI, `serve`, the MCP server); a library leaves it unset and is "library". */
export function setClientKind(kind: ClientKind): void {
  clientKind = kind;
}

/**
 * `greeting`: hello written and not answered yet (requests may already be written behind it);
 * `ready`: the supervisor is of our version; `mismatch`: of another version, which runs nothing of
 * ours, so only `stop` is sent and every other request fails with version_mismatch; `closed`.
 */
export type ConnectionState = "greeting" | "ready" | "mismatch" | "closed";

/** What a streamed execute hears before its result. */
export type StreamHandlers = {
  /** Live output, undecoded (lib/wire/output_frames.ts) when it could be read so. */
  output?(stream: "stdout" | "stderr", raw: RawText): void;
  display?(item: DisplayItem): void;
  /** A host request of the cell (the execute set host_bridge): answer it with a host_reply request. */
  hostRequest?(hostId: string, data: Record<string, unknown>): void;
  /** A watch's own replies (`watching`, `cell`, `cell_end`, `dropped`). */
  watch?(reply: WatchReply): void;
};

type Pending = { resolve(value: unknown): void; reject(error: Error): void; stream?: StreamHandlers };

/** Requests as the caller writes them: the connection adds the id. */
type Outgoing<R extends ClientRequest = ClientRequest> = R extends unknown ? Omit<R, "id"> : never;

export class SupervisorConnection {
  private phase: ConnectionState = "greeting";
  /** The state the connection was in when it closed. */
  private closedWhile: ConnectionState | null = null;
  private closedError: AwreplError | null = null;
  private nextId = 1;
  private readonly pending = new Map<RequestId, Pending>();
  private line: LineConnection | null = null;
  private helloWaiter: { resolve(h: HelloReply): void; reject(e: Error): void } | null = null;
  /** What every request but stop fails with once the hello said the versions differ. */
  private mismatch: AwreplError | null = null;
  private helloMissed = false;
  /**
   * An error the supervisor sent without an id (it could not read the request it answers), kept as the
   * reason if the connection then closes: a request too large is said this way just before the close.
   */
  private lastWords: AwreplError | null = null;
  /** The supervisor's hello; rejects if the connection closes first. */
  readonly hello: Promise<HelloReply>;
  /** Hears an `ok` reply's `notice` (the caller asked a live session for something it keeps). */
  onNotice: ((text: string) => void) | undefined;

  private constructor(readonly layout: HomeLayout) {
    this.hello = new Promise((resolve, reject) => {
      this.helloWaiter = { resolve, reject };
    });
    this.hello.catch(() => {});
  }

  /**
   * Connects and sends hello. Resolves null when nobody listens (no socket, or a stale one);
   * other failures (permissions, ...) are errors. `build: false` leaves the build out of hello (it
   * is informational: builds of one version are compatible) and spares the CLI's hot path the stat
   * of the executable (~0.1 ms of a warm `run`).
   */
  static async connect(layout: HomeLayout, options: { build?: boolean } = {}): Promise<SupervisorConnection | null> {
    const conn = new SupervisorConnection(layout);
    try {
      conn.line = await connectLines(layout.socket, {
        onLine: (text) => conn.onLine(text),
        onLineBytes: (bytes) => conn.onLineBytes(bytes),
        onClose: (error) => conn.onClose(error),
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ECONNREFUSED" || code === "ECONNRESET") return null;
      throw new AwreplError("supervisor_unreachable", `Cannot connect to the supervisor at ${layout.socket}: ${(err as Error).message}`);
    }
    // `op` too: a supervisor of protocol 1 reads that (the compatibility rule of docs/supervisor-protocol.md).
    conn.line.write(JSON.stringify({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION, build: options.build === false ? undefined : buildId(), client: clientKind }));
    // A supervisor that accepts but never answers (stopped, wedged) must not hang every client. (A
    // hello that fails otherwise, the connection closing, is said by #fail already.)
    deadline(conn.hello, HELLO_TIMEOUT_MS, "the supervisor's hello", { unref: true }).catch((err) => {
      if (!(err instanceof DeadlineError) || conn.phase !== "greeting") return;
      conn.helloMissed = true;
      conn.fail(new AwreplError("supervisor_unreachable", `The supervisor did not answer within ${HELLO_TIMEOUT_MS / 1000} s; see its log: ${layout.log}`));
    });
    return conn;
  }

  get state(): ConnectionState {
    return this.phase;
  }

  get closed(): boolean {
    return this.phase === "closed";
  }

  /** The supervisor accepted the connection but did not answer hello in time (stopped, wedged). */
  get wedged(): boolean {
    return this.helloMissed;
  }

  /**
   * True when a request that failed with `error` on this connection cannot have run: the supervisor
   * is of another version, or it closed the connection before answering hello (it was exiting). Not
   * a hello that timed out: a wedged supervisor would not answer a second time either.
   */
  neverRan(error: unknown): boolean {
    const code = error instanceof AwreplError ? error.code : undefined;
    if (code === "version_mismatch") return true;
    return code === "supervisor_unreachable" && this.closedWhile === "greeting" && !this.helloMissed;
  }

  /** Sends a request whose answer is an `ok` reply; `id` is the request's (for a `cancel` of it). */
  call<K extends keyof OkValue>(request: Outgoing & { type: K }): Promise<OkValue[K]> & { id: RequestId } {
    const id = this.nextId;
    return Object.assign(this.send(request) as Promise<OkValue[K]>, { id });
  }

  /** Sends an execute request; its live output and display items go to `stream` until the result arrives. */
  execute(request: Outgoing & { type: "execute" }, stream?: StreamHandlers): Promise<ExecResult> & { id: RequestId } {
    const id = this.nextId;
    const promise = this.send(request, stream) as Promise<ExecResult>;
    return Object.assign(promise, { id });
  }

  /**
   * Follows a session (`watch`): its replies go to `stream` until the watch ends, by a `cancel` of its
   * id (it resolves then) or the connection closing (it rejects then).
   */
  watch(session: string, stream: StreamHandlers): Promise<OkValue["watch"]> & { id: RequestId } {
    const id = this.nextId;
    return Object.assign(this.send({ type: "watch", session }, stream) as Promise<OkValue["watch"]>, { id });
  }

  /** Fire-and-forget: no reply is awaited (cancel on abort, stop). */
  notify(request: Outgoing): void {
    this.send(request).catch(() => {});
  }

  /**
   * Closes the connection. With `reason` (the client gave it up: RemoteSession.close()), every
   * pending and later request fails with it at once, rather than with the "supervisor closed the
   * connection" the socket's own close would say later (on Bun, after a tick; not at all before a
   * write on Node and Deno, which fails with "write after end" instead).
   */
  close(reason?: AwreplError): void {
    if (reason) this.fail(reason);
    else this.line?.close();
  }

  private send(request: Outgoing, stream?: StreamHandlers): Promise<unknown> {
    if (this.closedError) return Promise.reject(this.closedError);
    if (this.mismatch && request.type !== "stop") return Promise.reject(this.mismatch);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, stream });
      this.line?.write(JSON.stringify({ ...request, id }));
    });
  }

  /** A live-output line, read without decoding its text (a cell printing 100 MB sends 11,000). */
  private onLineBytes(bytes: Uint8Array): boolean {
    const frame = readReplyFrame(bytes);
    if (!frame) return false;
    const pending = this.pending.get(frame.id);
    if (!pending) return true; // a reply for a request we gave up on
    pending.stream?.output?.(frame.stream, frame.raw);
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
    // A supervisor of protocol 1 spells the hello reply's event `type`.
    if (reply.event === "hello" || (reply as { type?: unknown }).type === "hello") {
      this.onHello(reply as HelloReply);
      return;
    }
    if (reply.event === "error" && reply.id === null) {
      this.lastWords = new AwreplError(isErrorCode(reply.code) ? reply.code : "internal", reply.message);
      return;
    }
    const pending = reply.id === null ? undefined : this.pending.get(reply.id);
    if (!pending) return; // a reply for a request we gave up on
    switch (reply.event) {
      case "stdout":
      case "stderr":
        // One the frame reader declined (a \u escape, say): it arrives decoded.
        pending.stream?.output?.(reply.event, RawText.fromText(reply.text));
        return;
      case "display":
        pending.stream?.display?.(reply.item);
        return;
      case "host_request":
        pending.stream?.hostRequest?.(reply.host_id, reply.data);
        return;
      case "watching":
      case "cell":
      case "cell_end":
      case "dropped":
        pending.stream?.watch?.(reply);
        return;
      case "result":
        this.pending.delete(reply.id);
        pending.resolve(reply.result);
        return;
      case "ok":
        this.pending.delete(reply.id as RequestId);
        if (reply.notice) this.onNotice?.(reply.notice);
        pending.resolve(reply.value);
        return;
      case "error":
        this.pending.delete(reply.id as RequestId);
        pending.reject(new AwreplError(isErrorCode(reply.code) ? reply.code : "internal", reply.message));
        return;
    }
  }

  private onHello(hello: HelloReply): void {
    if (this.phase !== "greeting") return;
    if (hello.ok) this.phase = "ready";
    else {
      // Whatever another version answers to the requests already written, none of them ran: fail
      // them here, in words this version knows.
      this.phase = "mismatch";
      this.mismatch = new AwreplError(
        "version_mismatch",
        `The supervisor is awrepl ${hello.version} (protocol ${hello.protocol}); this is awrepl ${AWREPL_VERSION} (protocol ${SUPERVISOR_PROTOCOL})`,
      );
      this.rejectPending(this.mismatch);
    }
    this.helloWaiter?.resolve(hello);
    this.helloWaiter = null;
  }

  private onClose(error?: Error): void {
    if (this.lastWords) {
      this.fail(this.lastWords);
      return;
    }
    const why = error ? `: ${error.message}` : "";
    this.fail(new AwreplError("supervisor_unreachable", `The supervisor closed the connection${why} (its log: ${this.layout.log})`));
  }

  /** Ends the connection: the hello (if unanswered) and every pending request fail with `error`. */
  private fail(error: AwreplError): void {
    if (this.closedError) return;
    this.closedError = error;
    this.closedWhile = this.phase;
    this.phase = "closed";
    this.helloWaiter?.reject(error);
    this.helloWaiter = null;
    this.rejectPending(error);
    this.line?.close();
  }

  private rejectPending(error: Error): void {
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
  }
}
