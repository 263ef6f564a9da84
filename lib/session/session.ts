// A session backed by one local worker process at a time: ExecResult assembly with bounded output,
// timeout escalation (interrupt at the deadline, kill the process group after the grace period), and a
// fresh worker after a death, with the loss of state said in the next result's `notice` — or, when
// the session has a snapshot, the fresh worker restored from it and the result saying which state it
// went back to. Opt-in autosave snapshots after every cell that changed the namespace.
// Calls run one at a time in arrival order; interrupt() bypasses the queue.
import { existsSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { CellRecorder, type LiveOutput, lostStateNotice, restoredStateNotice } from "./cell.ts";
import { DisplayWriter } from "./display.ts";
import { AwreplError } from "../core/errors.ts";
import { checkLimits, DEFAULTS } from "../core/limits.ts";
import { OutputCollector } from "./output.ts";
import { ensurePrivateDir, stateDir } from "../settings/home.ts";
import { checkSessionName } from "../core/names.ts";
import type { DoneEvent, InspectInfo } from "../protocol/runtime.ts";
import type { ExecResult, RestoreReport } from "../protocol/result.ts";
import { type Interpreter, resolveInterpreter } from "../worker/interpreter.ts";
import { type Launch, runtimeLaunch } from "../worker/launch.ts";
import { aftermath, type Recovery, SessionSnapshots } from "./snapshots.ts";
import { defaultSnapshotPath, describeSnapshot } from "./snapshot_files.ts";
import type { CompletenessStatus, ExecuteOptions, Session, SessionOptions, SnapshotReport } from "../protocol/api.ts";
import { type SpareWorkers, spareKey } from "../worker/spare.ts";
import { Worker, type WorkerExit, type WorkerListeners, type WorkerOptions } from "../worker/worker.ts";

export { manifestPath } from "./snapshot_files.ts";

export type ReplSessionOptions = SessionOptions & {
  /**
   * Warm spare workers shared by the sessions of a long-lived host (the supervisor): a session takes
   * a matching spare instead of starting Python, and starts the next spare once it is ready.
   */
  spares?: SpareWorkers;
  /**
   * Restore the session's default snapshot (<home>/snapshots/<id>.pkl) into the first worker, when
   * there is one; the first execute's result reports it in `restored`. An unreadable snapshot is moved
   * aside (`*.corrupt-<time>`) and the session starts fresh, which that result's `notice` says.
   */
  restoreOnStart?: boolean;
  /** Size caps of every snapshot (total payload, one name); names over them are reported as skipped. */
  snapshotMaxBytes?: number;
  snapshotMaxVariableBytes?: number;
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
  /** Snapshot after every cell that changed the namespace; a host may switch it on later. */
  autosave: boolean;
  readonly snapshotMaxBytes: number;
  readonly snapshotMaxVariableBytes: number;
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
  /** How the last worker was lost, for the notice of the call that recovers from it. */
  private lostWorker: { killed: boolean; exit: WorkerExit | null } | null = null;
  /** The worker was lost between calls: the next call restores the latest snapshot, if any, first. */
  private needsRecovery = false;
  /** Snapshots written and read through this session's worker; what a lost worker goes back to. */
  private readonly snapshots: SessionSnapshots;
  /** A restore the next execute's result reports (at start, or after a worker lost between calls). */
  private pendingRestore: RestoreReport | null = null;
  /** Said once by the next execute's notice (an autosave that failed, names it had to skip). */
  private pendingNotes: string[] = [];
  /** The last cell's worker was killed or died (its result says what the state went back to). */
  private lastCellLostWorker = false;
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
    this.autosave = options.autosave ?? false;
    this.snapshotMaxBytes = options.snapshotMaxBytes ?? DEFAULTS.snapshotMaxBytes;
    this.snapshotMaxVariableBytes = options.snapshotMaxVariableBytes ?? DEFAULTS.snapshotMaxVariableBytes;
    this.displays = new DisplayWriter(join(home, "display"), id);
    this.snapshots = new SessionSnapshots(
      id,
      home,
      { maxBytes: this.snapshotMaxBytes, maxVariableBytes: this.snapshotMaxVariableBytes },
      (body, recoverOnKill) => this.control(body, false, recoverOnKill),
      (text) => this.pendingNotes.push(text),
    );
    this.spares = options.spares ?? null;
  }

  /** Resolves the interpreter, starts the worker and waits for its handshake. */
  static async start(id: string, options: ReplSessionOptions = {}): Promise<ReplSession> {
    checkSessionName(id);
    checkLimits(options);
    const home = ensurePrivateDir(options.home ?? stateDir());
    const env = options.env ? { ...process.env, ...options.env } : process.env;
    const cwd = resolve(options.cwd ?? process.cwd());
    const interpreter = await resolveInterpreter({ python: options.python, env, cwd, home });
    const session = new ReplSession(id, options, home, interpreter, env);
    await session.ensureWorker();
    if (options.restoreOnStart) {
      try {
        session.pendingRestore = await session.snapshots.restoreAtStart(() => session.closed);
      } catch (err) {
        await session.close();
        throw err;
      }
    }
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

  /** `onRawOutput` (not part of Session) gets live output undecoded: the supervisor forwards it as is. */
  execute(code: string, options: ExecuteOptions & Pick<LiveOutput, "onRawOutput"> = {}): Promise<ExecResult> {
    if (typeof code !== "string") return Promise.reject(new AwreplError("usage", `Code must be a string, not ${typeof code}`));
    try {
      checkLimits(options);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!this.autosave) return this.enqueue(() => this.runCell(code, options));
    // The result goes back at once; the autosave runs after it in the same turn of the queue, so the
    // next call (and a kill it may cause) only ever finds the namespace saved.
    return new Promise<ExecResult>((resolveResult, rejectResult) => {
      this.enqueue(async () => {
        const result = await this.runCell(code, options);
        // A cell that lost its worker left nothing new to save (and its replacement may be empty).
        const kept = !this.lastCellLostWorker && this.worker !== null;
        resolveResult(result);
        if (kept) await this.snapshots.autosave(() => this.closed);
      }).catch(rejectResult);
    });
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
    return defaultSnapshotPath(this.home, this.id);
  }

  /**
   * Saves the namespace to `path` (default: defaultSnapshotPath()). Names that cannot be pickled or
   * are over the size caps are listed in `skipped` with a reason; they never fail the snapshot.
   */
  snapshot(path?: string): Promise<SnapshotReport> {
    return this.enqueue(() => this.snapshots.write(this.snapshotTarget(path)));
  }

  /**
   * Revives the names saved at `path` (default: defaultSnapshotPath()) into the namespace; names that
   * fail are listed in `failed`. A default snapshot that cannot be read is moved aside.
   */
  restore(path?: string): Promise<RestoreReport> {
    return this.enqueue(async () => {
      const target = this.snapshotTarget(path);
      const outcome = await this.snapshots.read(target);
      if ("report" in outcome) return outcome.report;
      if (outcome.missing) throw new AwreplError("restore_failed", `No snapshot at ${target}`);
      throw new AwreplError("restore_failed", `Restore of session ${this.id} from ${target} failed: ${outcome.error}`);
    });
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
    return { argv: launch.argv, label: this.interpreter.command, stdinPreamble: launch.stdinPreamble, cwd: this.cwd, env: this.env, ...listeners };
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
    this.lostWorker ??= { killed: worker.wasKilled, exit };
    this.needsRecovery = true;
  }

  /** The worker for the next request: after a loss between calls, a fresh one with the latest snapshot restored. */
  private async liveWorker(): Promise<Worker> {
    if (this.needsRecovery) {
      const lost = this.lostWorker ?? { killed: false, exit: null };
      const back = await this.recover();
      if (back && "report" in back) {
        this.pendingRestore = back.report;
        this.lostNotice = restoredStateNotice(lost.killed, lost.exit, back.state);
      } else if (back) {
        this.lostNotice = `${lostStateNotice(lost.killed, lost.exit)} (${capitalize(back.state)} could not be restored: ${back.error}.)`;
      }
    }
    return this.ensureWorker();
  }

  /**
   * After a lost worker: starts a fresh one and restores the session's latest snapshot into it. Null
   * when there is no snapshot to go back to. Never throws; a snapshot that cannot be restored is not
   * tried again (a payload that kills its worker must not do so on every call).
   */
  private async recover(): Promise<Recovery | null> {
    this.needsRecovery = false;
    this.lostWorker = null;
    const path = this.snapshots.latest;
    if (!path || this.closed || !existsSync(path)) return null;
    try {
      await this.ensureWorker();
    } catch (err) {
      return this.closed ? null : { error: (err as Error).message, state: describeSnapshot(path) };
    }
    const back = await this.snapshots.recover(describeSnapshot);
    return this.closed ? null : back;
  }

  /** The next execute's notice: why the state it had is gone, and anything else said once. */
  private takeNotice(): string | null {
    const parts = [this.lostNotice, ...this.pendingNotes].filter((p): p is string => Boolean(p));
    this.lostNotice = null;
    this.pendingNotes = [];
    return parts.length ? parts.join(" ") : null;
  }

  /**
   * One non-execute request under the same deadline as a cell: interrupted at the deadline, the worker
   * killed after the grace period (a wedged worker must not hang the caller). `okOnly` turns a failed
   * `done` into an error carrying its reason.
   */
  private async control(body: Parameters<Worker["request"]>[0], okOnly = true, recoverOnKill = true): Promise<DoneEvent> {
    const worker = await this.liveWorker();
    const pending = worker.request(body);
    const call = this.watch(worker, worker.lastId, this.timeoutMs);
    // interrupt() reaches a variables/inspect/... request too (a client that went away, say), unless
    // it runs inside a cell's turn (an autosave), which interrupt() already targets.
    const own = this.running === null;
    if (own) this.running = call;
    let done: DoneEvent;
    try {
      done = await pending;
    } catch (err) {
      if (!call.killed || !(err instanceof AwreplError) || err.code !== "worker_died") throw err;
      call.disarm();
      if (this.worker === worker) this.worker = null;
      this.lostNotice = lostStateNotice(true, worker.exit);
      this.lostWorker = { killed: true, exit: worker.exit };
      this.needsRecovery = true;
      const exceeded = `The ${body.type} request exceeded the ${this.timeoutMs} ms timeout; the worker was killed`;
      const back = recoverOnKill ? await this.recover() : null;
      if (back && "report" in back) {
        this.lostNotice = null;
        throw new AwreplError("timeout", `${exceeded} and the session went back to ${back.state}`);
      }
      const why = back ? ` (${back.state} could not be restored: ${back.error})` : "";
      throw new AwreplError("timeout", `${exceeded} and the session's state was lost${why}`);
    } finally {
      call.disarm();
      if (own && this.running === call) this.running = null;
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

  private async runCell(code: string, options: ExecuteOptions & Pick<LiveOutput, "onRawOutput">): Promise<ExecResult> {
    const live = this.worker;
    const worker = live !== null && live.state === "ready" && !this.needsRecovery ? live : await this.liveWorker();
    const limits = { timeoutMs: options.timeoutMs ?? this.timeoutMs, graceMs: this.graceMs };
    const notice = this.takeNotice();
    const restored = this.pendingRestore;
    this.pendingRestore = null;
    const recorder = new CellRecorder(this.takeOutputCollector(options.maxOutputBytes ?? this.maxOutputBytes), this.displays, options);
    // `filename` (run -f): the runtime names the file in tracebacks and sets __file__ for the cell.
    const done = worker.request(options.filename ? { type: "execute", code, filename: options.filename } : { type: "execute", code }, recorder);
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
    let result: ExecResult | null = null;
    try {
      result = recorder.finish(await done, cell, limits, this.id, notice);
    } catch (err) {
      if (!(err instanceof AwreplError) || err.code !== "worker_died") throw err;
    } finally {
      cell.disarm();
      signal?.removeEventListener("abort", onAbort);
      this.running = null;
    }
    this.lastCellLostWorker = result === null;
    if (result === null) {
      // The worker is gone (killed at the deadline, or dead): go back to the latest snapshot if there
      // is one, before answering, so the result can say which state the session is in now.
      if (this.worker === worker) this.worker = null;
      this.needsRecovery = true;
      const back = await this.recover();
      result = recorder.lost(cell, worker.exit, limits, this.id, notice, back === null ? undefined : aftermath(back));
      if (back && "report" in back) {
        result.restored = back.report;
        this.lostNotice = null;
      } else {
        this.lostNotice = lostStateNotice(cell.killed, worker.exit);
      }
    } else if (restored) {
      result.restored = restored;
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
    return path ? resolve(this.cwd, path) : this.snapshots.defaultPath();
  }
}

function closedError(id: string): AwreplError {
  return new AwreplError("worker_closed", `Session ${id} is closed`);
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
