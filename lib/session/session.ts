// A session backed by one local worker process at a time: ExecResult assembly with bounded output,
// timeout escalation (interrupt at the deadline, kill the process group after the grace period), and a
// fresh worker after a death, with the loss of state said in the next result's `notice` — or, when
// the session has a snapshot, the fresh worker restored from it and the result saying which state it
// went back to. Opt-in autosave snapshots after every cell that changed the namespace.
// Calls run one at a time in arrival order, each waiting its turn no longer than its timeout, and a
// withdrawn one never runs (call_queue.ts: the session's one queue, whoever holds the session);
// interrupt() bypasses the queue. The limits are resolved once, in start() (lib/core/limits.ts
// resolveLimits), and kept whole. The worker's situation and what the next result says once are
// session_state.ts's.
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { CallQueue, MissedTurn, type Turn } from "./call_queue.ts";
import { CellRecorder, type LiveOutput, neverRanResult } from "./cell.ts";
import { DisplayFiles, displayFolder } from "./display.ts";
import { CellDisplays } from "./display_entries.ts";
import { AwreplError } from "../core/errors.ts";
import { byteLimit, type CallLimits, checkLimits, DEFAULTS, FIGURE_FORMATS, type FigureFormat, type Limits, resolveLimits } from "../core/limits.ts";
import { OutputCollector } from "./output.ts";
import { ensurePrivateDir, stateDir } from "../settings/home.ts";
import { passedOver, sandboxWrittenRoot } from "../settings/sandbox_written.ts";
import { checkSessionName } from "../core/names.ts";
import type { DoneEvent, InspectInfo } from "../protocol/runtime.ts";
import type { ExecResult, RestoreReport } from "../protocol/result.ts";
import { type Interpreter, resolveInterpreter, venvPython } from "../worker/interpreter.ts";
import { interruptByUser, interruptOnAbort, type RunningCall, watchDeadline } from "./running_call.ts";
import { checkMove, type Loss, NextResultNotices, type WorkerSlot } from "./session_state.ts";
import { aftermath, type Recovery, SessionSnapshots, type SnapshotTransfer } from "./snapshots.ts";
import { defaultSnapshotPath, describeSnapshot, keysPath } from "./snapshot_files.ts";
import { IdempotencyKeys, type KeyState } from "./idempotency.ts";
import type { CompletenessStatus, ExecuteOptions, InspectOptions, Session, SessionOptions, SnapshotReport } from "../protocol/api.ts";
import type { SpareWorkers } from "../worker/spare.ts";
import { type RequestHandlers, UndeliveredRequestError, type Worker, type WorkerListeners } from "../worker/worker.ts";
import { startSessionWorker, type WorkerSpec } from "./worker_start.ts";
import { workerFacts, type WorkerFactsReport } from "../worker/facts.ts";

export { manifestPath } from "./snapshot_files.ts";

/**
 * SessionOptions, and the rest of the limits (Limits: the snapshot caps, the display caps), each
 * defaulting to DEFAULTS' value.
 */
export type ReplSessionOptions = SessionOptions & Partial<Limits> & {
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
  /** How matplotlib figures are rendered: "png" (default) or "svg". */
  figureFormat?: FigureFormat;
  /**
   * Keep the display files when the session closes (<home>/display/_<id>, still bounded by the caps):
   * for a session that ends as soon as its result is shown (an ephemeral `run`), whose paths must outlive it.
   */
  keepDisplayFiles?: boolean;
  /**
   * How snapshot bytes move: `path` (the worker reads and writes the files itself: a local
   * interpreter), `stream` (over the protocol, the files written and read here: what a remote,
   * container or sandboxed worker needs). Default: `path` for a local unsandboxed interpreter (5-9x
   * faster), `stream` for everything else.
   */
  snapshotTransfer?: SnapshotTransfer;
};

/**
 * What a host may say about any one call: `signal` withdraws it while it waits for its turn (it never
 * runs) and interrupts it once it runs; `onStart` runs as it gets its turn (call_queue.ts).
 */
export type CallOptions = Pick<Turn, "signal" | "onStart">;

/** Per call: `timeoutMs` overrides the session's deadline for one snapshot or restore. */
export type SnapshotCallOptions = CallOptions & {
  timeoutMs?: number;
  /** A name that takes longer than this to pickle is skipped (and listed), not the whole snapshot. */
  maxVariableMs?: number;
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

type RequestBody = Parameters<Worker["request"]>[0];
/** What a snapshot or restore adds to a plain request (SnapshotRequester's options). */
type ControlExtras = {
  timeoutMs?: number;
  handlers?: RequestHandlers;
  onSent?: (worker: Worker, id: string) => void;
  /** The bytes that follow the request (a restore from the host), made afresh for each worker it is sent to. */
  payload?: () => AsyncIterable<Uint8Array>;
};
type CellOptions = ExecuteOptions & Pick<LiveOutput, "onRawOutput"> & Pick<CallOptions, "onStart">;

/** What start() resolves once for the constructor: nothing below it falls back to a default. */
type Resolved = { home: string; cwd: string; interpreter: Interpreter; env: NodeJS.ProcessEnv; limits: Limits; figureFormat: FigureFormat };

export class ReplSession implements Session {
  readonly id: string;
  readonly home: string;
  readonly interpreter: Interpreter;
  /** The session's limits; a call's own timeout or output cap beats them for that call. */
  readonly limits: Limits;
  readonly cwd: string;
  /** Snapshot after every cell that changed the namespace; a host may switch it on later. */
  autosave: boolean;
  readonly startedAt: number = Date.now();
  lastActiveAt: number = Date.now();
  cellsRun: number = 0;

  private readonly spec: WorkerSpec;
  private readonly displays: DisplayFiles;
  readonly figureFormat: FigureFormat;
  /** The worker's situation; it changes only through become(). */
  private slot: WorkerSlot = { state: "none" };
  /** What the next execute's result says once. */
  private readonly notices = new NextResultNotices();
  /** Snapshots written and read through this session's worker; what a lost worker goes back to. */
  private readonly snapshots: SessionSnapshots;
  private readonly calls: CallQueue;
  /** The request in flight: what interrupt() reaches. */
  private running: RunningCall | null = null;
  /** Output that arrived between cells (background threads): it opens the next cell's output. */
  private stray: OutputCollector | null = null;
  /** The idempotency keys of its calls (ExecuteOptions.id), saved with its default snapshot. */
  private readonly keys = new IdempotencyKeys();

  private constructor(id: string, options: ReplSessionOptions, resolved: Resolved) {
    const { home, cwd, interpreter, env, limits } = resolved;
    this.id = id;
    this.home = home;
    this.interpreter = interpreter;
    this.limits = limits;
    this.cwd = cwd;
    this.autosave = options.autosave ?? false;
    // The limits go with every worker the session starts (a replacement after a death too): a death
    // by the memory cgroup is said in its exit's reason, and so in the cell's `died` result.
    this.spec = { home, interpreter, cwd, env, spares: options.spares ?? null, sandbox: options.sandbox ?? null, limits: options.limits ?? null };
    const kept = options.keepDisplayFiles ?? false;
    this.displays = new DisplayFiles(
      displayFolder(home, id, kept),
      id,
      { maxFiles: limits.displayMaxFiles, maxBytes: limits.displayMaxBytes, maxPayloadBytes: limits.displayMaxPayloadBytes },
      kept,
    );
    this.figureFormat = resolved.figureFormat;
    this.snapshots = new SessionSnapshots(
      id,
      home,
      { maxBytes: limits.snapshotMaxBytes, maxVariableBytes: limits.snapshotMaxVariableBytes },
      options.snapshotTransfer ?? (options.sandbox || !interpreter.local ? "stream" : "path"),
      (body, options) => this.control(body, false, options.recoverOnKill ?? true, options),
      (text) => this.notices.note(text),
    );
    this.snapshots.afterDefaultWrite = () => {
      try {
        this.keys.save(keysPath(home, id));
      } catch (err) {
        this.notices.note(`The idempotency keys of session ${id} could not be saved with its snapshot: ${(err as Error).message}`);
      }
    };
    this.calls = new CallQueue({
      refusal: () => (this.closed ? closedError(this.id) : null),
      onStart: () => {
        this.lastActiveAt = Date.now();
      },
    });
  }

  /**
   * Resolves the interpreter, starts the worker and waits for its handshake. The library's edge: the
   * options are laid over the defaults here, once (a host passes what it resolved itself).
   */
  static async start(id: string, options: ReplSessionOptions = {}): Promise<ReplSession> {
    checkSessionName(id);
    const limits = resolveLimits(options);
    if (options.figureFormat !== undefined && !FIGURE_FORMATS.includes(options.figureFormat)) {
      throw new AwreplError("usage", `figureFormat must be "png" or "svg", not ${JSON.stringify(options.figureFormat)}`);
    }
    const home = ensurePrivateDir(options.home ?? stateDir());
    const env = options.env ? { ...process.env, ...options.env } : process.env;
    const cwd = workingDirectory(options.cwd);
    // --venv: its python runs the session (the venv made first, by the interpreter chosen otherwise),
    // and a sandbox may write it, so packages installed from a cell stay.
    const venv = options.venv === undefined ? undefined : resolve(cwd, options.venv);
    // A venv a sandbox could write (it was some sandboxed session's --venv, or lies in its writable
    // directory) may hold a replaced bin/python: outside a sandbox it would run with the user's rights.
    const plantable = venv && !options.sandbox ? sandboxWrittenRoot(home, venv) : null;
    if (plantable) {
      throw new AwreplError(
        "usage",
        `--venv ${venv} lies in ${plantable}, which a sandboxed session could write (its python or packages may have been replaced there): use it from a --sandbox session, or give a new directory`,
      );
    }
    const python = venv ? await venvPython(venv, { python: options.python, env, cwd, home }) : options.python;
    if (venv && options.sandbox) options = { ...options, sandbox: { ...options.sandbox, writable: [...new Set([...(options.sandbox.writable ?? []), venv])] } };
    const interpreter = await resolveInterpreter({ python, env, cwd, home });
    const session = new ReplSession(id, options, { home, cwd, interpreter, env, limits, figureFormat: options.figureFormat ?? DEFAULTS.figureFormat });
    for (const notice of interpreter.notices ?? []) session.notices.note(notice);
    // The worker keeps the cwd off sys.path there (lib/worker/launch.ts): say why an import fails.
    const written = !options.sandbox && interpreter.local ? sandboxWrittenRoot(home, cwd) : null;
    if (written) session.notices.note(passedOver(`${cwd} as a place to import from`, written, "add it with sys.path.insert(0, '') in a cell if you trust what is there"));
    await session.ensureWorker();
    if (options.restoreOnStart) {
      try {
        session.notices.restoredAtStart(await session.snapshots.restoreAtStart(() => session.closed));
        // Kept with the snapshot: the calls whose effects it holds are not run again.
        session.keys.load(keysPath(home, id));
      } catch (err) {
        await session.close();
        throw err;
      }
    }
    return session;
  }

  get pid(): number | null {
    return this.slot.state === "ready" ? this.slot.worker.pid : null;
  }

  /** The worker runs under bubblewrap (`sandbox` option). */
  get sandboxed(): boolean {
    return Boolean(this.spec.sandbox);
  }

  /** The first result will say that this session's last stop could not save it (an older state came back, or none). */
  get toldUnsavedAtStart(): boolean {
    return this.snapshots.toldUnsaved;
  }

  get busy(): boolean {
    return this.running !== null || this.calls.waiting > 0;
  }

  info(): ReplSessionInfo {
    return {
      id: this.id,
      pid: this.pid,
      python: this.interpreter.command,
      pythonVersion: (this.slot.state === "ready" ? this.slot.worker.ready?.python : null) ?? this.interpreter.version ?? null,
      cwd: this.cwd,
      state: this.closed ? "closed" : this.busy ? "busy" : "idle",
      cellsRun: this.cellsRun,
      startedAt: this.startedAt,
      lastActiveAt: this.lastActiveAt,
    };
  }

  /** The worker's own facts (pid, host, cwd, RSS where it runs: Worker.info()), or null without a live worker. */
  workerFacts(timeoutMs?: number): Promise<WorkerFactsReport | null> {
    return this.slot.state === "ready" ? workerFacts(this.slot.worker, timeoutMs) : Promise.resolve(null);
  }

  /**
   * `onRawOutput` (not part of Session) gets live output undecoded: the supervisor forwards it as is;
   * `onStart` runs as the call gets its turn. The timeout covers the wait for the call's turn too: a
   * call still waiting when it runs out never runs, nor does one whose signal aborts before its turn;
   * the result says so (neverRanResult).
   */
  execute(code: string, options: CellOptions = {}): Promise<ExecResult> {
    if (typeof code !== "string") return Promise.reject(new AwreplError("usage", `Code must be a string, not ${typeof code}`));
    try {
      checkLimits(options);
    } catch (err) {
      return Promise.reject(err);
    }
    if (options.id !== undefined) return this.executeOnce(code, options);
    return this.executeCell(code, options);
  }

  /**
   * A call with an idempotency key: run once. A repeat gets the first result (`replayed`), waiting
   * for it if it still runs; if the first never ran (its wait ran out, it was withdrawn), this one runs.
   */
  /** What the idempotency key `key` stands for in this session now (a detached cell named by it: `wait ID`). */
  keyed(key: string): KeyState | null {
    return this.keys.lookup(key);
  }

  /** Hears each idempotency key the session drops (its bounds: lib/core/limits.ts IDEMPOTENCY). */
  set onKeyDropped(listener: ((key: string, reason: string) => void) | null) {
    this.keys.onDrop = listener;
  }

  private async executeOnce(code: string, options: CellOptions): Promise<ExecResult> {
    const turn = this.keys.claim(options.id, code);
    if (!turn.run) {
      const first = await turn.result;
      return first === null ? this.executeOnce(code, options) : { ...first, replayed: true };
    }
    let ran = false;
    const onStart = () => {
      ran = true;
      options.onStart?.();
    };
    let result: ExecResult;
    try {
      result = await this.executeCell(code, { ...options, onStart });
    } catch (err) {
      turn.forget();
      throw err;
    }
    if (ran) turn.finish(result);
    else turn.forget();
    return result;
  }

  private executeCell(code: string, options: CellOptions): Promise<ExecResult> {
    // The call's own limits, else the session's: settled here, once, for its wait and its run.
    const limits: CallLimits = { timeoutMs: options.timeoutMs ?? this.limits.timeoutMs, maxOutputBytes: options.maxOutputBytes ?? this.limits.maxOutputBytes };
    const call = new Promise<ExecResult>((resolveResult, rejectResult) => {
      this.calls
        .add(
          async (waitedMs) => {
            const { result, lostWorker } = await this.runCell(code, options, limits, waitedMs);
            // A cell that lost its worker left nothing new to save (and its replacement may be empty).
            if (!this.autosave || lostWorker || this.slot.state !== "ready") return result;
            // The result goes back at once; the autosave runs after it in the same turn of the queue, so
            // the next call (and a kill it may cause) only ever finds the namespace saved.
            resolveResult(result);
            await this.snapshots.autosave(() => this.closed);
            return result;
          },
          { waitMs: limits.timeoutMs, signal: options.signal, onStart: options.onStart },
        )
        .then(resolveResult, (err: unknown) => (err instanceof MissedTurn ? resolveResult(neverRanResult(this.id, err.waitedMs, err.reason)) : rejectResult(err)));
    });
    // A caller may await it later (after a close() that rejects it, say): not an unhandled rejection meanwhile.
    call.catch(() => {});
    return call;
  }

  /**
   * Runs `task` in this session's order, as one of its calls: once every call before it has settled
   * (a host's own step in the order: the supervisor's `open`). `options.signal` withdraws it while it
   * waits (rejected with code `cancelled`) and interrupts the request it runs once it has started.
   */
  inTurn<T>(task: () => Promise<T>, options: CallOptions = {}): Promise<T> {
    const { signal } = options;
    return this.calls
      .add(
        async () => {
          // Its caller went away (or withdrew it) while it runs: a listing stuck in a __repr__ is interrupted too.
          const onAbort = () => void this.interrupt();
          signal?.addEventListener("abort", onAbort, { once: true });
          try {
            return await task();
          } finally {
            signal?.removeEventListener("abort", onAbort);
          }
        },
        { signal, onStart: options.onStart },
      )
      .catch((err: unknown) => {
        throw err instanceof MissedTurn ? missedTurnError(this.id, err) : err;
      });
  }

  async variables(options: CallOptions = {}): Promise<Record<string, string>> {
    const done = await this.inTurn(() => this.control({ type: "variables" }), options);
    return done.variables ?? {};
  }

  async inspect(name: string, options: CallOptions & InspectOptions = {}): Promise<InspectInfo> {
    // `full` travels only when asked: the default request is the one every runtime version understands.
    const request: RequestBody = options.full ? { type: "inspect", name, full: true } : { type: "inspect", name };
    const done = await this.inTurn(() => this.control(request, false), options);
    if (done.status !== "ok" || !done.info) {
      const detail = done.reason && !done.reason.includes("not defined") ? ` (${done.reason})` : "";
      throw new AwreplError("name_not_found", `Name ${JSON.stringify(name)} is not defined in session ${this.id}${detail}`);
    }
    return done.info;
  }

  async reset(options: CallOptions = {}): Promise<void> {
    await this.inTurn(() => this.control({ type: "reset" }), options);
  }

  /** Something the next execute's result says once (`notice`): a host's word about how the session was made. */
  note(text: string): void {
    this.notices.note(text);
  }

  async interrupt(): Promise<void> {
    if (this.running) interruptByUser(this.running);
  }

  async complete(code: string, cursor?: number, options: CallOptions = {}): Promise<string[]> {
    const done = await this.inTurn(() => this.control(cursor === undefined ? { type: "complete", code } : { type: "complete", code, cursor }), options);
    return done.matches ?? [];
  }

  async isComplete(code: string, options: CallOptions = {}): Promise<{ status: CompletenessStatus; indent: string }> {
    const done = await this.inTurn(() => this.control({ type: "is_complete", code }, false), options);
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
  snapshot(path?: string, options: SnapshotCallOptions = {}): Promise<SnapshotReport> {
    return this.inTurn(() => this.snapshots.write(this.snapshotTarget(path), options.timeoutMs, options.maxVariableMs), options);
  }

  /**
   * Revives the names saved at `path` (default: defaultSnapshotPath()) into the namespace; names that
   * fail are listed in `failed`. A default snapshot that cannot be read is moved aside.
   */
  restore(path?: string, options: SnapshotCallOptions = {}): Promise<RestoreReport> {
    return this.inTurn(async () => {
      const target = this.snapshotTarget(path);
      const outcome = await this.snapshots.read(target, true, options.timeoutMs);
      if ("report" in outcome) return outcome.report;
      if (outcome.missing) throw new AwreplError("restore_failed", `No snapshot at ${target}`);
      throw new AwreplError("restore_failed", `Restore of session ${this.id} from ${target} failed: ${outcome.error}`);
    }, options);
  }

  /**
   * Stops the worker (shutdown, then a kill after a short wait). Waiting and later calls are refused.
   * Its display files go with it, unless `keepFiles`: a host that closes a session it will bring back
   * from its snapshot (a supervisor stopping or parking it) keeps the files whose paths it handed out.
   */
  close(options: { keepFiles?: boolean } = {}): Promise<void> {
    const slot = this.slot;
    if (slot.state === "closed") return slot.closing;
    const closing = (async () => {
      // A worker still starting is closed by its start (it finds the session closed).
      const worker = slot.state === "ready" ? slot.worker : slot.state === "starting" ? await slot.started.catch(() => null) : null;
      if (worker) await worker.close(Math.min(this.limits.graceMs, 1000));
      if (!options.keepFiles) this.displays.remove();
    })();
    this.become({ state: "closed", closing });
    // The calls still waiting never run: refused now, not one by one as their turns come.
    this.calls.refuseWaiting(closedError(this.id));
    return closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  // --- the worker's situation ---------------------------------------------------------------------

  private get closed(): boolean {
    return this.slot.state === "closed";
  }

  /** The one way the slot changes: every move is checked against session_state.ts's table. */
  private become(next: WorkerSlot): void {
    checkMove(this.slot.state, next.state);
    this.slot = next;
  }

  /** The live worker, or a fresh one when there is none. Not after a loss: see liveWorker(). */
  private ensureWorker(): Promise<Worker> {
    const slot = this.slot;
    switch (slot.state) {
      case "ready":
        return Promise.resolve(slot.worker);
      case "starting":
        return slot.started;
      case "closed":
        return Promise.reject(closedError(this.id));
      case "lost":
        return Promise.reject(new AwreplError("internal", `Session ${this.id} lost its worker and has not recovered from it`));
      case "none": {
        const started = startSessionWorker(this.spec, this.workerListeners()).then(
          async ({ worker, refillSpare }) => {
            if (this.closed) {
              await worker.close(0);
              throw closedError(this.id);
            }
            this.become({ state: "ready", worker });
            refillSpare();
            return worker;
          },
          (err: unknown) => {
            if (this.slot.state === "starting") this.become({ state: "none" });
            throw err;
          },
        );
        this.become({ state: "starting", started });
        return started;
      }
    }
  }

  private workerListeners(): WorkerListeners {
    return {
      onUnclaimedOutput: (stream, text) => {
        (this.stray ??= new OutputCollector(this.limits.maxOutputBytes)).add(stream, text);
      },
      // The worker is passed in: it may exit before start() returns it.
      onExit: (exit, exited) => this.lose(exited, { killed: exited.wasKilled, exit }),
    };
  }

  /**
   * `worker` is gone: if it is the session's, the session's state went with it, and the next request
   * recovers (whoever sees the loss first; a death during a call is reported by that call).
   */
  private lose(worker: Worker, loss: Loss): void {
    if (this.slot.state === "ready" && this.slot.worker === worker) this.become({ state: "lost", loss });
  }

  /**
   * The worker for the next request: after a loss (between calls, or a request the last worker never
   * got), a fresh one with the latest snapshot restored, which the next execute's result reports.
   */
  private async liveWorker(): Promise<Worker> {
    for (let restore = true;; restore = false) {
      const slot = this.slot;
      if (slot.state === "ready") return slot.worker;
      if (slot.state !== "lost") return this.ensureWorker();
      // Lost again: the replacement died during or right after its restore. Said, but the same
      // snapshot is not put into yet another worker for this request.
      this.notices.recovered(slot.loss, await this.recover(restore));
    }
  }

  /**
   * After a loss: takes it over (the caller reports it), starts a fresh worker and restores the
   * session's latest snapshot into it. Null when there is no snapshot to go back to or `restore` is
   * false (no worker is started then), or the session closed. Never throws; a snapshot that cannot be
   * restored is not tried again (a payload that kills its worker must not do so on every call).
   */
  private async recover(restore = true): Promise<Recovery | null> {
    if (this.slot.state !== "lost") return null;
    this.become({ state: "none" });
    if (!restore) return null;
    const path = this.snapshots.latest;
    if (!path || !existsSync(path)) return null;
    try {
      await this.ensureWorker();
    } catch (err) {
      return this.closed ? null : { error: (err as Error).message, state: describeSnapshot(path) };
    }
    const back = await this.snapshots.recover(describeSnapshot);
    return this.closed ? null : back;
  }

  // --- requests -----------------------------------------------------------------------------------

  /**
   * Sends one request to the live worker under a deadline (watchDeadline) and resolves with its `done`,
   * or with `done: null` and the error when the worker was lost meanwhile (the slot says lost then).
   * A request the worker never got (it was gone before the request was written, its exit not seen
   * yet) goes once more, to the worker that replaces it as after any loss between calls: it cannot
   * have run. `retry: false` is for a recovery's own restore, which must not start another recovery.
   * `handlers` is asked for once, when the worker is known.
   */
  private async send<H extends RequestHandlers | undefined>(
    body: RequestBody,
    timeoutMs: number,
    options: { handlers?: () => H; signal?: AbortSignal; retry?: boolean; onSent?: (worker: Worker, id: string) => void; payload?: () => AsyncIterable<Uint8Array> },
  ): Promise<{ done: DoneEvent | null; error: AwreplError | null; call: RunningCall; worker: Worker; handlers: H | undefined }> {
    let retry = options.retry ?? true;
    let handlers: H | undefined;
    for (;;) {
      const slot = this.slot;
      const worker = slot.state === "ready" ? slot.worker : await this.liveWorker();
      handlers ??= options.handlers?.();
      const pending = worker.request(body, handlers, options.payload?.());
      options.onSent?.(worker, worker.lastId);
      const call = watchDeadline(worker, worker.lastId, timeoutMs, this.limits.graceMs);
      // interrupt() reaches any request (a client that went away, say), unless it runs inside a
      // cell's turn (an autosave), which interrupt() already targets.
      const own = this.running === null;
      if (own) this.running = call;
      const unhook = interruptOnAbort(call, options.signal);
      try {
        return { done: await pending, error: null, call, worker, handlers };
      } catch (err) {
        if (!(err instanceof AwreplError) || err.code !== "worker_died") throw err;
        // Usually said already by the worker's exit listener, which runs before this rejection.
        this.lose(worker, { killed: call.killed || worker.wasKilled, exit: worker.exit });
        if (err instanceof UndeliveredRequestError && retry) {
          retry = false;
          continue;
        }
        return { done: null, error: err, call, worker, handlers };
      } finally {
        call.disarm();
        unhook();
        if (own && this.running === call) this.running = null;
      }
    }
  }

  /**
   * One non-execute request under the same deadline as a cell (or `extra.timeoutMs`): interrupted at
   * the deadline, the worker killed after the grace period (a wedged worker must not hang the
   * caller). `okOnly` turns a failed `done` into an error carrying its reason. `recoverOnKill: false`
   * is a recovery's own restore. `extra.handlers` hear the request's events (a snapshot's payload);
   * `extra.onSent` runs once the request is written (a restore's payload follows it).
   */
  private async control(body: RequestBody, okOnly = true, recoverOnKill = true, extra: ControlExtras = {}): Promise<DoneEvent> {
    const timeoutMs = extra.timeoutMs ?? this.limits.timeoutMs;
    const handlers = extra.handlers;
    const { done, error, call, worker } = await this.send(body, timeoutMs, { retry: recoverOnKill, handlers: handlers && (() => handlers), onSent: extra.onSent, payload: extra.payload });
    if (done === null) {
      // A death of its own: the next request recovers from it (and the next execute says so).
      if (!call.killed) throw error;
      const exceeded = `The ${body.type} request exceeded the ${timeoutMs} ms timeout; the worker was killed`;
      // Without recoverOnKill the loss stays for the recovery around this request to report.
      const back = recoverOnKill ? await this.recover() : null;
      if (back && "report" in back) throw new AwreplError("timeout", `${exceeded} and the session went back to ${back.state}`);
      if (recoverOnKill) this.notices.lost({ killed: true, exit: worker.exit });
      const why = back ? ` (${back.state} could not be restored: ${back.error})` : "";
      throw new AwreplError("timeout", `${exceeded} and the session's state was lost${why}`);
    }
    if (call.timedOut && done.status !== "ok") {
      throw new AwreplError("timeout", `The ${body.type} request exceeded the ${timeoutMs} ms timeout and was interrupted`);
    }
    if (okOnly && done.status !== "ok") {
      throw new AwreplError("internal", `The runtime refused ${body.type} in session ${this.id}: ${done.reason ?? "no reason given"}`);
    }
    return done;
  }

  /** Runs one cell under its call's limits (`own`); `waitedMs` of its timeout went to waiting for its turn. */
  private async runCell(code: string, options: CellOptions, own: CallLimits, waitedMs: number): Promise<{ result: ExecResult; lostWorker: boolean }> {
    const limits = { timeoutMs: own.timeoutMs, graceMs: this.limits.graceMs };
    const deadline = limits.timeoutMs > 0 ? Math.max(1, limits.timeoutMs - waitedMs) : 0;
    // `filename` (run -f): the runtime names the file in tracebacks and sets __file__ for the cell.
    const request: RequestBody = options.filename ? { type: "execute", code, filename: options.filename } : { type: "execute", code };
    // The runtime stops building display entries past the cap (1,000 figures are not all rendered).
    if (this.limits.displayMaxEntries > 0) request.max_display_entries = this.limits.displayMaxEntries;
    if (this.figureFormat !== "png") request.figure_format = this.figureFormat;
    // Always sent: the runtime reads a missing field as its own default, not as "no limit".
    request.max_display_payload_bytes = this.limits.displayMaxPayloadBytes;
    const sent = await this.send(request, deadline, {
      handlers: () => this.cellRecorder(own.maxOutputBytes, options),
      signal: options.signal,
    });
    const { done, call, worker } = sent;
    const recorder = sent.handlers as CellRecorder;
    // Taken after the send: a recovery before it (a loss between calls) is this result's to say.
    const told = this.notices.take();
    let result: ExecResult;
    if (done !== null) {
      result = recorder.finish(done, call, limits, this.id, told.notice);
      if (told.restored) result.restored = told.restored;
    } else {
      // The worker is gone (killed at the deadline, or dead): go back to the latest snapshot if there
      // is one, before answering, so the result can say which state the session is in now.
      const back = await this.recover();
      result = recorder.lost(call, worker.exit, limits, this.id, told.notice, back === null ? undefined : aftermath(back));
      if (back && "report" in back) result.restored = back.report;
      else this.notices.lost({ killed: call.killed, exit: worker.exit });
    }
    this.cellsRun++;
    this.lastActiveAt = Date.now();
    return { result, lostWorker: done === null };
  }

  /**
   * The recorder of the next cell. Output that arrived between cells (background threads) opens its
   * output: in the result, and live, so that a live echo shows it once and in its place.
   */
  private cellRecorder(limit: number, live: LiveOutput): CellRecorder {
    const displays = new CellDisplays(this.displays, this.limits.displayMaxEntries, limit);
    const stray = this.stray;
    if (!stray) return new CellRecorder(new OutputCollector(limit), displays, live);
    this.stray = null;
    const opening = stray.result();
    let collector = stray;
    if (stray.limit !== byteLimit(limit)) {
      collector = new OutputCollector(limit);
      collector.add("stdout", opening.stdout);
      collector.add("stderr", opening.stderr);
    }
    const recorder = new CellRecorder(collector, displays, live);
    recorder.replayLive("stdout", opening.stdout);
    recorder.replayLive("stderr", opening.stderr);
    return recorder;
  }

  private snapshotTarget(path?: string): string {
    return path ? resolve(this.cwd, path) : this.snapshots.defaultPath();
  }
}

/** A non-execute call that never got its turn (an execute's result says so instead: neverRanResult). */
function missedTurnError(id: string, missed: MissedTurn): AwreplError {
  if (missed.reason.why === "withdrawn") return new AwreplError("cancelled", `Withdrawn before it ran (it waited for its turn in session ${id})`);
  return new AwreplError("timeout", `The call waited ${missed.reason.timeoutMs} ms for its turn in session ${id} and never ran`);
}

/** The worker's working directory, absolute; one that does not exist is the caller's error, said as such. */
function workingDirectory(cwd: string | undefined): string {
  const dir = resolve(cwd ?? process.cwd());
  const st = statSync(dir, { throwIfNoEntry: false });
  if (!st) throw new AwreplError("usage", `The working directory ${JSON.stringify(dir)} does not exist`);
  if (!st.isDirectory()) throw new AwreplError("usage", `The working directory ${JSON.stringify(dir)} is not a directory`);
  return dir;
}

function closedError(id: string): AwreplError {
  return new AwreplError("worker_closed", `Session ${id} is closed`);
}
