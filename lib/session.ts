// A session backed by one local worker process at a time: ExecResult assembly with bounded output,
// timeout escalation (interrupt at the deadline, kill the process group after the grace period), and a
// fresh worker after a death, with the loss of state said in the next result's `notice`.
// Calls run one at a time in arrival order; interrupt() bypasses the queue.
import { rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { CellRecorder, lostStateNotice } from "./cell.ts";
import { DisplayWriter } from "./display.ts";
import { AwreplError } from "./errors.ts";
import { OutputCollector } from "./output.ts";
import { ensurePrivateDir, SESSION_NAME, stateDir } from "./paths.ts";
import type { DoneEvent, ExecResult, InspectInfo, NameFailure, RestoreReport } from "./protocol.ts";
import { type Interpreter, resolveInterpreter } from "./python.ts";
import { type Launch, runtimeLaunch } from "./runtime_source.ts";
import type { CompletenessStatus, ExecuteOptions, Session, SessionOptions, SnapshotReport } from "./types.ts";
import { type SpareWorkers, spareKey } from "./spare.ts";
import { Worker, type WorkerExit, type WorkerListeners, type WorkerOptions } from "./worker.ts";

export const DEFAULTS = { timeoutMs: 30_000, maxOutputBytes: 65_536, graceMs: 2_000 } as const;

export type ReplSessionOptions = SessionOptions & {
  /**
   * Warm spare workers shared by the sessions of a long-lived host (the supervisor): a session takes
   * a matching spare instead of starting Python, and starts the next spare once it is ready.
   */
  spares?: SpareWorkers;
};

export type ReplSessionInfo = {
  id: string;
  pid: number | null;
  python: string;
  pythonVersion: string | null;
  cwd: string;
  state: "idle" | "busy" | "closed";
  cellsRun: number;
  startedAt: number;
  lastActiveAt: number;
};

/** A request in flight: what the timeout, abort and interrupt() paths need to reach it. */
type RunningCall = {
  id: string;
  worker: Worker;
  userInterrupted: boolean;
  timedOut: boolean;
  killed: boolean;
  disarm(): void;
};

/** How long after a session's worker is ready its replacement spare is started. */
const SPARE_DELAY_MS = 100;

export class ReplSession implements Session {
  readonly id: string;
  readonly home: string;
  readonly interpreter: Interpreter;
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly graceMs: number;
  readonly cwd: string;
  readonly startedAt = Date.now();
  lastActiveAt = Date.now();
  cellsRun = 0;

  private readonly env: NodeJS.ProcessEnv;
  private readonly displays: DisplayWriter;
  private readonly spares: SpareWorkers | null;
  private worker: Worker | null = null;
  private starting: Promise<Worker> | null = null;
  private running: RunningCall | null = null;
  /** What the next execute's `notice` says: why the state it had is gone. */
  private lostNotice: string | null = null;
  /** Output that arrived between cells (background threads): it opens the next cell's output. */
  private stray: OutputCollector | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private queued = 0;
  /** Calls started or waiting; 0 means the next call may start at once. */
  private inFlight = 0;
  private closed = false;
  private closing: Promise<void> | null = null;

  private constructor(id: string, options: ReplSessionOptions, home: string, interpreter: Interpreter, env: NodeJS.ProcessEnv) {
    this.id = id;
    this.home = home;
    this.interpreter = interpreter;
    this.env = env;
    this.timeoutMs = options.timeoutMs ?? DEFAULTS.timeoutMs;
    this.maxOutputBytes = options.maxOutputBytes ?? DEFAULTS.maxOutputBytes;
    this.graceMs = options.graceMs ?? DEFAULTS.graceMs;
    this.cwd = resolve(options.cwd ?? process.cwd());
    this.displays = new DisplayWriter(join(home, "display"), id);
    this.spares = options.spares ?? null;
  }

  /** Resolves the interpreter, starts the worker and waits for its handshake. */
  static async start(id: string, options: ReplSessionOptions = {}): Promise<ReplSession> {
    if (!SESSION_NAME.test(id)) {
      throw new AwreplError("usage", `Invalid session name ${JSON.stringify(id)}: use letters, digits, ".", "_" and "-" (at most 64, starting with a letter or digit)`);
    }
    checkLimits(options);
    const home = ensurePrivateDir(options.home ?? stateDir());
    const env = options.env ? { ...process.env, ...options.env } : process.env;
    const cwd = resolve(options.cwd ?? process.cwd());
    const interpreter = await resolveInterpreter({ python: options.python, env, cwd, home });
    const session = new ReplSession(id, options, home, interpreter, env);
    await session.ensureWorker();
    return session;
  }

  get pid(): number | null {
    return this.worker?.pid ?? null;
  }

  get busy(): boolean {
    return this.running !== null || this.queued > 0;
  }

  info(): ReplSessionInfo {
    return {
      id: this.id,
      pid: this.pid,
      python: this.interpreter.command,
      pythonVersion: this.worker?.ready?.python ?? this.interpreter.version ?? null,
      cwd: this.cwd,
      state: this.closed ? "closed" : this.busy ? "busy" : "idle",
      cellsRun: this.cellsRun,
      startedAt: this.startedAt,
      lastActiveAt: this.lastActiveAt,
    };
  }

  execute(code: string, options: ExecuteOptions = {}): Promise<ExecResult> {
    if (typeof code !== "string") return Promise.reject(new AwreplError("usage", `Code must be a string, not ${typeof code}`));
    try {
      checkLimits(options);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.enqueue(() => this.runCell(code, options));
  }

  async variables(): Promise<Record<string, string>> {
    const done = await this.enqueue(() => this.control({ type: "variables" }));
    return done.variables ?? {};
  }

  async inspect(name: string): Promise<InspectInfo> {
    const done = await this.enqueue(() => this.control({ type: "inspect", name }, false));
    if (done.status !== "ok" || !done.info) {
      const detail = done.reason && !done.reason.includes("not defined") ? ` (${done.reason})` : "";
      throw new AwreplError("name_not_found", `Name ${JSON.stringify(name)} is not defined in session ${this.id}${detail}`);
    }
    return done.info;
  }

  async reset(): Promise<void> {
    await this.enqueue(() => this.control({ type: "reset" }));
  }

  async interrupt(): Promise<void> {
    const cell = this.running;
    if (!cell) return;
    cell.userInterrupted = true;
    cell.worker.interrupt(cell.id);
  }

  async complete(code: string, cursor?: number): Promise<string[]> {
    const done = await this.enqueue(() => this.control(cursor === undefined ? { type: "complete", code } : { type: "complete", code, cursor }));
    return done.matches ?? [];
  }

  async isComplete(code: string): Promise<{ status: CompletenessStatus; indent: string }> {
    const done = await this.enqueue(() => this.control({ type: "is_complete", code }, false));
    const status = done.status === "complete" || done.status === "incomplete" || done.status === "invalid" ? done.status : "invalid";
    return { status, indent: done.indent ?? "" };
  }

  /** Default path: <state>/snapshots/<id>.pkl, with the manifest beside it as <id>.json. */
  defaultSnapshotPath(): string {
    return join(this.home, "snapshots", `${this.id}.pkl`);
  }

  async snapshot(path?: string): Promise<SnapshotReport> {
    const target = this.snapshotTarget(path);
    const manifest_path = manifestPath(target);
    const done = await this.enqueue(() => this.control({ type: "snapshot", path: target, manifest_path }, false));
    if (done.status !== "ok") throw new AwreplError("snapshot_failed", `Snapshot of session ${this.id} to ${target} failed: ${done.reason ?? "no reason given"}`);
    return {
      path: target,
      saved: done.saved ?? [],
      skipped: (done.skipped ?? []).map((s): NameFailure => (typeof s === "string" ? { name: s, reason: "" } : s)),
      pruned: done.pruned ?? [],
      bytes: done.bytes ?? 0,
    };
  }

  async restore(path?: string): Promise<RestoreReport> {
    const target = this.snapshotTarget(path);
    const done = await this.enqueue(() => this.control({ type: "restore", path: target }, false));
    if (done.status !== "ok") throw new AwreplError("restore_failed", `Restore of session ${this.id} from ${target} failed: ${done.reason ?? "no reason given"}`);
    if (done.reason === "snapshot not found") throw new AwreplError("restore_failed", `No snapshot at ${target}`);
    return { source: target, restored: done.restored ?? [], failed: done.failed ?? [] };
  }

  /** Stops the worker (shutdown, then a kill after a short wait). Pending and later calls are refused. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      const starting = this.starting;
      if (starting) await starting.catch(() => undefined);
      const worker = this.worker;
      this.worker = null;
      if (worker) await worker.close(Math.min(this.graceMs, 1000));
    })();
    return this.closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  // --- internals ------------------------------------------------------------------------------

  private enqueue<T>(task: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(closedError(this.id));
    this.queued++;
    const run = () => {
      this.queued--;
      if (this.closed) return Promise.reject(closedError(this.id));
      this.lastActiveAt = Date.now();
      return task();
    };
    // Idle: start at once (the hot path of one call after another); busy: wait for the tail.
    const result = this.inFlight === 0 ? run() : this.queue.then(run, run);
    this.inFlight++;
    const settled = () => {
      this.inFlight--;
    };
    this.queue = result.then(settled, settled);
    return result;
  }

  /** The live worker, or a fresh one when the last was lost. */
  private ensureWorker(): Promise<Worker> {
    if (this.worker && this.worker.state === "ready") return Promise.resolve(this.worker);
    if (this.closed) return Promise.reject(closedError(this.id));
    this.starting ??= this.spawnWorker().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  private async spawnWorker(): Promise<Worker> {
    let launch = await runtimeLaunch(this.home, this.interpreter);
    const key = this.spares ? spareKey(launch.argv, this.cwd, this.env) : "";
    let worker = this.spares ? await this.spares.take(key) : null;
    if (worker) {
      worker.setListeners(this.workerListeners());
    } else {
      try {
        worker = await Worker.start(this.workerOptions(launch, this.workerListeners()));
      } catch (err) {
        // A damaged bytecode cache (truncated, another build's magic number) must not lock a user
        // out: drop it and start from the source.
        if (!launch.bytecode || !(err instanceof AwreplError) || err.code !== "no_interpreter") throw err;
        rmSync(launch.bytecode, { force: true });
        launch = await runtimeLaunch(this.home, this.interpreter, { bytecode: false });
        worker = await Worker.start(this.workerOptions(launch, this.workerListeners()));
      }
    }
    if (this.closed) {
      await worker.close(0);
      throw closedError(this.id);
    }
    this.worker = worker;
    // The next session (or this one's next worker) takes a warm spare, started a little later: a
    // spawn costs the host 1-5 ms of synchronous work, which must not delay this session's first cell.
    const spares = this.spares;
    if (spares) {
      const used = launch;
      const timer = setTimeout(() => spares.fill(spareKey(used.argv, this.cwd, this.env), () => Worker.start(this.workerOptions(used, {}))), SPARE_DELAY_MS);
      timer.unref?.();
    }
    return worker;
  }

  private workerOptions(launch: Launch, listeners: WorkerListeners): WorkerOptions {
    return { argv: launch.argv, stdinPreamble: launch.stdinPreamble, cwd: this.cwd, env: this.env, ...listeners };
  }

  private workerListeners(): WorkerListeners {
    return {
      onUnclaimedOutput: (stream, text) => {
        (this.stray ??= new OutputCollector(this.maxOutputBytes)).add(stream, text);
      },
      // The worker is passed in: it may exit before start() returns it.
      onExit: (exit, exited) => this.onWorkerExit(exited, exit),
    };
  }

  private onWorkerExit(worker: Worker, exit: WorkerExit): void {
    if (this.worker !== worker || this.closed) return;
    this.worker = null;
    // A death during a cell is reported by that cell; this covers deaths between calls too.
    this.lostNotice ??= lostStateNotice(worker.wasKilled, exit);
  }

  /**
   * One non-execute request under the same deadline as a cell: interrupted at the deadline, the worker
   * killed after the grace period (a wedged worker must not hang the caller). `okOnly` turns a failed
   * `done` into an error carrying its reason.
   */
  private async control(body: Parameters<Worker["request"]>[0], okOnly = true): Promise<DoneEvent> {
    const worker = await this.ensureWorker();
    const pending = worker.request(body);
    const call = this.watch(worker, worker.lastId, this.timeoutMs);
    let done: DoneEvent;
    try {
      done = await pending;
    } catch (err) {
      if (call.killed && err instanceof AwreplError && err.code === "worker_died") {
        this.lostNotice = lostStateNotice(true, worker.exit);
        throw new AwreplError("timeout", `The ${body.type} request exceeded the ${this.timeoutMs} ms timeout; the worker was killed and the session's state was lost`);
      }
      throw err;
    } finally {
      call.disarm();
    }
    if (call.timedOut && done.status !== "ok") {
      throw new AwreplError("timeout", `The ${body.type} request exceeded the ${this.timeoutMs} ms timeout and was interrupted`);
    }
    if (okOnly && done.status !== "ok") {
      throw new AwreplError("internal", `The runtime refused ${body.type} in session ${this.id}: ${done.reason ?? "no reason given"}`);
    }
    return done;
  }

  /**
   * Arms the deadline of request `id`: at timeoutMs (0 = none) it is interrupted, and graceMs later
   * the worker's process group is killed. The returned record says which of those happened.
   */
  private watch(worker: Worker, id: string, timeoutMs: number): RunningCall {
    const call: RunningCall = { id, worker, userInterrupted: false, timedOut: false, killed: false, disarm: () => undefined };
    if (timeoutMs <= 0) return call;
    let grace: ReturnType<typeof setTimeout> | undefined;
    const deadline = setTimeout(() => {
      call.timedOut = true;
      worker.interrupt(id);
      grace = setTimeout(() => {
        call.killed = true;
        worker.kill();
      }, this.graceMs);
    }, timeoutMs);
    call.disarm = () => {
      clearTimeout(deadline);
      clearTimeout(grace);
    };
    return call;
  }

  private async runCell(code: string, options: ExecuteOptions): Promise<ExecResult> {
    const live = this.worker;
    const worker = live !== null && live.state === "ready" ? live : await this.ensureWorker();
    const limits = { timeoutMs: options.timeoutMs ?? this.timeoutMs, graceMs: this.graceMs };
    const notice = this.lostNotice;
    this.lostNotice = null;
    const recorder = new CellRecorder(this.takeOutputCollector(options.maxOutputBytes ?? this.maxOutputBytes), this.displays, options);
    const done = worker.request({ type: "execute", code }, recorder);
    const cell = this.watch(worker, worker.lastId, limits.timeoutMs);
    this.running = cell;
    const signal = options.signal;
    const onAbort = () => {
      cell.userInterrupted = true;
      worker.interrupt(cell.id);
    };
    if (signal) {
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    }
    let result: ExecResult;
    try {
      result = recorder.finish(await done, cell, limits, this.id, notice);
    } catch (err) {
      if (!(err instanceof AwreplError) || err.code !== "worker_died") throw err;
      result = recorder.lost(cell, worker.exit, limits, this.id, notice);
      this.lostNotice = lostStateNotice(cell.killed, worker.exit);
      if (this.worker === worker) this.worker = null;
    } finally {
      cell.disarm();
      signal?.removeEventListener("abort", onAbort);
      this.running = null;
    }
    this.cellsRun++;
    this.lastActiveAt = Date.now();
    return result;
  }

  /** A collector for the next cell, opened by any output that arrived between cells. */
  private takeOutputCollector(limit: number): OutputCollector {
    const stray = this.stray;
    if (!stray) return new OutputCollector(limit);
    this.stray = null;
    if (stray.limit === limit) return stray;
    const output = new OutputCollector(limit);
    const s = stray.result();
    output.add("stdout", s.stdout);
    output.add("stderr", s.stderr);
    return output;
  }

  private snapshotTarget(path?: string): string {
    const target = path ? resolve(this.cwd, path) : this.defaultSnapshotPath();
    if (!path) ensurePrivateDir(join(this.home, "snapshots"));
    return target;
  }
}

/** The manifest beside a snapshot: `x.pkl` -> `x.json`, anything else -> `<path>.json`. */
export function manifestPath(snapshotPath: string): string {
  return snapshotPath.endsWith(".pkl") ? `${snapshotPath.slice(0, -4)}.json` : `${snapshotPath}.json`;
}

function closedError(id: string): AwreplError {
  return new AwreplError("worker_closed", `Session ${id} is closed`);
}

/** Timeouts and limits are non-negative finite numbers (NaN would fire a deadline at once). */
function checkLimits(options: { timeoutMs?: number; maxOutputBytes?: number; graceMs?: number }): void {
  for (const key of ["timeoutMs", "maxOutputBytes", "graceMs"] as const) {
    const value = options[key];
    if (value !== undefined && (typeof value !== "number" || !Number.isFinite(value) || value < 0)) {
      throw new AwreplError("usage", `${key} must be a non-negative number, not ${String(value)}`);
    }
  }
}
