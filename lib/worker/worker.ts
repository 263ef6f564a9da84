// One Python process speaking the runtime protocol: spawn (in its own process group), handshake on
// `ready`, one id -> pending request map, event routing, interrupt, kill. When the process exits,
// every pending request is rejected with one clear error naming the exit code or signal (a request
// the process was already gone for says so: UndeliveredRequestError), and later sends fail at once.
//
// Workers anywhere (docs/protocol.md, "Exit, heartbeat and cleanup"): a worker behind a transport
// (ssh, docker/podman/kubectl exec, any wrapper command) is ended in band first (`shutdown` with
// `now`, then its stdin closed) and its local transport killed only after a grace, since killing ssh
// is not killing the far python; one behind a named transport also gets a heartbeat, so a far side
// whose host went silent ends itself, and a silent idle worker is declared lost here. The EOF of the
// protocol channel is the worker's death (a cell that closed the runtime's fds), reported at once.
// Payloads stream both ways (payload.ts), and info() asks the worker for its own facts.
import { type ChildProcess, spawn } from "node:child_process";
import { AwreplError } from "../core/errors.ts";
import { NO_HOST_BRIDGE } from "../core/host_bridge.ts";
import { killGroup, processAlive } from "../core/process.ts";
import { LineSplitter } from "../wire/lines.ts";
import { PipeWriter } from "../wire/pipe_writer.ts";
import type { DisplayEvent, DoneEvent, ErrorEvent, IdRequest, ReadyEvent, RuntimeEvent, WorkerFacts } from "../protocol/runtime.ts";
import { RawText, readOutputFrame } from "../wire/output_frames.ts";
import { PIECE_BYTES, readDataFrame } from "../wire/data_frames.ts";
import { describeStartFailure, describeStartTimeout, kindOf, transportFailure, transportName, type WorkerKind } from "./transport_failure.ts";

export type WorkerState = "starting" | "ready" | "closed" | "dead";

/** Handlers for the events of one request; output with id null goes to the active execute's handlers. */
export type RequestHandlers = {
  output?(stream: "stdout" | "stderr", text: string): void;
  /** Output not yet decoded (lib/wire/output_frames.ts); when absent, `output` gets the decoded text. */
  rawOutput?(stream: "stdout" | "stderr", raw: RawText): void;
  display?(data: Record<string, unknown>, event: DisplayEvent): void;
  result?(text: string): void;
  error?(event: ErrorEvent): void;
  /** A piece of the payload the request streams to the host (snapshot `to: "host"`), decoded, in order from 0. */
  data?(piece: Uint8Array, seq: number): void;
  /** A host request of the cell (`awrepl.host_request`); `reply` sends its answer. Without it: NO_HOST_BRIDGE. */
  hostRequest?(data: Record<string, unknown>, reply: (data: Record<string, unknown>) => void): void;
};

/**
 * How the process ended. `reason`, when awrepl knows better than the exit status, says what happened
 * as the rest of "The Python worker ..." (a lost connection, a closed protocol channel).
 */
export type WorkerExit = { code: number | null; signal: string | null; reason?: string };

/**
 * The rejection of a request the process never read: it was gone before the request was written (its
 * exit already seen, or its stdin closed). A caller may send it again to a fresh worker: it cannot have
 * run. (A request written just before the process died may or may not have been read: that one is an
 * ordinary "worker_died".)
 */
export class UndeliveredRequestError extends AwreplError {
  constructor(message: string) {
    super("worker_died", message);
  }
}

export type WorkerListeners = {
  /** Output that belongs to no pending request (a background thread writing between cells). */
  onUnclaimedOutput?(stream: "stdout" | "stderr", text: string): void;
  /** Called once when the process has exited and every pending request has been rejected. */
  onExit?(exit: WorkerExit, worker: Worker): void;
};

export type WorkerOptions = WorkerListeners & {
  /** The command to run: [interpreter, ...args]. */
  argv: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Bytes written to stdin before any request (the bootstrap's length line and the runtime source). */
  stdinPreamble?: Uint8Array;
  /** The Python command as the user gave it, for messages (default: argv joined, bootstrap and all). */
  label?: string;
  /** How long to wait for `ready`. Default 15 s (ssh and containers can be slow). */
  startTimeoutMs?: number;
  /** What the process is to the runtime (see WorkerKind); default: told from argv[0]. */
  kind?: WorkerKind;
  /**
   * The heartbeat of a worker behind ssh/docker/podman/kubectl (others never need one: the pipe's
   * hang-up reaches the runtime's watchdog). false: none.
   */
  heartbeat?: HeartbeatOptions | false;
};

export type HeartbeatOptions = {
  /** How often the host pings. Default 1 s. */
  intervalMs: number;
  /** Silence that ends the far side (its watchdog) and, when idle, makes the host declare it lost. Default 5 s. */
  timeoutMs: number;
};

export const DEFAULT_HEARTBEAT: HeartbeatOptions = { intervalMs: 1_000, timeoutMs: 5_000 };
/** Requests the runtime's reader thread answers itself (not queued): they do not make a worker busy. */
const ANSWERED_AT_ONCE = new Set<string>(["ping", "heartbeat", "info"]);
/** After the channel's EOF, how long the process may take to exit by itself before it counts as cut off. */
const CHANNEL_END_LOCAL_MS = 50;
const CHANNEL_END_TRANSPORT_MS = 1_000;
/** A transport worker's in-band exit gets this long to end the far side before the transport is killed. */
const TRANSPORT_GRACE_MS = 1_000;

type Pending = {
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

type RequestBody = IdRequest extends infer R ? (R extends IdRequest ? Omit<R, "id"> : never) : never;

const STDERR_KEEP = 8192;
const UTF8 = new TextDecoder();
/** A frame longer than this is not the protocol; the worker is stopped rather than buffering forever. */
const MAX_LINE_BYTES = 1 << 30;

export function describeExit(exit: WorkerExit): string {
  if (exit.reason) return exit.reason;
  if (exit.signal) return `was killed by signal ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

export class Worker {
  state: WorkerState = "starting";
  readonly pid: number;
  readonly argv: string[];
  /** What messages call the Python command: the user's command line, not the runtime's bootstrap. */
  readonly label: string;
  readonly kind: WorkerKind;
  ready: ReadyEvent | null = null;
  /** The latest facts info() got from the worker, and when (Date.now()). */
  facts: WorkerFacts | null = null;
  factsAt = 0;
  exit: WorkerExit | null = null;
  /** Resolves when the process has exited and all of its pending requests were rejected. */
  readonly exited: Promise<WorkerExit>;

  private readonly child: ChildProcess;
  private readonly stdin: PipeWriter;
  private readonly pending = new Map<string, Pending>();
  /** The execute request currently running (requests run in order; output with id null is its). */
  private active: Pending | null = null;
  private nextId = 0;
  /** The protocol pipe's lines; the chunks are ours to keep (see LineSplitter). */
  private readonly lines = new LineSplitter(MAX_LINE_BYTES, false, false);
  private stderrTail = "";
  private noise = "";
  private killedByUs = false;
  /** Why awrepl ended the worker other than by kill() (a lost connection, a closed channel): said in its exit. */
  private lostReason: string | null = null;
  /** A transport's kill, scheduled after an in-band exit. */
  private transportKill: ReturnType<typeof setTimeout> | null = null;
  private stdinEnded = false;
  private heartbeatTimer: ReturnType<typeof setInterval> | null = null;
  private heartbeatTimeoutMs = 0;
  /** Silence longer than this (two pings and a half unanswered) makes a request sent now suspect. */
  private heartbeatSilenceMs = 0;
  /** When the worker last sent anything (the heartbeat's evidence that it is alive). */
  private lastHeardAt = Date.now();
  private resolveExited!: (exit: WorkerExit) => void;
  private readyWaiter: { resolve(): void; reject(err: Error): void } | null = null;
  private listeners: WorkerListeners;

  private constructor(options: WorkerOptions) {
    this.listeners = { onUnclaimedOutput: options.onUnclaimedOutput, onExit: options.onExit };
    this.argv = options.argv;
    this.label = options.label ?? options.argv.join(" ");
    this.kind = options.kind ?? kindOf(options.argv);
    this.exited = new Promise((r) => {
      this.resolveExited = r;
    });
    const [cmd, ...args] = options.argv;
    if (!cmd) throw new AwreplError("no_interpreter", "The Python command is empty");
    this.child = spawn(cmd, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ["pipe", "pipe", "pipe"],
      // Its own process group, so a timeout can kill the worker and everything it started at once.
      detached: process.platform !== "win32",
      windowsHide: true,
    });
    this.pid = this.child.pid ?? -1;
    this.stdin = new PipeWriter(this.child.stdin);
    this.child.on("error", (err) => this.onSpawnError(err));
    this.child.stdin?.on("error", () => {
      // EPIPE after the process died: the exit handler reports it.
    });
    this.child.stdout?.on("data", (chunk: Buffer) => this.onData(chunk));
    // The protocol channel's EOF while the process lives: a cell closed the runtime's fds (or the
    // transport dropped the stream). Nothing more can be read from it: that is the worker's death.
    this.child.stdout?.on("end", () => this.onChannelEnd());
    this.child.stderr?.setEncoding("utf8");
    this.child.stderr?.on("data", (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-STDERR_KEEP);
    });
    this.child.on("exit", (code, signal) => {
      if (this.transportKill !== null) {
        // The transport exited within its grace: its scheduled kill is not needed any more.
        clearTimeout(this.transportKill);
        this.transportKill = null;
        if (this.exit) killGroup(this.pid);
      }
      this.onProcessExit({ code, signal });
    });
  }

  /** Spawns the process and waits for its `ready` event. */
  static async start(options: WorkerOptions): Promise<Worker> {
    const worker = new Worker(options);
    const timeoutMs = options.startTimeoutMs ?? 15_000;
    const ready = new Promise<void>((resolve, reject) => {
      worker.readyWaiter = { resolve, reject };
    });
    if (options.stdinPreamble) worker.stdin.write(options.stdinPreamble);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new AwreplError("no_interpreter", describeStartTimeout(worker.argv, worker.label, timeoutMs, worker.output())));
      }, timeoutMs);
    });
    try {
      await Promise.race([ready, timeout]);
    } catch (err) {
      worker.kill();
      await worker.exited;
      throw err;
    } finally {
      clearTimeout(timer);
    }
    const heartbeat = options.heartbeat ?? (worker.kind === "transport" && transportName(worker.argv) !== null ? DEFAULT_HEARTBEAT : false);
    if (heartbeat && worker.ready?.capabilities.includes("heartbeat")) worker.startHeartbeat(heartbeat);
    return worker;
  }

  /**
   * Sends one request and resolves with its `done`; rejects when the worker dies or is closed first.
   * `payload`: the bytes of a restore `from: "host"` (payload.ts), sent after the request as `data`
   * requests, each piece once the pipe has taken the one before (memory: one piece).
   */
  request(body: RequestBody, handlers?: RequestHandlers, payload?: AsyncIterable<Uint8Array>): Promise<DoneEvent> {
    if (this.state !== "ready") return Promise.reject(this.unavailable(body.type));
    const id = String(++this.nextId);
    return new Promise<DoneEvent>((resolve, reject) => {
      const sentIntoSilence = this.heartbeatTimer !== null && Date.now() - this.lastHeardAt > this.heartbeatSilenceMs;
      const pending: Pending = { id, type: body.type, handlers, resolve, reject, undelivered: false, sentIntoSilence };
      this.pending.set(id, pending);
      if (body.type === "execute" && this.active === null) this.active = pending;
      // Its exit seen (the rest of its output still on the way) or its stdin closed: the process is gone.
      pending.undelivered = !this.write(JSON.stringify({ ...body, id })) || this.exit !== null;
      if (payload && !pending.undelivered) void this.sendPayload(id, payload);
    });
  }

  /** The pieces of request `id`'s payload as `data` requests; stops when the request ends (done, interrupt, death). */
  private async sendPayload(id: string, payload: AsyncIterable<Uint8Array>): Promise<void> {
    try {
      for await (const piece of payload) {
        for (let off = 0; off < piece.length; off += PIECE_BYTES) {
          if (!this.pending.has(id) || this.state !== "ready") return;
          const part = piece.subarray(off, off + PIECE_BYTES);
          const b64 = Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString("base64");
          await this.stdin.writeAndWait(`{"type":"data","id":"${id}","data":"${b64}"}\n`);
        }
      }
    } catch (err) {
      // The file could not be read to the end: the runtime waits for bytes that will not come.
      if (!this.pending.has(id)) return;
      this.keepNoise(`[the payload of request ${id} could not be sent: ${(err as Error).message}]`);
      this.interrupt(id);
    }
  }

  /** Replaces the listeners (a spare worker started by one owner is adopted by another). */
  setListeners(listeners: WorkerListeners): void {
    this.listeners = listeners;
  }

  /** The id the latest request() was sent with (read right after the call to target an interrupt at it). */
  get lastId(): string {
    return String(this.nextId);
  }

  /** Asks the runtime to interrupt a request (the running one when no id is given). */
  interrupt(id?: string): void {
    if (this.state !== "ready") return;
    this.write(id === undefined ? '{"type":"interrupt"}' : JSON.stringify({ type: "interrupt", id }));
  }

  /**
   * Ends the worker now (a timeout, a close that took too long). Pending requests are rejected when
   * the exit is seen. A local or sandboxed worker's process group is killed at once (bwrap's death
   * ends its pid namespace); behind a transport the local process is not the worker, so the runtime is
   * told to exit now in band and its stdin closed (its watchdog ends a C loop 0.5 s later), and the
   * transport is killed if it has not exited by itself after a grace.
   */
  kill(): void {
    if (this.exit) return;
    this.killedByUs = true;
    this.stop();
  }

  /** The one way awrepl ends the process (see kill()). */
  private stop(): void {
    if (this.exit || this.transportKill !== null) return; // an in-band exit under way keeps its grace
    // Nothing to say in band (not a transport, a runtime without exit_now, or stdin closed already
    // and its grace spent, as after close()): the local process group goes now.
    if (this.kind !== "transport" || !this.ready?.capabilities.includes("exit_now") || this.stdinEnded) {
      killGroup(this.pid, this.child);
      return;
    }
    this.exitNow();
    this.transportKill = setTimeout(() => killGroup(this.pid, this.child), TRANSPORT_GRACE_MS);
  }

  /** In band: the runtime and its process group end at once; then its stdin is closed. */
  private exitNow(): void {
    try {
      if (!this.stdinEnded) this.stdin.write('{"type":"shutdown","now":true}\n');
    } catch {
      // Gone already.
    }
    this.endStdin();
  }

  private endStdin(): void {
    if (this.stdinEnded) return;
    this.stdinEnded = true;
    try {
      this.stdin.end();
    } catch {
      // Gone already.
    }
  }

  /**
   * True when the runtime answers a ping within `timeoutMs`: alive, and its transport too (a spare is
   * checked before it is handed out; a process that exists may have lost its connection).
   */
  async ping(timeoutMs: number): Promise<boolean> {
    if (this.state !== "ready") return false;
    if (!this.ready?.capabilities.includes("heartbeat")) return this.exit === null;
    const answered = this.request({ type: "ping" }).then(
      (done) => done.status === "ok",
      () => false,
    );
    return (await within(answered, timeoutMs)) ?? false;
  }

  /**
   * The worker's own facts (pid, host, cwd, RSS ... where it runs: see WorkerFacts), asked in band
   * (answered by the runtime's reader thread, also during a cell). When no answer comes within
   * `timeoutMs` (a C loop holds the GIL, a slow link) the last facts are returned (see factsAt), or
   * null when there are none.
   */
  async info(timeoutMs = 1_000): Promise<WorkerFacts | null> {
    if (this.state !== "ready" || !this.ready?.capabilities.includes("info")) return this.facts;
    const asked = this.request({ type: "info" }).then(
      (done) => done.facts ?? null,
      () => null,
    );
    const facts = await within(asked, timeoutMs);
    if (facts) {
      this.facts = facts;
      this.factsAt = Date.now();
    }
    return this.facts;
  }

  /**
   * Starts the heartbeat: the runtime's watchdog ends its process group after `timeoutMs` without a
   * ping (even in a C loop), and here a worker that has sent nothing for `timeoutMs` is declared lost
   * and its transport ended, unless it is at work on a request it got while it was answering (a cell
   * in a C loop cannot answer; that request's own timeout covers it). A request sent into a silence
   * that had already lasted two and a half pings does not count as work: the next call after an
   * unnoticed partition fails in seconds, named, instead of waiting for its timeout.
   */
  private startHeartbeat(options: HeartbeatOptions): void {
    if (this.heartbeatTimer || this.state !== "ready") return;
    this.heartbeatTimeoutMs = options.timeoutMs;
    this.heartbeatSilenceMs = 2.5 * options.intervalMs;
    this.request({ type: "heartbeat", timeout_ms: options.timeoutMs }).catch(() => undefined);
    this.lastHeardAt = Date.now();
    this.heartbeatTimer = setInterval(() => this.beat(), options.intervalMs);
    this.heartbeatTimer.unref?.();
  }

  private beat(): void {
    if (this.state !== "ready") return;
    const silentMs = Date.now() - this.lastHeardAt;
    if (!this.busyAtWork && silentMs > this.heartbeatTimeoutMs) {
      this.lose(`was lost: no answer to the heartbeat for ${Math.round(silentMs / 1000)} s (connection lost?)`);
      return;
    }
    // With an id, so the answer counts as hearing from it; unanswered ones are dropped with the worker.
    this.request({ type: "ping" }).catch(() => undefined);
  }

  /**
   * awrepl gave up on a worker that is not dead by itself (a lost connection, a closed protocol
   * channel): it is ended, and every pending request is rejected at once with `reason` in its exit,
   * without waiting for a transport that may take its time to exit.
   */
  private lose(reason: string): void {
    if (this.exit || this.lostReason) return;
    this.lostReason = reason;
    this.stop();
    if (this.kind === "transport") this.onProcessExit({ code: null, signal: null });
  }

  private onChannelEnd(): void {
    if (this.exit) return;
    // The process may be exiting by itself (a crash closes the channel too; ssh first hears the far
    // side's exit status): give its exit a moment to arrive, and blame the channel only on a process
    // that still runs after it.
    const timer = setTimeout(() => {
      if (!this.exit && processAlive(this.pid)) this.lose("closed its protocol channel (did a cell close the worker's file descriptors?) and was ended");
    }, this.kind === "transport" ? CHANNEL_END_TRANSPORT_MS : CHANNEL_END_LOCAL_MS);
    void this.exited.then(() => clearTimeout(timer));
  }

  /** True once kill() was called (a timeout or close), so a caller can tell that death from a crash. */
  get wasKilled(): boolean {
    return this.killedByUs;
  }

  /**
   * Asks the runtime to shut down, waits up to graceMs for the exit, then kills the process group.
   * Pending requests are rejected with "worker_closed".
   */
  async close(graceMs = 1000): Promise<void> {
    if (this.state === "closed" || this.state === "dead") {
      await this.exited;
      return;
    }
    // A running request would hold the shutdown back: interrupt it first. Behind a transport, a busy
    // worker exits now instead (its cell may hold the GIL in C, where no interrupt lands; the far
    // side must not outlive the close), and a transport that lingers is killed after the grace.
    const busy = this.busy;
    this.state = "closed";
    this.stopHeartbeat();
    this.failPending(new AwreplError("worker_closed", "The session was closed while this request was pending"));
    try {
      if (busy && this.kind === "transport" && this.ready?.capabilities.includes("exit_now")) this.stdin.write('{"type":"shutdown","now":true}\n');
      else {
        if (busy) this.stdin.write('{"type":"interrupt"}\n');
        this.stdin.write('{"type":"shutdown"}\n');
      }
    } catch {
      // Already gone.
    }
    this.endStdin();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exitedInTime = await Promise.race([
      this.exited.then(() => true),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(false), graceMs);
      }),
    ]);
    clearTimeout(timer);
    if (!exitedInTime) this.kill();
    await this.exited;
  }

  /** A request other than the reader thread's own (ping, heartbeat, info) is pending: the worker is at work. */
  private get busy(): boolean {
    for (const p of this.pending.values()) if (!ANSWERED_AT_ONCE.has(p.type)) return true;
    return false;
  }

  /** busy with a request the worker was answering when it went out: its silence may be a C loop. */
  private get busyAtWork(): boolean {
    for (const p of this.pending.values()) if (!ANSWERED_AT_ONCE.has(p.type) && !p.sentIntoSilence) return true;
    return false;
  }

  private stopHeartbeat(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
  }

  /** What the process wrote that is not the protocol (stray stdout, then its stderr's tail). */
  private output(): string {
    return `${this.noise}${this.stderrTail}`;
  }

  /** The tail of the process's own stderr and any non-protocol stdout, for error messages. */
  diagnostics(): string {
    const text = `${this.noise}${this.stderrTail}`.trim();
    return text ? `: ${text.split("\n").slice(-5).join("\n")}` : "";
  }

  /** False when the process is known not to get the line (its stdin is closed); the exit handler reports why. */
  private write(line: string): boolean {
    try {
      return this.stdin.write(`${line}\n`);
    } catch {
      // The exit handler rejects whatever is pending.
      return true;
    }
  }

  private unavailable(type: IdRequest["type"]): AwreplError {
    if (this.state === "closed") return new AwreplError("worker_closed", "The worker was closed");
    if (this.state === "dead" && this.exit) return this.diedError(this.exit, type);
    return new AwreplError("internal", `The worker is not ready (state ${this.state})`);
  }

  /** The worker's death as the error of a pending request; of one it never read when `undelivered` names its type. */
  private diedError(exit: WorkerExit, undelivered?: IdRequest["type"]): AwreplError {
    if (exit.reason && !this.killedByUs) {
      const what = `The Python worker (${this.label}) ${exit.reason}`;
      return undelivered ? new UndeliveredRequestError(`${what}, before it got the ${undelivered} request`) : new AwreplError("worker_died", what);
    }
    const how = this.killedByUs ? "was killed by awrepl" : describeExit(exit);
    if (undelivered) return new UndeliveredRequestError(`The Python worker (pid ${this.pid}) ${how} before it got the ${undelivered} request${this.diagnostics()}`);
    return new AwreplError("worker_died", `The Python worker (pid ${this.pid}) ${how}${this.diagnostics()}`);
  }

  private onData(chunk: Buffer): void {
    this.lastHeardAt = Date.now();
    try {
      this.lines.split(chunk, this.onFrame);
    } catch {
      // Only the line cap throws (onFrame keeps a failing handler's error for diagnostics).
      this.keepNoise(`[a frame longer than ${MAX_LINE_BYTES} bytes]`);
      this.kill();
    }
  }

  /** Keeps a line for diagnostics(): what the process wrote that is not the protocol, or what went wrong reading it. */
  private keepNoise(line: string): void {
    this.noise = `${this.noise}${line}\n`.slice(-STDERR_KEEP);
  }

  /** A handler that throws must not stop the frames that follow (the done would never arrive): said in diagnostics. */
  private keepHandlerFailure(event: string, err: unknown): void {
    this.keepNoise(`[a handler failed on a ${event} event: ${(err as Error)?.message ?? err}]`);
  }

  /** One frame's bytes: output frames are read without decoding their text, the rest parsed. */
  private readonly onFrame = (line: Uint8Array): void => {
    if (line.length === 0) return;
    if (line[10] === 0x64 && line[11] === 0x61) {
      // `{"event":"da...`: a payload piece, decoded without JSON.parse.
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
   * JSON.parse: a \u escape); the text decoded only for handlers that want it so; else to the listeners.
   */
  private deliverOutput(stream: "stdout" | "stderr", id: string | null, output: RawText): void {
    const handlers = this.ownerOf(id)?.handlers;
    if (handlers?.rawOutput) {
      handlers.rawOutput(stream, output);
      return;
    }
    const text = output.text();
    if (handlers?.output) handlers.output(stream, text);
    else this.listeners.onUnclaimedOutput?.(stream, text);
  }

  private onLine(line: string): void {
    let event: RuntimeEvent;
    try {
      event = JSON.parse(line);
    } catch {
      // Not a frame (a remote shell's banner, a crash message): keep it for diagnostics.
      this.keepNoise(line.slice(0, 500));
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
          this.keepNoise(`${event.ename}: ${event.evalue}`);
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
        if (this.state === "starting") {
          this.ready = event;
          this.state = "ready";
          this.readyWaiter?.resolve();
          this.readyWaiter = null;
        }
        return;
      case "data":
        this.pending.get(event.id)?.handlers?.data?.(Buffer.from(event.data, "base64"), event.seq);
        return;
      case "host_request": {
        // The running cell's handler answers (the awaiting cell is the active execute); without one,
        // the answer is at once, so the cell does not hang.
        const reply = (data: Record<string, unknown>) => void this.write(JSON.stringify({ type: "host_reply", id: event.id, data }));
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

  private onSpawnError(err: Error): void {
    const code = (err as NodeJS.ErrnoException).code;
    const what =
      code === "ENOENT"
        ? `Python command ${JSON.stringify(this.argv[0])} was not found`
        : `Python command ${JSON.stringify(this.label)} could not start: ${err.message}`;
    const error = new AwreplError("no_interpreter", what, { cause: err });
    this.readyWaiter?.reject(error);
    this.readyWaiter = null;
    // A failed spawn emits no "exit": finish here.
    if (!this.exit) this.onProcessExit({ code: null, signal: null }, error);
  }

  private onProcessExit(processExit: WorkerExit, spawnError?: AwreplError): void {
    if (this.exit) return;
    const exit: WorkerExit = { ...processExit };
    this.exit = exit;
    this.stopHeartbeat();
    // Let the last frames on stdout (already in the pipe) arrive before failing what is pending.
    const finish = () => {
      if (this.state !== "closed") this.state = "dead";
      // Whatever the worker left in its process group (subprocesses) goes with it; a transport given
      // its in-band exit keeps its grace (killing it now could drop those bytes).
      if (this.pid > 0 && this.transportKill === null) killGroup(this.pid);
      const died = !spawnError && !this.readyWaiter;
      if (died && !exit.reason && !this.killedByUs) {
        const lost = transportFailure(this.argv, exit, this.output(), true);
        const reason = this.lostReason ?? (lost ? `was lost: ${lost}` : null);
        if (reason) exit.reason = reason;
      }
      const error = spawnError ?? (died ? this.diedError(exit) : new AwreplError("no_interpreter", describeStartFailure(this.argv, this.label, exit, this.output())));
      this.readyWaiter?.reject(error);
      this.readyWaiter = null;
      this.failPending(error, died ? exit : undefined);
      this.resolveExited(exit);
      this.listeners.onExit?.(exit, this);
    };
    const stdout = this.child.stdout;
    if (!stdout || stdout.readableEnded || stdout.destroyed || spawnError) {
      finish();
      return;
    }
    let done = false;
    const once = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      finish();
    };
    // A grandchild holding the pipe open must not stall the report forever.
    const timer = setTimeout(once, 200);
    stdout.once("end", once);
    stdout.once("close", once);
  }

  /** Rejects every pending request with `error`; after a death (`diedOf`), undelivered ones say so. */
  private failPending(error: AwreplError, diedOf?: WorkerExit): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    this.active = null;
    for (const p of all) p.reject(p.undelivered && diedOf ? this.diedError(diedOf, p.type) : error);
  }
}

/** `promise`'s value, or undefined when it takes longer than `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((r) => {
    timer = setTimeout(() => r(undefined), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
