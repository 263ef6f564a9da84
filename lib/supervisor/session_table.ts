// The supervisor's named sessions: each has its own FIFO of calls (one runs at a time, in arrival
// order), so a busy session never delays another. A call belongs to the connection that sent it:
// when that connection goes away its queued calls are dropped and its running cell is interrupted —
// except a detached execute, which runs to its end anyway. A detached call's result that cannot be
// delivered (its connection is gone) or that its client asked to keep is kept in the session, one per
// session (the next replaces it), until a `collect` hands it out; `collect` also waits for the
// session's detached calls still queued or running. An agent host that kills and restarts its MCP
// server (a client like any other) thus loses neither the cell nor its result.
// A call that waits behind others waits no longer than its timeout: one still waiting when that runs
// out, or withdrawn by its client, never runs, and is answered so.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { AwreplError } from "../core/errors.ts";
import type { ExecResult } from "../protocol/result.ts";
import type { CollectValue, RequestId, SessionInfo, SessionSpec } from "../protocol/supervisor.ts";
import type { NeverRan } from "../session/cell.ts";
import type { ReplSession } from "../session/session.ts";

/** How long `sessions` waits for a worker's own facts before it shows the last ones. */
const FACTS_TIMEOUT_MS = 500;

export type SessionFactory = (name: string, spec: SessionSpec) => Promise<ReplSession>;

/** One request waiting for (or holding) its session. */
export type Call = {
  owner: object;
  id: RequestId;
  readonly abort: AbortController;
  /** A detached execute: it outlives its connection, and its result may be kept for `collect`. */
  readonly detach?: boolean;
  /** `waitedMs`: how long it waited for its turn behind other calls (its timeout covers that time too). */
  run(session: ReplSession, signal: AbortSignal, waitedMs: number): Promise<void>;
  fail(error: AwreplError): void;
  /** How long it may wait for its turn behind other calls (0: no bound), given the session if it runs yet. Default: no bound. */
  waitLimit?(session: ReplSession | null): number;
  /** Answers a call that never ran: its wait ran out, or its client withdrew it. Without it, fail() says so. */
  neverRan?(reason: NeverRan, waitedMs: number): void;
  /** Delivers its client's answer to one of its host requests (an execute with host_bridge); false when nothing waits for it. */
  hostReply?(hostId: string, data: Record<string, unknown>): boolean;
  /** Its connection went away while it runs on (a detached call). */
  ownerGone?(): void;
};

/** What the table knows of a detached call besides the Call itself. */
type Detached = {
  /** Its connection went away: the result has nobody to go to but `collect`. */
  ownerGone: boolean;
  /** Its client asked (keep_result) for the result to be kept even though it is sent there too. */
  keep: boolean;
  /** When it began running (Date.now()); null while queued. */
  startedAt: number | null;
};

/** A `collect` waiting for the session's oldest detached call. */
type Collector = {
  owner: object;
  id: RequestId;
  timer: ReturnType<typeof setTimeout>;
  resolve(value: CollectValue): void;
};

/** A call waiting behind others: since when, and the timer that ends its wait. */
type Wait = { since: number; timer: ReturnType<typeof setTimeout> | undefined };

type Entry = {
  name: string;
  spec: SessionSpec;
  session: ReplSession | null;
  createdAt: number;
  lastUsedAt: number;
  running: Call | null;
  queue: Call[];
  closed: boolean;
  /** The latest detached result nobody has collected (and who sent the cell): one per session, replaced by the next. */
  kept: { result: ExecResult; owner: object } | null;
  collectors: Collector[];
};

export class SessionTable {
  private readonly entries = new Map<string, Entry>();
  private readonly detached = new WeakMap<Call, Detached>();
  /** The calls waiting behind others (not the first call of a session that is starting). */
  private readonly waits = new Map<Call, Wait>();

  constructor(
    private readonly factory: SessionFactory,
    /** Called when the set of sessions changes (the supervisor's idle timer listens). */
    private readonly onChange: () => void,
    private readonly log: (line: string) => void,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get names(): string[] {
    return [...this.entries.keys()];
  }

  /** The sessions whose worker has started, by name (what a stop snapshots). */
  live(): [string, ReplSession][] {
    return [...this.entries.values()].filter((e) => e.session !== null).map((e) => [e.name, e.session as ReplSession]);
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /**
   * Queues `call` on the session. A missing session is created from `spec`; without a spec the
   * call fails with session_not_found. Resolves whether the session was created by this call.
   */
  submit(name: string, spec: SessionSpec | undefined, call: Call): boolean {
    let entry = this.entries.get(name);
    let created = false;
    if (!entry) {
      if (!spec) {
        call.fail(new AwreplError("session_not_found", `No session named ${JSON.stringify(name)}`));
        return false;
      }
      entry = this.create(name, spec);
      created = true;
    }
    if (call.detach) this.detached.set(call, { ownerGone: false, keep: false, startedAt: null });
    const behind = entry.running !== null || entry.queue.length > 0;
    entry.queue.push(call);
    this.pump(entry);
    if (behind && entry.queue.includes(call)) this.startWait(entry, call);
    return created;
  }

  /** Interrupts the running cell of a session. Resolves false when nothing was running. */
  async interrupt(name: string): Promise<boolean> {
    const entry = this.entries.get(name);
    if (!entry?.session || !entry.running) return false;
    await entry.session.interrupt();
    return true;
  }

  /**
   * Withdraws one call of `owner`: dropped if queued, its cell interrupted if running (a detached
   * one's result is then not kept: its client said it does not want it); a waiting collect of
   * `owner` answers at once, taking no result.
   */
  cancel(owner: object, id: RequestId): boolean {
    for (const entry of this.entries.values()) {
      const i = entry.queue.findIndex((c) => c.owner === owner && c.id === id);
      if (i >= 0) {
        const [call] = entry.queue.splice(i, 1) as [Call];
        const waitedMs = this.endWait(call);
        if (call.neverRan) call.neverRan({ why: "withdrawn" }, waitedMs);
        else call.fail(new AwreplError("cancelled", `Withdrawn before it ran (it waited for its turn in session ${entry.name})`));
        this.wake(entry);
        return true;
      }
      if (entry.running?.owner === owner && entry.running.id === id) {
        const detached = this.detached.get(entry.running);
        if (detached) detached.keep = false;
        entry.running.abort.abort();
        return true;
      }
      const collector = entry.collectors.find((c) => c.owner === owner && c.id === id);
      if (collector) {
        this.settle(entry, collector, this.peek(entry, owner));
        return true;
      }
    }
    return false;
  }

  /** Delivers `owner`'s answer to a host request of its running call `id`; false when no such call waits for it. */
  hostReply(owner: object, id: RequestId, hostId: string, data: Record<string, unknown>): boolean {
    for (const entry of this.entries.values()) {
      const call = entry.running;
      if (call?.owner === owner && call.id === id) return call.hostReply?.(hostId, data) ?? false;
    }
    return false;
  }

  /**
   * The connection `owner` went away: nobody waits for its calls any more. Its detached calls run on
   * (their results are kept); the others are dropped, or interrupted if running.
   */
  dropOwner(owner: object): void {
    for (const entry of this.entries.values()) {
      for (const call of [entry.running, ...entry.queue]) {
        const detached = call?.owner === owner ? this.detached.get(call) : undefined;
        if (detached) detached.ownerGone = true;
      }
      for (const call of entry.queue) if (call.owner === owner && !call.detach) this.endWait(call);
      entry.queue = entry.queue.filter((c) => c.owner !== owner || c.detach);
      for (const c of entry.collectors.filter((c) => c.owner === owner)) this.settle(entry, c, null);
      if (entry.running?.owner !== owner) continue;
      if (entry.running.detach) {
        this.log(`session ${entry.name}: client went away; its detached call ${String(entry.running.id)} runs on and its result is kept`);
        entry.running.ownerGone?.();
      } else {
        this.log(`session ${entry.name}: client went away, interrupting its call ${String(entry.running.id)}`);
        entry.running.abort.abort();
      }
    }
  }

  /** keep_result: keep the result of `owner`'s detached call `id` for collect. False when it is not queued or running. */
  keepResult(owner: object, id: RequestId): boolean {
    for (const entry of this.entries.values()) {
      const call = [entry.running, ...entry.queue].find((c) => c?.owner === owner && c.id === id);
      if (!call) continue;
      const detached = this.detached.get(call);
      if (!detached) throw new AwreplError("usage", `Request ${JSON.stringify(id)} is not a detached execute: only a detached cell's result can be kept`);
      detached.keep = true;
      return true;
    }
    return false;
  }

  /**
   * collect: the kept result at once (handed out, then forgotten); otherwise waits up to `waitMs`
   * for the session's oldest detached call still queued or running, and answers `running` if it is
   * not done by then; `idle` when there is none.
   */
  collect(owner: object, id: RequestId, name: string, waitMs: number): Promise<CollectValue> {
    const entry = this.entries.get(name);
    if (!entry) return Promise.reject(new AwreplError("session_not_found", `No session named ${JSON.stringify(name)} is running`));
    const now = this.peek(entry, owner, true);
    if (now.state !== "running" || waitMs <= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      const collector: Collector = { owner, id, resolve, timer: setTimeout(() => this.settle(entry, collector, this.peek(entry, owner)), waitMs) };
      entry.collectors.push(collector);
    });
  }

  /**
   * A detached call's result, before it is sent: the collects waiting get it, and it is kept when its
   * client is gone or asked to keep it (and no collect took it). Returns whether to send it to the client.
   */
  finishDetached(name: string, call: Call, result: ExecResult): boolean {
    const detached = this.detached.get(call);
    const entry = this.entries.get(name);
    if (!detached || !entry) return true;
    const keep = detached.ownerGone || detached.keep;
    const waiting = entry.collectors.splice(0);
    for (const c of waiting) this.settle(entry, c, { state: "done", result, mine: c.owner === call.owner });
    if (keep && waiting.length === 0) {
      entry.kept = { result, owner: call.owner };
      this.log(`session ${name}: kept the result of detached call ${String(call.id)} (${result.status}) for collect`);
    }
    return !detached.ownerGone;
  }

  /**
   * Names of the sessions with no call running or queued for at least `ms` (and a live worker).
   */
  idleFor(ms: number): [string, ReplSession][] {
    const now = Date.now();
    return [...this.entries.values()]
      .filter((e) => e.session !== null && !e.running && e.queue.length === 0 && !e.session.busy && now - Math.max(e.lastUsedAt, e.session.lastActiveAt) >= ms)
      .map((e) => [e.name, e.session as ReplSession]);
  }

  /** Closes `name` only if nothing runs or waits in it now (a call may have arrived meanwhile). */
  async closeIfIdle(name: string): Promise<boolean> {
    const entry = this.entries.get(name);
    if (!entry || entry.running || entry.queue.length > 0 || entry.session?.busy) return false;
    return this.close(name, { keepFiles: true });
  }

  /**
   * Ends a session's worker. Its queued calls fail; its running call ends with the worker. With
   * `keepFiles` (the session comes back from its snapshot) its display files stay.
   */
  async close(name: string, options: { keepFiles?: boolean } = {}): Promise<boolean> {
    const entry = this.entries.get(name);
    if (!entry) return false;
    entry.closed = true;
    this.entries.delete(name);
    const closedError = new AwreplError("session_closed", `Session ${JSON.stringify(name)} was closed before this call ran (close, or the supervisor stopping); nothing of it ran`);
    for (const call of entry.queue.splice(0)) {
      this.endWait(call);
      call.fail(closedError);
    }
    entry.kept = null;
    this.wake(entry);
    this.log(`session ${name}: closing`);
    this.onChange();
    await entry.session?.close(options);
    return true;
  }

  async closeAll(options: { keepFiles?: boolean } = {}): Promise<string[]> {
    const names = this.names;
    await Promise.all(names.map((n) => this.close(n, options)));
    return names;
  }

  /**
   * The sessions as `sessions` shows them. Pid, host, cwd and RSS are the worker's own (asked in band:
   * behind ssh or bwrap the local process is only the transport); a worker that cannot answer within
   * FACTS_TIMEOUT_MS (a C loop holds the GIL) shows its last facts.
   */
  async list(): Promise<SessionInfo[]> {
    const now = Date.now();
    const entries = [...this.entries.values()];
    const reports = await Promise.all(entries.map((e) => e.session?.workerFacts(FACTS_TIMEOUT_MS) ?? null));
    return entries.map((e, i) => {
      const info = e.session?.info();
      const report = reports[i] ?? null;
      const pid = report ? (report.hostPid ?? report.facts.pid) : (info?.pid ?? null);
      const lastUsed = Math.max(e.lastUsedAt, info?.lastActiveAt ?? 0);
      return {
        name: e.name,
        pid,
        host: report?.facts.host ?? null,
        worker: report?.kind ?? null,
        sandbox: e.session?.sandboxed ?? false,
        python: info ? `${info.python}${info.pythonVersion ? ` (${info.pythonVersion})` : ""}` : (e.spec.python ?? "python3"),
        cwd: report?.facts.cwd ?? info?.cwd ?? e.spec.cwd ?? "",
        state: e.running ? "busy" : "idle",
        queued: e.queue.length,
        cells_run: info?.cellsRun ?? 0,
        age_ms: now - e.createdAt,
        idle_ms: e.running ? 0 : now - lastUsed,
        rss_bytes: report ? report.facts.rss : pid === null ? null : processRss(pid),
      };
    });
  }

  private create(name: string, spec: SessionSpec): Entry {
    const now = Date.now();
    const entry: Entry = { name, spec, session: null, createdAt: now, lastUsedAt: now, running: null, queue: [], closed: false, kept: null, collectors: [] };
    this.entries.set(name, entry);
    this.onChange();
    this.log(`session ${name}: starting (${spec.python ?? "default python"} in ${spec.cwd ?? "?"})`);
    this.factory(name, spec).then(
      (session) => {
        if (entry.closed) {
          void session.close();
          return;
        }
        entry.session = session;
        this.log(`session ${name}: worker pid ${session.pid ?? "?"} ready`);
        this.pump(entry);
      },
      (err: unknown) => {
        const error = err instanceof AwreplError ? err : new AwreplError("internal", `Cannot start session ${name}: ${(err as Error).message}`);
        this.log(`session ${name}: failed to start: ${error.message}`);
        if (this.entries.get(name) === entry) this.entries.delete(name);
        entry.closed = true;
        for (const call of entry.queue.splice(0)) {
          this.endWait(call);
          call.fail(error);
        }
        this.wake(entry);
        this.onChange();
      },
    );
    return entry;
  }

  private pump(entry: Entry): void {
    const session = entry.session;
    if (!session || entry.running || entry.closed) return;
    let call: Call | undefined;
    // Calls whose client went away while they waited are skipped without a reply.
    while ((call = entry.queue.shift()) && call.abort.signal.aborted) this.endWait(call);
    if (!call) return;
    entry.running = call;
    const current = call;
    const detached = this.detached.get(current);
    if (detached) detached.startedAt = Date.now();
    current
      .run(session, current.abort.signal, this.endWait(current))
      .catch((err: unknown) => current.fail(entry.closed ? closedUnder(entry.name, err) : asAwreplError(err)))
      .finally(() => {
        entry.running = null;
        entry.lastUsedAt = Date.now();
        this.pump(entry);
        this.wake(entry);
      });
  }

  /** The session's oldest detached call still queued or running. */
  private pendingDetached(entry: Entry): Call | undefined {
    if (entry.closed) return undefined;
    return [entry.running, ...entry.queue].find((c): c is Call => c !== null && this.detached.has(c));
  }

  /** What a collect of `owner` would answer now; `take` hands the kept result out (and forgets it). */
  private peek(entry: Entry, owner: object, take = false): CollectValue {
    if (take && entry.kept) {
      const { result, owner: sender } = entry.kept;
      entry.kept = null;
      return { state: "done", result, mine: sender === owner };
    }
    const pending = this.pendingDetached(entry);
    if (!pending) return { state: "idle" };
    const startedAt = this.detached.get(pending)?.startedAt ?? null;
    return { state: "running", elapsed_ms: startedAt === null ? null : Date.now() - startedAt, mine: pending.owner === owner };
  }

  /** Answers a waiting collect (null: its client is gone, nothing to answer) and forgets it. */
  private settle(entry: Entry, collector: Collector, value: CollectValue | null): void {
    clearTimeout(collector.timer);
    entry.collectors = entry.collectors.filter((c) => c !== collector);
    if (value) collector.resolve(value);
  }

  /** After a call left the session: collects with no detached call left to wait for answer `idle`. */
  private wake(entry: Entry): void {
    if (entry.collectors.length === 0 || this.pendingDetached(entry)) return;
    for (const c of [...entry.collectors]) this.settle(entry, c, { state: "idle" });
  }

  /** Bounds the wait of `call`, queued behind others in `entry`, by its wait limit. */
  private startWait(entry: Entry, call: Call): void {
    const limit = call.waitLimit?.(entry.session) ?? 0;
    const since = performance.now();
    const timer = limit > 0 ? setTimeout(() => this.expire(entry, call, limit), limit) : undefined;
    this.waits.set(call, { since, timer });
  }

  /** The wait of `call` ran out while it was still queued: it never runs. */
  private expire(entry: Entry, call: Call, limitMs: number): void {
    const i = entry.queue.indexOf(call);
    if (i < 0) return;
    entry.queue.splice(i, 1);
    const waitedMs = this.endWait(call);
    this.log(`session ${entry.name}: call ${String(call.id)} waited ${limitMs} ms for its turn and never ran`);
    if (call.neverRan) call.neverRan({ why: "timeout", timeoutMs: limitMs }, waitedMs);
    else call.fail(new AwreplError("timeout", `The call waited ${limitMs} ms for its turn in session ${entry.name} and never ran`));
    this.wake(entry);
  }

  /** The call's wait is over (it starts, or leaves the queue): how long it waited behind others. */
  private endWait(call: Call): number {
    const wait = this.waits.get(call);
    if (!wait) return 0;
    this.waits.delete(call);
    clearTimeout(wait.timer);
    return performance.now() - wait.since;
  }
}

/** The error of a call that was running when its session was closed. */
function closedUnder(name: string, err: unknown): AwreplError {
  const error = asAwreplError(err);
  if (error.code !== "worker_closed") return error;
  return new AwreplError("session_closed", `Session ${JSON.stringify(name)} was closed while this call ran (close, or the supervisor stopping)`);
}

export function asAwreplError(err: unknown): AwreplError {
  if (err instanceof AwreplError) return err;
  return new AwreplError("internal", (err as Error)?.message ?? String(err));
}

/** Resident memory of a process in bytes, or null when it cannot be read. */
export function processRss(pid: number): number | null {
  try {
    if (process.platform === "linux") {
      const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      return m ? Number(m[1]) * 1024 : null;
    }
    if (process.platform === "darwin") {
      const kb = Number(execFileSync("ps", ["-o", "rss=", "-p", String(pid)], { encoding: "utf8" }).trim());
      return Number.isFinite(kb) && kb > 0 ? kb * 1024 : null;
    }
  } catch {
    // gone, or not ours to read
  }
  return null;
}
