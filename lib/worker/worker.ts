// One Python process speaking the runtime protocol: spawn (in its own process group), handshake on
// `ready`, requests and the routing of their events (requests.ts), interrupt, kill. When the process exits,
// every pending request is rejected with one clear error naming the exit code or signal (a request
// the process was already gone for says so: UndeliveredRequestError), and later sends fail at once.
//
// Workers anywhere (docs/protocol.md, "Exit, heartbeat and cleanup"): a worker behind a transport
// (ssh, docker/podman/kubectl exec, any wrapper command) is ended in band first (`shutdown` with
// `now`, then its stdin closed) and its local transport killed only after a grace, since killing ssh
// is not killing the far python; one behind a named transport also gets a heartbeat, so a far side
// whose host went silent ends itself, and a silent idle worker is declared lost here (heartbeat.ts).
// The EOF of the protocol channel is the worker's death (a cell that closed the runtime's fds),
// reported at once. How far the worker got and why it ends is one union with checked moves (life.ts).
// Payloads stream both ways (payload.ts), and info() asks the worker for its own facts. Limits (limits/)
// give each process a cgroup of its own and name a death by the OOM killer; an allow list holds the
// sandbox's proxy open while the worker runs (docs/limits.md).
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { deadline, DeadlineError } from "../core/deadline.ts";
import { AwreplError } from "../core/errors.ts";
import { killGroup, processAlive } from "../core/process.ts";
import { LineSplitter } from "../wire/lines.ts";
import { PipeWriter } from "../wire/pipe_writer.ts";
import type { LimitsUsage } from "../protocol/limits.ts";
import type { DoneEvent, IdRequest, ReadyEvent, WorkerFacts } from "../protocol/runtime.ts";
import { PIECE_BYTES } from "../wire/data_frames.ts";
import { DEFAULT_HEARTBEAT, Heartbeat, type HeartbeatOptions } from "./heartbeat.ts";
import { causeOf, checkMove, closing, type EndCause, ended, ending, readied, type ReadyWaiter, readyWaiter, stateOf, type WorkerExit, type WorkerLife, type WorkerState } from "./life.ts";
import { type LimitsPlan, workerOomScore } from "./limits/plan.ts";
import { WorkerLimits } from "./limits/worker_limits.ts";
import type { NetProxySpec, ProxyLease } from "./net_proxy.ts";
import { PendingRequests, type RequestHandlers } from "./requests.ts";
import { describeStartFailure, describeStartTimeout, kindOf, transportFailure, transportName, type WorkerKind } from "./transport_failure.ts";

export { DEFAULT_HEARTBEAT, type HeartbeatOptions } from "./heartbeat.ts";
export type { WorkerExit, WorkerState } from "./life.ts";
export type { RequestHandlers } from "./requests.ts";

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
  /** The launch's limits (Launch.limits): this process gets a cgroup of its own, removed after its end. */
  limits?: LimitsPlan;
  /** The launch's proxy (Launch.netProxy): listening before the process starts, closed after the last worker using it. */
  netProxy?: NetProxySpec;
};

/** After the channel's EOF, how long the process may take to exit by itself before it counts as cut off. */
const CHANNEL_END_LOCAL_MS = 50;
const CHANNEL_END_TRANSPORT_MS = 1_000;
/** A transport worker's in-band exit gets this long to end the far side before the transport is killed. */
const TRANSPORT_GRACE_MS = 1_000;

type RequestBody = IdRequest extends infer R ? (R extends IdRequest ? Omit<R, "id"> : never) : never;

const STDERR_KEEP = 8192;
/** A frame longer than this is not the protocol; the worker is stopped rather than buffering forever. */
const MAX_LINE_BYTES = 1 << 30;

export function describeExit(exit: WorkerExit): string {
  if (exit.reason) return exit.reason;
  if (exit.signal) return `was killed by signal ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

export class Worker {
  readonly pid: number;
  readonly argv: string[];
  /** What messages call the Python command: the user's command line, not the runtime's bootstrap. */
  readonly label: string;
  readonly kind: WorkerKind;
  /** The runtime's handshake (its protocol, capabilities), kept after the worker's end. */
  ready: ReadyEvent | null = null;
  /** The latest facts info() got from the worker, and when (Date.now()). */
  facts: WorkerFacts | null = null;
  factsAt = 0;
  /** Resolves when the process has exited and all of its pending requests were rejected. */
  readonly exited: Promise<WorkerExit>;

  private readonly child: ChildProcess;
  private readonly stdin: PipeWriter;
  private readonly requests = new PendingRequests({
    write: (line) => this.write(line),
    noise: (line) => this.keepNoise(line),
    unclaimed: (stream, text) => this.listeners.onUnclaimedOutput?.(stream, text),
    ready: (event) => this.onReady(event),
  });
  /** The protocol pipe's lines; the chunks are ours to keep (see LineSplitter). */
  private readonly lines = new LineSplitter(MAX_LINE_BYTES, false, false);
  private stderrTail = "";
  private noise = "";
  /** How far the worker got and why it ends (life.ts): changed by move() alone. */
  private life: WorkerLife;
  /** Behind a named transport, once ready (heartbeat.ts); stopped at a close or an exit. */
  private heartbeat: Heartbeat | null = null;
  private resolveExited!: (exit: WorkerExit) => void;
  private listeners: WorkerListeners;
  /** Its limits' cgroup and what they explain about its death (limits/worker_limits.ts). */
  private readonly limits: WorkerLimits | null;
  private readonly proxyLease: ProxyLease | null;
  /** A local worker's move into its cgroup by the host, under way while it starts (start() waits for both). */
  private readonly joined: Promise<void> | null;

  private constructor(options: WorkerOptions, waiter: ReadyWaiter, proxyLease: ProxyLease | null) {
    this.life = { phase: "starting", waiter };
    this.listeners = { onUnclaimedOutput: options.onUnclaimedOutput, onExit: options.onExit };
    this.argv = options.argv;
    this.label = options.label ?? options.argv.join(" ");
    this.kind = options.kind ?? kindOf(options.argv);
    this.exited = new Promise((r) => {
      this.resolveExited = r;
    });
    const [cmd, ...args] = options.argv;
    if (!cmd) throw new AwreplError("no_interpreter", "The Python command is empty");
    this.proxyLease = proxyLease;
    try {
      this.limits = options.limits ? WorkerLimits.prepare(options.limits) : null;
    } catch (err) {
      throw new AwreplError("no_interpreter", (err as Error).message, { cause: err });
    }
    try {
      this.child = spawn(cmd, args, {
        cwd: options.cwd,
        env: options.env,
        stdio: ["pipe", "pipe", "pipe"],
        // Its own process group, so a timeout can kill the worker and everything it started at once.
        detached: process.platform !== "win32",
        windowsHide: true,
      });
    } catch (err) {
      this.limits?.release();
      throw err;
    }
    this.pid = this.child.pid ?? -1;
    this.stdin = new PipeWriter(this.child.stdin);
    // The preamble's lines first (the cgroup to join); then whatever the launch sends (the bootstrap's source).
    const limitsInput = this.limits?.input();
    if (limitsInput) this.stdin.write(limitsInput);
    this.joined = this.pid > 0 ? (this.limits?.join(this.pid) ?? null) : null;
    this.joined?.catch(() => undefined); // start() reports it
    // Unlimited local worker: no preamble raised its OOM score; Python forks nothing before it is ready.
    if (!options.limits && this.kind === "local" && this.pid > 0 && process.platform === "linux") setOomScore(this.pid);
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
      const life = this.life;
      if ((life.phase === "ending" || life.phase === "ended") && life.transportKill !== null) {
        // The transport exited within its grace: its scheduled kill is not needed any more. After a
        // loss already reported (said at once), what it left in its group goes now.
        clearTimeout(life.transportKill);
        this.move({ ...life, transportKill: null });
        if (life.phase === "ended") killGroup(this.pid);
      }
      this.onProcessExit({ code, signal });
    });
  }

  get state(): WorkerState {
    return stateOf(this.life);
  }

  /** How the process ended, once its exit was seen. */
  get exit(): WorkerExit | null {
    return this.life.phase === "ended" ? this.life.exit : null;
  }

  /** The one way the life changes: checked (life.ts), so an impossible worker is a loud bug, not a state. */
  private move(to: WorkerLife): void {
    checkMove(this.life, to);
    this.life = to;
  }

  /** Spawns the process and waits for its `ready` event. */
  static async start(options: WorkerOptions): Promise<Worker> {
    const waiter = readyWaiter();
    const lease = options.netProxy ? await (await import("./net_proxy.ts")).acquireNetProxy(options.netProxy) : null;
    let worker: Worker;
    try {
      worker = new Worker(options, waiter, lease);
    } catch (err) {
      lease?.release();
      throw err;
    }
    const timeoutMs = options.startTimeoutMs ?? 15_000;
    if (options.stdinPreamble) worker.stdin.write(options.stdinPreamble);
    try {
      // The join runs beside Python's start; awaited after `ready`, so that a process that failed to start says why.
      await deadline(waiter.promise.then(() => worker.joined), timeoutMs, "the worker's ready event");
    } catch (err) {
      // No `ready` in time: said as a start that failed, with what the command wrote meanwhile.
      const error = err instanceof DeadlineError
        ? new AwreplError("no_interpreter", describeStartTimeout(worker.argv, worker.label, timeoutMs, worker.output()))
        : err instanceof AwreplError
        ? err
        : new AwreplError("no_interpreter", `The worker's limits could not be applied: ${(err as Error).message}`, { cause: err });
      worker.kill();
      await worker.exited;
      throw error;
    }
    const heartbeat = options.heartbeat ?? (worker.kind === "transport" && transportName(worker.argv) !== null ? DEFAULT_HEARTBEAT : false);
    if (heartbeat && worker.ready?.capabilities.includes("heartbeat")) worker.startHeartbeat(heartbeat);
    return worker;
  }

  /**
   * Sends one request and resolves with its `done`; rejects when the worker dies or is closed first.
   * `payload`: the bytes of a restore `from: "host"` (payload.ts), sent after the request, each piece
   * once the pipe has taken the one before (memory: one piece): as binary frames when the runtime has
   * `binary_data` (the sha256 of what was sent follows the last one), else as base64 `data` requests
   * after a request that carries the file's sha256 (payload.sha256(), one pass of its own).
   */
  request(body: RequestBody, handlers?: RequestHandlers, payload?: AsyncIterable<Uint8Array> & { sha256?(): Promise<string> }): Promise<DoneEvent> {
    if (this.state !== "ready") return Promise.reject(this.unavailable(body.type));
    // Binary data frames when the runtime offers them (docs/protocol.md, "Binary data frames").
    const capable = this.ready?.capabilities.includes("binary_data") ?? false;
    const binary = capable && payload !== undefined && body.type === "restore";
    if (payload && body.type === "restore" && !binary && body.sha256 === undefined && payload.sha256) {
      return payload.sha256().then((sha256) => this.request({ ...body, sha256 }, handlers, payload));
    }
    const line = binary ? { ...body, binary: true, sha256: undefined } : capable && body.type === "snapshot" && body.to === "host" ? { ...body, binary: true } : body;
    return this.requests.open(body.type, handlers, this.heartbeat?.silent() ?? false, (id) => {
      // Its exit seen (the rest of its output still on the way) or its stdin closed: the process is gone.
      const delivered = this.write(JSON.stringify({ ...line, id })) && this.exit === null;
      if (payload && delivered) void (binary ? this.sendBinaryPayload(id, payload) : this.sendPayload(id, payload));
      return delivered;
    });
  }

  /** The pieces of request `id`'s payload as `data` requests; stops when the request ends (done, interrupt, death). */
  private async sendPayload(id: string, payload: AsyncIterable<Uint8Array>): Promise<void> {
    try {
      for await (const piece of payload) {
        for (let off = 0; off < piece.length; off += PIECE_BYTES) {
          if (!this.requests.has(id) || this.state !== "ready") return;
          const part = piece.subarray(off, off + PIECE_BYTES);
          const b64 = Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString("base64");
          await this.stdin.writeAndWait(`{"type":"data","id":"${id}","data":"${b64}"}\n`);
        }
      }
    } catch (err) {
      this.payloadFailed(id, err);
    }
  }

  /**
   * The pieces of request `id`'s payload as binary frames (a header line, then the piece's raw bytes,
   * written together so nothing comes between them), hashed as they go; then the sha256 of what was
   * sent. Stops between two frames when the request ends.
   */
  private async sendBinaryPayload(id: string, payload: AsyncIterable<Uint8Array>): Promise<void> {
    const hash = createHash("sha256");
    const pieces = payload[Symbol.asyncIterator]();
    try {
      // The next piece is read while this one drains into the pipe.
      for (let next = pieces.next();;) {
        const { value: piece, done } = await next;
        if (done || !this.requests.has(id) || this.state !== "ready") break;
        next = pieces.next();
        next.catch(() => undefined); // awaited above on the next turn; a request that ended first never reads it
        hash.update(piece);
        this.stdin.write(`{"type":"data","id":"${id}","bytes":${piece.length}}\n`);
        await this.stdin.writeAndWait(piece);
      }
      await pieces.return?.();
      if (!this.requests.has(id) || this.state !== "ready") return;
      this.stdin.write(`{"type":"data","id":"${id}","sha256":"${hash.digest("hex")}"}\n`);
    } catch (err) {
      this.payloadFailed(id, err);
    }
  }

  /** The file could not be read to the end: the runtime waits for bytes that will not come. */
  private payloadFailed(id: string, err: unknown): void {
    if (!this.requests.has(id)) return;
    this.keepNoise(`[the payload of request ${id} could not be sent: ${(err as Error).message}]`);
    this.interrupt(id);
  }

  /** Its limits and what it uses now (null: started without limits). */
  limitsUsage(): LimitsUsage | null {
    return this.limits?.usage(this.pid) ?? null;
  }

  /** Replaces the listeners (a spare worker started by one owner is adopted by another). */
  setListeners(listeners: WorkerListeners): void {
    this.listeners = listeners;
  }

  /** The id the latest request() was sent with (read right after the call to target an interrupt at it). */
  get lastId(): string {
    return this.requests.lastId;
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
    this.end({ by: "killed" });
  }

  /** awrepl ends the worker for `cause` (kill(), a loss), unless its exit was seen already. */
  private end(cause: EndCause): void {
    const life = this.life;
    if (life.phase === "ended") return;
    this.move(ending(life, cause));
    this.stop();
  }

  /** The one way awrepl ends the process (see kill()). */
  private stop(): void {
    const life = this.life;
    if (life.phase !== "ending" || life.transportKill !== null) return; // an in-band exit under way keeps its grace
    // Nothing to say in band (not a transport, a runtime without exit_now, or stdin closed already
    // and its grace spent, as after close()): the local process group goes now.
    if (this.kind !== "transport" || !this.ready?.capabilities.includes("exit_now") || this.stdin.ended) {
      killGroup(this.pid, this.child);
      return;
    }
    this.exitNow();
    this.move({ ...life, transportKill: setTimeout(() => killGroup(this.pid, this.child), TRANSPORT_GRACE_MS) });
  }

  /** In band: the runtime and its process group end at once; then its stdin is closed. */
  private exitNow(): void {
    try {
      if (!this.stdin.ended) this.stdin.write('{"type":"shutdown","now":true}\n');
    } catch {
      // Gone already.
    }
    this.endStdin();
  }

  private endStdin(): void {
    if (this.stdin.ended) return;
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
    return deadline(answered, timeoutMs, "the answer to a ping").catch(() => false);
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
    const facts = await deadline(asked, timeoutMs, "the worker's facts").catch(() => null);
    if (facts) {
      this.facts = facts;
      this.factsAt = Date.now();
    }
    return this.facts;
  }

  /** Starts the heartbeat (heartbeat.ts) of a ready worker. */
  private startHeartbeat(options: HeartbeatOptions): void {
    if (this.heartbeat || this.state !== "ready") return;
    this.heartbeat = new Heartbeat(options, {
      send: (request) => void this.request(request).catch(() => undefined),
      listening: () => this.state === "ready",
      atWork: () => this.requests.busyAtWork,
      lose: (reason) => this.lose(reason),
    });
  }

  private stopHeartbeat(): void {
    this.heartbeat?.stop();
    this.heartbeat = null;
  }

  /**
   * awrepl gave up on a worker that is not dead by itself (a lost connection, a closed protocol
   * channel): it is ended, and every pending request is rejected at once with `reason` in its exit,
   * without waiting for a transport that may take its time to exit.
   */
  private lose(reason: string): void {
    const life = this.life;
    if (life.phase === "ended" || (life.phase === "ending" && life.cause.by === "lost")) return;
    this.end({ by: "lost", reason });
    if (this.kind === "transport") this.onProcessExit({ code: null, signal: null });
  }

  private onChannelEnd(): void {
    if (this.exit) return;
    // The process may be exiting by itself (a crash closes the channel too; ssh first hears the far
    // side's exit status): give its exit a moment to arrive, and blame the channel only on a process
    // that still runs after it.
    const graceMs = this.kind === "transport" ? CHANNEL_END_TRANSPORT_MS : CHANNEL_END_LOCAL_MS;
    void deadline(this.exited, graceMs, "the worker's exit after its channel closed").catch(() => {
      if (!this.exit && processAlive(this.pid)) this.lose("closed its protocol channel (did a cell close the worker's file descriptors?) and was ended");
    });
  }

  /** True once kill() was called (a timeout or close), so a caller can tell that death from a crash. */
  get wasKilled(): boolean {
    return causeOf(this.life)?.by === "killed";
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
    const busy = this.requests.busy;
    this.move(closing(this.life));
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
    const exitedInTime = await deadline(this.exited, graceMs, "the worker's exit after its shutdown").then(
      () => true,
      () => false,
    );
    if (!exitedInTime) this.kill();
    await this.exited;
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
    const killed = this.wasKilled;
    if (exit.reason && !killed) {
      const what = `The Python worker (${this.label}) ${exit.reason}`;
      return undelivered ? new UndeliveredRequestError(`${what}, before it got the ${undelivered} request`) : new AwreplError("worker_died", what);
    }
    const how = killed ? "was killed by awrepl" : describeExit(exit);
    if (undelivered) return new UndeliveredRequestError(`The Python worker (pid ${this.pid}) ${how} before it got the ${undelivered} request${this.diagnostics()}`);
    return new AwreplError("worker_died", `The Python worker (pid ${this.pid}) ${how}${this.diagnostics()}`);
  }

  private onData(chunk: Buffer): void {
    this.heartbeat?.heard();
    try {
      this.lines.split(chunk, this.requests.onFrame, this.requests.onRaw);
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

  /** The handshake, while start() waits for it (also with the last frames after its exit): once. */
  private onReady(event: ReadyEvent): void {
    const handshake = readied(this.life);
    if (!handshake) return;
    this.ready = event;
    this.move(handshake.next);
    handshake.waiter.resolve();
  }

  private onSpawnError(err: Error): void {
    const code = (err as NodeJS.ErrnoException).code;
    const what = code === "ENOENT" ? `Python command ${JSON.stringify(this.argv[0])} was not found` : `Python command ${JSON.stringify(this.label)} could not start: ${err.message}`;
    const error = new AwreplError("no_interpreter", what, { cause: err });
    const life = this.life;
    // A failed spawn emits no "exit": finish here (start()'s waiter gets this error).
    if (life.phase === "ended") life.waiter?.reject(error);
    else this.onProcessExit({ code: null, signal: null }, error);
  }

  /** The exit is seen: the life ends, and is reported once the last frames on stdout have arrived. */
  private onProcessExit(processExit: WorkerExit, spawnError?: AwreplError): void {
    const life = this.life;
    if (life.phase === "ended") return;
    const exit: WorkerExit = { ...processExit };
    this.move(ended(life, exit));
    this.stopHeartbeat();
    const report = () => this.reportEnd(exit, spawnError);
    const stdout = this.child.stdout;
    if (!stdout || stdout.readableEnded || stdout.destroyed || spawnError) {
      report();
      return;
    }
    // Let the last frames on stdout (already in the pipe) arrive before failing what is pending; a
    // grandchild holding the pipe open must not stall the report forever.
    const drained = new Promise<void>((resolve) => {
      stdout.once("end", resolve);
      stdout.once("close", resolve);
    });
    void deadline(drained, 200, "the worker's last frames").then(report, report);
  }

  /** The end said once: every pending request and start()'s waiter rejected, exited resolved, onExit told. */
  private reportEnd(exit: WorkerExit, spawnError?: AwreplError): void {
    const life = this.life;
    if (life.phase !== "ended" || life.reported) return;
    this.move({ ...life, reported: true, waiter: null });
    // Whatever the worker left in its process group (subprocesses) goes with it; a transport given
    // its in-band exit keeps its grace (killing it now could drop those bytes).
    if (this.pid > 0 && life.transportKill === null) killGroup(this.pid);
    const died = !spawnError && life.waiter === null;
    const cause = life.cause;
    // The kernel's OOM killer in its memory cgroup (its SIGKILL): said as the reason, not as a bare signal.
    const limitReason = cause?.by !== "killed" ? this.limits?.deathReason(exit) : null;
    if (limitReason) exit.reason = limitReason;
    this.limits?.release();
    this.proxyLease?.release();
    if (died && !exit.reason && cause?.by !== "killed") {
      const lost = transportFailure(this.argv, exit, this.output(), true);
      const reason = (cause?.by === "lost" ? cause.reason : null) ?? (lost ? `was lost: ${lost}` : null);
      if (reason) exit.reason = reason;
    }
    const error = spawnError ?? (died ? this.diedError(exit) : new AwreplError("no_interpreter", describeStartFailure(this.argv, this.label, exit, this.output())));
    life.waiter?.reject(error);
    this.failPending(error, died ? exit : undefined);
    this.resolveExited(exit);
    this.listeners.onExit?.(exit, this);
  }

  /** Rejects every pending request with `error`; after a death (`diedOf`), undelivered ones say so. */
  private failPending(error: AwreplError, diedOf?: WorkerExit): void {
    this.requests.failAll((p) => (p.undelivered && diedOf ? this.diedError(diedOf, p.type) : error));
  }
}

/** Raises a worker's OOM score above the host's (limits/plan.ts): under memory pressure the kernel ends a worker, not the supervisor. */
function setOomScore(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/oom_score_adj`, String(workerOomScore()));
  } catch {
    // A kernel without it, or a process gone already.
  }
}
