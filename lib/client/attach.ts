// The library's way to a supervisor-held session: attach(name) returns a Session (the interface
// ReplSession implements) whose worker lives in the background supervisor, so a TypeScript agent and
// a shell (`awrepl -s name run ...`) share one live namespace, and where the library's camelCase
// options become the protocol's snake_case requests. The calls about the supervisor and its sessions
// as a whole (`sessions`, `close`, `daemon`) are in daemon.ts. Each entry point resolves the state
// directory's layout once (layoutOf) and passes it down.
// Keep this module's imports small and free of node: modules: it is on the CLI's hot path.
import { SupervisorConnection } from "./connection.ts";
import { connectFast, connectSupervisor } from "./start.ts";
import { AwreplError } from "../core/errors.ts";
import { answerHostRequest } from "../core/host_bridge.ts";
import { checkSessionName } from "../core/names.ts";
import type { RawText } from "../wire/output_frames.ts";
import type { CollectValue, HistoryValue, RequestId, SessionSpec } from "../protocol/supervisor.ts";
import type { ExecResult, RestoreReport } from "../protocol/result.ts";
import type { InspectInfo } from "../protocol/runtime.ts";
import { type HomeLayout, layoutOf } from "../settings/home.ts";
import type { CompletenessStatus, ExecuteOptions, InspectOptions, SandboxProfile, Session, SessionOptions, SnapshotReport } from "../protocol/api.ts";

export type { ClientOptions } from "../settings/home.ts";

/**
 * SessionOptions say how the session is created if it does not exist yet (an existing session keeps
 * the interpreter, directory and environment it started with); `clientEnv` is the caller's
 * environment, used to find the state directory (unless `home` or `layout` is given) and to start the
 * supervisor.
 */
export type AttachOptions = Omit<SessionOptions, "sandbox"> & {
  clientEnv?: NodeJS.ProcessEnv;
  /** The state directory's layout, already resolved (a command resolves it once); beats `home` and `clientEnv`. */
  layout?: HomeLayout;
  /**
   * The interpreter to use when `python` is not given (a config default): unlike `python`, a
   * session re-created from its snapshot keeps the interpreter it was created with instead.
   */
  defaultPython?: string;
  /** Only an existing session, or one with a snapshot to restore: never create a fresh one (session_not_found). */
  existing?: boolean;
  /**
   * Create the session in a sandbox with this profile (`--sandbox`); false: explicitly none. A live
   * session, or one re-created from its saved spec, keeps its own (a different ask is said in `notice`).
   */
  sandbox?: SandboxProfile | false;
  /**
   * For a long-lived client (`serve`): a call that is safe to repeat (variables, inspect, reset,
   * complete, is_complete) and that the supervisor's going away cut off is sent again at once, to a
   * new supervisor; and any call that finds the supervisor gone or stopping makes the next one
   * connect again. A cell, snapshot or restore is never sent twice: it may have run.
   */
  resendSafeCalls?: boolean;
  /**
   * Hears what the supervisor says beside an answer: this call asked the live session for another
   * interpreter or sandbox than it has, which it keeps (an execute's result carries it in `notice`).
   */
  onNotice?: (text: string) => void;
};

export async function attach(name: string, options: AttachOptions = {}, early?: EarlyConnection): Promise<RemoteSession> {
  checkSessionName(name);
  const env = options.clientEnv ?? process.env;
  const layout = early?.layout ?? layoutOf({ env, home: options.home, layout: options.layout });
  // No round trip here: the first call carries the session's spec and creates it if needed.
  const conn = (await early?.conn) ?? (await connectFast(layout, env));
  return new RemoteSession(name, conn, { spec: sessionSpec(options, env), layout, env, resendSafeCalls: options.resendSafeCalls === true, onNotice: options.onNotice });
}

/** RemoteSession.execute's options: Session's, plus undecoded live output and a live-output limit. */
export type RemoteExecuteOptions = ExecuteOptions & {
  onRawOutput?(stream: "stdout" | "stderr", raw: RawText): void;
  liveLimit?: number;
};

/**
 * A cell sent with `detach` (RemoteSession.executeDetached): it runs to its end even if this process
 * goes away, and its result is then kept in the session for `collect`.
 */
export type DetachedCell = {
  /** The result, when this process is still there to receive it. */
  readonly result: Promise<ExecResult>;
  /**
   * Have the supervisor also keep the result for `collect` (it still arrives in `result`): for a
   * caller that may end before it hands the result on. False when the cell already finished: `result`
   * is then settled, or about to be.
   */
  keepResult(): Promise<boolean>;
};

/**
 * What `collect` found: a detached cell's result (`mine`: it was sent through this RemoteSession's
 * connection), a cell still running (`elapsedMs` null: still queued behind another call), or nothing
 * to wait for. A kept result is handed out once.
 */
export type Collected =
  | { state: "done"; result: ExecResult; mine: boolean; finishedMsAgo?: number }
  /** `output`: wait(id, {output: true}) of a cell still running: its latest output so far (bounded). */
  | { state: "running"; elapsedMs: number | null; mine: boolean; output?: string }
  | { state: "idle" }
  /** wait(id): the session no longer keeps that cell's result (`reason`: its bounds, or the call never ran). */
  | { state: "dropped"; reason: string };

/** A connection (and its hello) on its way, started before attach() (see connectEarly). */
export type EarlyConnection = { layout: HomeLayout; conn: Promise<SupervisorConnection | null> };

/**
 * Starts connecting to the supervisor and sends hello, for a later attach(name, options, early) with
 * the same `layout`/`home`/`clientEnv`: the CLI reads its cell and config meanwhile, so the connection's
 * set-up on both sides is off the critical path. Resolves null when no supervisor listens (attach starts one).
 */
export function connectEarly(options: Pick<AttachOptions, "home" | "clientEnv" | "layout"> = {}): EarlyConnection {
  const layout = layoutOf({ env: options.clientEnv, home: options.home, layout: options.layout });
  // The CLI's `run` is the one caller: its hello leaves the build out (SupervisorConnection.connect).
  const conn = SupervisorConnection.connect(layout, { build: false });
  conn.catch(() => {}); // reported by attach(), if it is ever called
  return { layout, conn };
}

type RemoteSessionSetup = {
  /** How the session is created when a call finds it missing. */
  spec: SessionSpec;
  layout: HomeLayout;
  /** The caller's environment, to start a supervisor with. */
  env: NodeJS.ProcessEnv;
  resendSafeCalls: boolean;
  onNotice?: (text: string) => void;
};

/** Whether sending a call again after the supervisor went away mid-call is harmless. */
type Repeat = "safe" | "once";

/**
 * A session held by the supervisor. `close()` (and `await using`) only detaches this client: the
 * session lives on for other clients and later shell calls. `closeSession(name)` ends it.
 *
 * Reconnecting lives here, and only here. A connection that is gone (daemon stop, a crash) is replaced
 * before the next call, which starts a supervisor if none runs; the session is re-created from its
 * spec, restored from its snapshot when it has one, and a result says when the state is gone. A call
 * that provably never ran (the supervisor is another version, or closed before answering hello) is
 * sent again, once; with `resendSafeCalls`, so is a call safe to repeat that was cut off.
 */
export class RemoteSession implements Session {
  /** A call of ours has reached the session (so a later re-creation means lost state). */
  private used = false;
  /** A call found the supervisor gone or stopping: the next one connects again (resendSafeCalls). */
  private stale = false;
  /** close() was called: every call is refused from then on, on every runtime (never a reconnect). */
  private closed = false;

  constructor(
    readonly id: string,
    private conn: SupervisorConnection,
    private readonly setup: RemoteSessionSetup,
  ) {
    conn.onNotice = setup.onNotice;
  }

  /**
   * `onRawOutput` (not part of Session) gets live output undecoded, as ReplSession's does.
   * `liveLimit` (not part of Session): the caller shows only this many bytes of live stdout/stderr,
   * so the supervisor need not send more.
   */
  async execute(code: string, options: RemoteExecuteOptions = {}): Promise<ExecResult> {
    return this.executeCall(code, options, false);
  }

  /**
   * Sends the cell detached: it keeps its place and runs to its end when this process (or its
   * connection) goes away, and a result nobody received is kept in the session for `collect`.
   */
  executeDetached(code: string, options: RemoteExecuteOptions = {}): DetachedCell {
    let sent: { conn: SupervisorConnection; id: RequestId } | null = null;
    let settled = false;
    let onSent: () => void = () => {};
    const ready = new Promise<void>((resolve) => {
      onSent = resolve;
    });
    const result = this.executeCall(code, options, true, (conn, id) => {
      sent = { conn, id };
      onSent();
    });
    const done = result.then(
      () => {},
      () => {},
    );
    void done.then(() => {
      settled = true;
      onSent();
    });
    return {
      result,
      keepResult: async () => {
        this.refuseIfClosed();
        await ready;
        const where = sent as { conn: SupervisorConnection; id: RequestId } | null;
        if (settled || !where || where.conn.closed) return false;
        return (await where.conn.call({ type: "keep_result", target: where.id })).kept;
      },
    };
  }

  /**
   * A detached cell's result (collect): the session's kept result at once, else waits up to `waitMs`
   * for its oldest detached cell still queued or running. `signal` gives up waiting (taking nothing).
   */
  async collect(waitMs = 0, options: { signal?: AbortSignal } = {}): Promise<Collected> {
    const { signal } = options;
    signal?.throwIfAborted?.();
    return this.send("once", async (conn) => {
      const call = conn.call({ type: "collect", session: this.id, wait_ms: waitMs });
      const onAbort = () => conn.notify({ type: "cancel", target: call.id });
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        return collected(await call);
      } finally {
        signal?.removeEventListener("abort", onAbort);
      }
    });
  }

  /**
   * The cell named `id` (the idempotency key it was sent with: `executeDetached(code, {id})`, `run
   * --detach`), from any process: its result once it finishes (waiting up to `waitMs`, default 0:
   * just look), `running` with how long, or `dropped` when the session no longer keeps it. Unlike
   * collect(), the result stays (within the key's bounds, lib/core/limits.ts IDEMPOTENCY); an id the
   * session never saw is a usage error.
   */
  async wait(id: string, options: { waitMs?: number; output?: boolean } = {}): Promise<Collected> {
    const request = { type: "collect", session: this.id, key: id, wait_ms: options.waitMs ?? 0, ...(options.output ? { output: true } : {}) } as const;
    return this.send("safe", async (conn) => collected(await conn.call(request)));
  }

  private async executeCall(code: string, options: RemoteExecuteOptions, detach: boolean, onSent?: (conn: SupervisorConnection, id: RequestId) => void): Promise<ExecResult> {
    const { onOutput, onDisplay, onRawOutput, onHostRequest, signal } = options;
    signal?.throwIfAborted?.();
    // Live output goes undecoded to onRawOutput, or decoded to onOutput.
    const output = onRawOutput ?? (onOutput ? (stream: "stdout" | "stderr", raw: RawText) => onOutput(stream, raw.text()) : undefined);
    // A cell with an idempotency key runs once however often it is sent: safe to send again.
    return this.send(options.id === undefined ? "once" : "safe", async (conn) => {
      const call = conn.execute(
        {
          type: "execute",
          session: this.id,
          code,
          timeout_ms: options.timeoutMs,
          max_output_bytes: options.maxOutputBytes,
          stream: Boolean(output || onDisplay),
          live_limit: options.liveLimit,
          spec: this.setup.spec,
          known: this.used,
          filename: options.filename,
          detach: detach || undefined,
          host_bridge: onHostRequest ? true : undefined,
          idempotency_key: options.id,
        },
        {
          output,
          display: onDisplay,
          // The cell's host requests, answered by the caller's handler (lib/core/host_bridge.ts).
          hostRequest: onHostRequest
            ? (hostId, data) => void answerHostRequest(onHostRequest, data).then((answer) => conn.notify({ type: "host_reply", target: call.id, host_id: hostId, data: answer }))
            : undefined,
        },
      );
      onSent?.(conn, call.id);
      const onAbort = () => conn.notify({ type: "cancel", target: call.id });
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        const result = await call;
        this.used = true;
        return result;
      } finally {
        signal?.removeEventListener("abort", onAbort);
      }
    });
  }

  variables(): Promise<Record<string, string>> {
    return this.send("safe", (c) => c.call({ type: "variables", session: this.id, spec: this.setup.spec }));
  }

  inspect(name: string, options: InspectOptions = {}): Promise<InspectInfo> {
    const full = options.full ? { full: true } : {};
    return this.send("safe", (c) => c.call({ type: "inspect", session: this.id, name, ...full, spec: this.setup.spec }));
  }

  /**
   * The session's history (docs/history.md): each cell's code, who ran it, when, and its result as
   * that caller got it, oldest first; `last`: only the newest N cells. Answered at once, even while a
   * cell runs; a session that is not running answers from the file kept beside its snapshot.
   */
  history(options: { last?: number } = {}): Promise<HistoryValue> {
    const last = options.last;
    if (last !== undefined && !(Number.isInteger(last) && last >= 0)) throw new AwreplError("usage", `history's last must be a whole number of cells, not ${JSON.stringify(last)}`);
    return this.send("safe", (c) => c.call({ type: "history", session: this.id, ...(last !== undefined ? { last } : {}) }));
  }

  async reset(): Promise<void> {
    await this.send("safe", (c) => c.call({ type: "reset", session: this.id, spec: this.setup.spec }));
  }

  async interrupt(): Promise<void> {
    await this.send("once", (c) => c.call({ type: "interrupt", session: this.id }));
  }

  complete(code: string, cursor?: number): Promise<string[]> {
    return this.send("safe", (c) => c.call({ type: "complete", session: this.id, code, cursor, spec: this.setup.spec }));
  }

  isComplete(code: string): Promise<{ status: CompletenessStatus; indent: string }> {
    return this.send("safe", (c) => c.call({ type: "is_complete", session: this.id, code, spec: this.setup.spec }));
  }

  /** `timeoutMs`: this call's deadline instead of the session's. */
  snapshot(path?: string, options: { timeoutMs?: number } = {}): Promise<SnapshotReport> {
    return this.send("once", (c) => c.call({ type: "snapshot", session: this.id, path, timeout_ms: options.timeoutMs, spec: this.setup.spec }));
  }

  /** `timeoutMs`: this call's deadline instead of the session's (a large file, a slow link). */
  restore(path?: string, options: { timeoutMs?: number } = {}): Promise<RestoreReport> {
    return this.send("once", (c) => c.call({ type: "restore", session: this.id, path, timeout_ms: options.timeoutMs, spec: this.setup.spec }));
  }

  /**
   * Detaches: the session stays in the supervisor. Every later call on this object rejects at once
   * with session_closed, and so does a call still waiting for its answer (a detached cell runs on).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.conn.close(this.closedError());
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Sends a call on the current connection, replacing it first when it is gone, and again when it may. */
  private async send<T>(repeat: Repeat, request: (conn: SupervisorConnection) => Promise<T>): Promise<T> {
    this.refuseIfClosed();
    if (this.conn.closed || this.stale) await this.reconnect();
    const conn = this.conn;
    try {
      return await request(conn);
    } catch (err) {
      const cutOff = this.setup.resendSafeCalls && err instanceof AwreplError && err.code === "supervisor_unreachable";
      if (cutOff) this.stale = true;
      if (!conn.neverRan(err) && !(cutOff && repeat === "safe")) throw err;
      await this.reconnect();
      return request(this.conn);
    }
  }

  private async reconnect(): Promise<void> {
    this.conn.close();
    const conn = (await connectSupervisor(this.setup.layout, { autostart: true, env: this.setup.env })) as SupervisorConnection;
    // close() came while connecting: a connection kept now would hold the process open, unused.
    if (this.closed) {
      conn.close();
      this.refuseIfClosed();
    }
    this.conn = conn;
    this.conn.onNotice = this.setup.onNotice;
    this.stale = false;
  }

  private refuseIfClosed(): void {
    if (this.closed) throw this.closedError();
  }

  private closedError(): AwreplError {
    const name = JSON.stringify(this.id);
    return new AwreplError(
      "session_closed",
      `RemoteSession ${name} is closed (its close() was called): no call goes through it any more; the session itself lives on in the supervisor: attach(${name}) to use it again`,
    );
  }
}

/** A `collect` reply as the library shows it. */
export function collected(value: CollectValue): Collected {
  if (value.state === "running") return { state: "running", elapsedMs: value.elapsed_ms, mine: value.mine, ...(value.output !== undefined ? { output: value.output } : {}) };
  if (value.state === "done" && value.finished_ms_ago !== undefined) return { state: "done", result: value.result, mine: value.mine, finishedMsAgo: value.finished_ms_ago };
  return value;
}

/**
 * What the supervisor needs to create the session as if this process had: its directory, its
 * environment and its interpreter choice (the supervisor's own environment and directory are someone else's).
 */
function sessionSpec(options: AttachOptions, env: NodeJS.ProcessEnv): SessionSpec {
  const cwd = options.cwd ?? process.cwd();
  return {
    // AWREPL_PYTHON is not in the env sent (callerEnv); $VIRTUAL_ENV and ./.venv are resolved by the
    // supervisor from the cwd and env sent, by the one rule (lib/worker/interpreter.ts chooseCommand).
    python: options.python ?? options.defaultPython ?? env.AWREPL_PYTHON,
    python_given: options.python !== undefined || undefined,
    // Resolved here: the supervisor's directory is not the caller's.
    venv: options.venv === undefined ? undefined : absolutePath(cwd, options.venv),
    sandbox: options.sandbox,
    cwd,
    // The whole environment, as an ephemeral run gets it: the supervisor's is whoever started it.
    env: { ...callerEnv(env), ...options.env },
    timeout_ms: options.timeoutMs,
    max_output_bytes: options.maxOutputBytes,
    grace_ms: options.graceMs,
    // Checked where the worker is planned (the supervisor's answer names a bad one).
    limits: options.limits,
    autosave: options.autosave,
    existing: options.existing || undefined,
  };
}

/** `path` against `cwd` (no node:path on this hot-path module). */
function absolutePath(cwd: string, path: string): string {
  return path.startsWith("/") ? path : `${cwd.replace(/\/+$/, "")}/${path}`;
}

/**
 * The caller's environment for a session it creates, minus awrepl's own settings (AWREPL_*: the
 * session, home, interpreter and limits of this call, not of the code the session runs).
 */
export function callerEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && !k.startsWith("AWREPL_")) out[k] = v;
  return out;
}
