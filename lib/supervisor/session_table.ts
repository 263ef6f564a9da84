// The supervisor's named sessions, and who owns which call in them. A call waits for its turn in its
// session's own queue (ReplSession, lib/session/call_queue.ts: one at a time, in arrival order, no
// longer than its timeout, a withdrawn one never runs); a busy session never delays another. A call
// belongs to the connection that sent it: when that connection goes away its calls are withdrawn, or
// interrupted if running — except a detached execute, which runs to its end anyway. A detached call's
// result that cannot be delivered (its connection is gone) or that its client asked to keep is kept
// in the session, one per session (the next replaces it), until a `collect` hands it out; `collect`
// also waits for the session's detached calls still queued or running. An agent host that kills and
// restarts its MCP server (a client like any other) thus loses neither the cell nor its result.
// Calls that arrive while their session is being created wait for it, then take their turns in
// arrival order.
import { realpathSync } from "node:fs";
import { asAwreplError, AwreplError } from "../core/errors.ts";
import { deadline, DeadlineError } from "../core/deadline.ts";
import { processRss } from "../core/process.ts";
import type { ExecResult } from "../protocol/result.ts";
import type { CollectValue, RequestId, SessionInfo, SessionSpec } from "../protocol/supervisor.ts";
import type { CallOptions, ReplSession, ReplSessionInfo } from "../session/session.ts";
import type { WorkerFactsReport } from "../worker/facts.ts";

/** How long `sessions` waits for a worker's own facts before it shows the last ones. */
const FACTS_TIMEOUT_MS = 500;

/** `owned`: a session of one connection, of which nothing is restored or saved (docs/supervisor-protocol.md "Owned sessions"). */
export type SessionFactory = (name: string, spec: SessionSpec, owned: boolean) => Promise<ReplSession>;

/** One request for a session, from its arrival until it is answered. */
export type Call = {
  owner: object;
  id: RequestId;
  /** Aborted when its client withdraws it or goes away: it never runs if still waiting, and is interrupted if running. */
  readonly abort: AbortController;
  /** A detached execute: it outlives its connection, and its result may be kept for `collect`. */
  readonly detach?: boolean;
  /** An execute's idempotency key: what names it to `collect` with a key before the session has seen it (still queued, or the session starting). */
  readonly key?: string;
  /** A keyed execute's latest output so far (bounded: OUTPUT_SO_FAR_CHARS), for `collect` with `output`. */
  outputSoFar?(): string;
  /**
   * Hands the call to its session, in whose queue it waits its turn: `turn` goes with it (the call's
   * signal, and what the table does as it starts). Settles once the call is answered.
   */
  run(session: ReplSession, turn: Required<CallOptions>): Promise<void>;
  fail(error: AwreplError): void;
  /** Delivers its client's answer to one of its host requests (an execute with host_bridge); false when nothing waits for it. */
  hostReply?(hostId: string, data: Record<string, unknown>): boolean;
  /** Its connection went away while it runs on (a detached call). */
  ownerGone?(): void;
};

/** A call the table holds: whether it got its turn yet, and what its client asked of its result. */
type Held = {
  readonly call: Call;
  /** When it got its turn in its session (Date.now()); null while it waits. */
  startedAt: number | null;
  /** Its connection went away: a detached call's result has nobody to go to but `collect`. */
  ownerGone: boolean;
  /** Its client asked (keep_result) for a detached call's result to be kept even though it is sent there too. */
  keep: boolean;
};

/** A `collect` waiting for the session's oldest detached call. */
type Collector = {
  owner: object;
  id: RequestId;
  timer: ReturnType<typeof setTimeout>;
  resolve(value: CollectValue): void;
};

type Entry = {
  name: string;
  spec: SessionSpec;
  session: ReplSession | null;
  createdAt: number;
  lastUsedAt: number;
  /** Its calls not answered yet, in arrival order: waiting for the session to start, waiting their turn, or running. */
  calls: Held[];
  closed: boolean;
  /** The latest detached result nobody has collected (and who sent the cell): one per session, replaced by the next. */
  kept: { result: ExecResult; owner: object } | null;
  collectors: Collector[];
  /** The connection that owns it (an owned session: closed with that connection, invisible to others); null for a shared one. */
  owner: object | null;
};

export class SessionTable {
  private readonly entries = new Map<string, Entry>();

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

  /** The shared sessions whose worker has started, by name (what a stop snapshots: an owned session is never saved). */
  live(): [string, ReplSession][] {
    return [...this.entries.values()].filter((e) => e.session !== null && e.owner === null).map((e) => [e.name, e.session as ReplSession]);
  }

  /** A session of that name exists (shared, or owned by anyone). */
  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** The session `name` is owned by `owner` (a connection). */
  ownedBy(name: string, owner: object): boolean {
    return this.entries.get(name)?.owner === owner;
  }

  /**
   * Hands `call` to its session. A missing session is created from `spec`; without a spec the call
   * fails with session_not_found. Returns whether the session was created by this call. With `owned`,
   * a missing session is created owned by the call's connection (the caller checked that no saved
   * session has the name); an existing one must already be that connection's own.
   */
  submit(name: string, spec: SessionSpec | undefined, call: Call, owned = false): boolean {
    let entry = this.entries.get(name);
    let created = false;
    if (entry && entry.owner !== null && entry.owner !== call.owner) {
      call.fail(owned ? nameTaken(name) : notFound(name));
      return false;
    }
    if (entry && owned && entry.owner === null) {
      call.fail(nameTaken(name));
      return false;
    }
    if (!entry) {
      if (!spec) {
        call.fail(notFound(name));
        return false;
      }
      entry = this.create(name, spec, owned ? call.owner : null);
      created = true;
    }
    const held: Held = { call, startedAt: null, ownerGone: false, keep: false };
    entry.calls.push(held);
    // A session still starting takes its calls once it runs (create()).
    if (entry.session) this.begin(entry, held, entry.session);
    return created;
  }

  /** Interrupts the running cell of a session. Resolves false when nothing was running. */
  async interrupt(name: string, requester: object): Promise<boolean> {
    const entry = this.visible(name, requester);
    if (!entry?.session || !entry.calls.some(started)) return false;
    await entry.session.interrupt();
    return true;
  }

  /**
   * Withdraws one call of `owner`: it never runs if it still waits, its cell is interrupted if it runs
   * (a detached one's result is then not kept: its client said it does not want it); a waiting
   * collect of `owner` answers at once, taking no result.
   */
  cancel(owner: object, id: RequestId): boolean {
    for (const entry of this.entries.values()) {
      const held = entry.calls.find((h) => h.call.owner === owner && h.call.id === id);
      if (held) {
        held.keep = false;
        held.call.abort.abort();
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
      const held = entry.calls.find((h) => started(h) && h.call.owner === owner && h.call.id === id);
      if (held) return held.call.hostReply?.(hostId, data) ?? false;
    }
    return false;
  }

  /**
   * The connection `owner` went away: nobody waits for its calls any more. Its detached calls run on
   * (their results are kept); the others are withdrawn, or interrupted if running.
   */
  dropOwner(owner: object): void {
    // Its own sessions go with it: ended, nothing kept (their waiting calls are its own too).
    for (const entry of [...this.entries.values()].filter((e) => e.owner === owner)) {
      this.log(`session ${entry.name}: its owning connection closed; closing it (owned: nothing is saved)`);
      void this.close(entry.name);
    }
    for (const entry of this.entries.values()) {
      for (const held of entry.calls.filter((h) => h.call.owner === owner)) {
        const { call } = held;
        if (call.detach) {
          held.ownerGone = true;
          if (started(held)) this.log(`session ${entry.name}: client went away; its detached call ${String(call.id)} runs on and its result is kept`);
          call.ownerGone?.();
        } else {
          if (started(held)) this.log(`session ${entry.name}: client went away, interrupting its call ${String(call.id)}`);
          call.abort.abort();
        }
      }
      for (const c of entry.collectors.filter((c) => c.owner === owner)) this.settle(entry, c, null);
    }
  }

  /** keep_result: keep the result of `owner`'s detached call `id` for collect. False when it is not queued or running. */
  keepResult(owner: object, id: RequestId): boolean {
    for (const entry of this.entries.values()) {
      const held = entry.calls.find((h) => h.call.owner === owner && h.call.id === id);
      if (!held) continue;
      if (!held.call.detach) throw new AwreplError("usage", `Request ${JSON.stringify(id)} is not a detached execute: only a detached cell's result can be kept`);
      held.keep = true;
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
    const entry = this.visible(name, owner);
    if (!entry) return Promise.reject(new AwreplError("session_not_found", `No session named ${JSON.stringify(name)} is running`));
    const now = this.peek(entry, owner, true);
    if (now.state !== "running" || waitMs <= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      const collector: Collector = { owner, id, resolve, timer: setTimeout(() => this.settle(entry, collector, this.peek(entry, owner)), waitMs) };
      entry.collectors.push(collector);
    });
  }

  /**
   * collect with a `key`: the call that idempotency key names in the session (a `run --detach` cell,
   * whoever sent it): its result (not handed out: a key keeps it within its bounds), or, after waiting
   * up to `waitMs` for it, `running`; `dropped` when the session no longer keeps it (and why).
   */
  async collectKey(owner: object, name: string, key: string, waitMs: number, withOutput = false): Promise<CollectValue> {
    const entry = this.visible(name, owner);
    if (!entry) throw new AwreplError("session_not_found", `No session named ${JSON.stringify(name)} is running`);
    const giveUpAt = Date.now() + waitMs;
    let known = entry.session?.keyed(key) ?? null;
    // Sent, but not claimed by its session yet (the session still starts, or the call waits in the
    // table): running, not unknown; a wait looks again until the session has it.
    while (!known && !entry.closed && entry.calls.some((h) => h.call.key === key)) {
      if (Date.now() >= giveUpAt) return { state: "running", elapsed_ms: null, mine: false };
      await new Promise((resolve) => setTimeout(resolve, 20));
      known = entry.session?.keyed(key) ?? null;
    }
    if (!known) throw new AwreplError("usage", `Session ${name} has no cell with the id ${JSON.stringify(key)} (ids are those of \`run --detach\` and \`run --id\`)`);
    if (known.state === "dropped") {
      this.log(`session ${name}: asked for cell ${key}, whose result was dropped: ${known.reason}`);
      return known;
    }
    const done = (result: ExecResult, at: number): CollectValue => ({ state: "done", result: { ...result, session: name }, mine: false, finished_ms_ago: Date.now() - at });
    if (known.state === "done") return done(known.result, known.at);
    const running = (): CollectValue => {
      const output = withOutput ? entry.calls.find((h) => h.call.key === key)?.call.outputSoFar?.() : undefined;
      return { state: "running", elapsed_ms: Date.now() - known.at, mine: false, ...(output !== undefined ? { output } : {}) };
    };
    if (Date.now() >= giveUpAt) return running();
    const result = await deadline(known.pending, giveUpAt - Date.now(), `the cell ${key}`, { unref: true }).catch((err: unknown) => {
      if (err instanceof DeadlineError) return undefined;
      throw err;
    });
    if (result === undefined) return running();
    if (result === null) return { state: "dropped", reason: "that call never ran (it was withdrawn, or its wait for its turn ran out); sending it again runs it" };
    return done(result, Date.now());
  }

  /**
   * A detached call's result, before it is sent: the collects waiting get it, and it is kept when its
   * client is gone or asked to keep it (and no collect took it). Returns whether to send it to the
   * client. A call its client withdrew before it ran is its client's alone: neither collected nor kept.
   */
  finishDetached(name: string, call: Call, result: ExecResult): boolean {
    const entry = this.entries.get(name);
    const held = entry?.calls.find((h) => h.call === call);
    if (!entry || !held || !call.detach) return true;
    if (!started(held) && call.abort.signal.aborted) return true;
    const keep = held.ownerGone || held.keep;
    const waiting = entry.collectors.splice(0);
    for (const c of waiting) this.settle(entry, c, { state: "done", result, mine: c.owner === call.owner });
    if (keep && waiting.length === 0) {
      entry.kept = { result, owner: call.owner };
      this.log(`session ${name}: kept the result of detached call ${String(call.id)} (${result.status}) for collect`);
    }
    return !held.ownerGone;
  }

  /**
   * Names of the sessions with no call running or queued for at least `ms` (and a live worker).
   */
  idleFor(ms: number): [string, ReplSession][] {
    const now = Date.now();
    return [...this.entries.values()]
      .filter((e) => e.session !== null && e.owner === null && e.calls.length === 0 && !e.session.busy && now - Math.max(e.lastUsedAt, e.session.lastActiveAt) >= ms)
      .map((e) => [e.name, e.session as ReplSession]);
  }

  /** Closes `name` only if nothing runs or waits in it now (a call may have arrived meanwhile). */
  async closeIfIdle(name: string): Promise<boolean> {
    const entry = this.entries.get(name);
    if (!entry || entry.calls.length > 0 || entry.session?.busy) return false;
    return this.close(name, { keepFiles: true });
  }

  /**
   * Ends a session's worker. Its waiting calls fail; its running call ends with the worker. With
   * `keepFiles` (the session comes back from its snapshot) its display files stay.
   */
  async close(name: string, options: { keepFiles?: boolean } = {}): Promise<boolean> {
    const entry = this.entries.get(name);
    if (!entry) return false;
    entry.closed = true;
    this.entries.delete(name);
    // Calls waiting for the session to start were never handed to it; the others its close refuses.
    if (!entry.session) { for (const held of entry.calls.splice(0)) held.call.fail(closedBefore(name)); }
    entry.kept = null;
    this.wake(entry);
    this.log(`session ${name}: closing`);
    this.onChange();
    await entry.session?.close(options);
    return true;
  }

  /**
   * Closes every session; with `requester` (a client's close_all) only those it may see: the shared
   * ones and its own (another connection's owned sessions end with that connection).
   */
  async closeAll(options: { keepFiles?: boolean } = {}, requester?: object): Promise<string[]> {
    const names = requester === undefined ? this.names : this.visibleNames(requester);
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
      const busy = e.calls.some(started);
      return {
        name: e.name,
        pid,
        host: report?.facts.host ?? null,
        worker: report?.kind ?? null,
        sandbox: e.session?.sandboxed ?? false,
        python: interpreterShown(report, info),
        python_command: info?.python ?? e.spec.python ?? null,
        cwd: report?.facts.cwd ?? info?.cwd ?? e.spec.cwd ?? "",
        state: busy ? "busy" : "idle",
        queued: e.calls.filter((h) => !started(h)).length,
        cells_run: info?.cellsRun ?? 0,
        age_ms: now - e.createdAt,
        idle_ms: busy ? 0 : now - lastUsed,
        rss_bytes: report ? report.facts.rss : pid === null ? null : processRss(pid),
        // Measured here (its cgroup, or /proc for its processes), with the limits as enforced.
        ...(report?.limits ? { limits: report.limits } : {}),
        owned: e.owner !== null,
      };
    });
  }

  /** The session `name` as `requester` may see it: a shared one, or its own; another connection's owned one is not there for it. */
  visible(name: string, requester: object): Entry | undefined {
    const entry = this.entries.get(name);
    return entry && (entry.owner === null || entry.owner === requester) ? entry : undefined;
  }

  /** The names `requester` may see (visible()). */
  visibleNames(requester: object): string[] {
    return [...this.entries.values()].filter((e) => e.owner === null || e.owner === requester).map((e) => e.name);
  }

  private create(name: string, spec: SessionSpec, owner: object | null): Entry {
    const now = Date.now();
    const entry: Entry = { name, spec, session: null, createdAt: now, lastUsedAt: now, calls: [], closed: false, kept: null, collectors: [], owner };
    this.entries.set(name, entry);
    this.onChange();
    this.log(`session ${name}: starting (${spec.python ?? "default python"} in ${spec.cwd ?? "?"}${owner ? ", owned by its connection" : ""})`);
    this.factory(name, spec, owner !== null).then(
      (session) => {
        if (entry.closed) {
          void session.close();
          return;
        }
        entry.session = session;
        this.log(`session ${name}: worker pid ${session.pid ?? "?"} ready`);
        // The calls that waited for the start, in arrival order: they queue in the session now.
        for (const held of [...entry.calls]) this.begin(entry, held, session);
      },
      (err: unknown) => {
        const error = err instanceof AwreplError ? err : new AwreplError("internal", `Cannot start session ${name}: ${(err as Error).message}`);
        this.log(`session ${name}: failed to start: ${error.message}`);
        if (this.entries.get(name) === entry) this.entries.delete(name);
        entry.closed = true;
        for (const held of entry.calls.splice(0)) held.call.fail(error);
        this.wake(entry);
        this.onChange();
      },
    );
    return entry;
  }

  /** Hands `held` to `session`, where it waits its turn; the table forgets it once it is answered. */
  private begin(entry: Entry, held: Held, session: ReplSession): void {
    const { call } = held;
    const turn = {
      signal: call.abort.signal,
      onStart: () => {
        held.startedAt = Date.now();
      },
    };
    call
      .run(session, turn)
      .catch((err: unknown) => call.fail(entry.closed ? closedUnder(entry.name, err, started(held)) : asAwreplError(err)))
      .finally(() => {
        entry.calls = entry.calls.filter((h) => h !== held);
        entry.lastUsedAt = Date.now();
        this.wake(entry);
      });
  }

  /** The session's oldest detached call still queued or running. */
  private pendingDetached(entry: Entry): Held | undefined {
    if (entry.closed) return undefined;
    return entry.calls.find((h) => h.call.detach);
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
    const { startedAt } = pending;
    return { state: "running", elapsed_ms: startedAt === null ? null : Date.now() - startedAt, mine: pending.call.owner === owner };
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
}

/** The call got its turn in its session. */
function started(held: Held): boolean {
  return held.startedAt !== null;
}

/**
 * The interpreter a worker runs, as `sessions` shows it: the worker's own sys.executable with every
 * symlink resolved (a shim or `python3` on PATH is not what runs), its version, and the venv it runs
 * in (whose python is a link to the base interpreter). Behind a transport the path is the far side's,
 * shown as it says. Without the worker's facts: the command it was started with.
 */
function interpreterShown(report: WorkerFactsReport | null, info: ReplSessionInfo | undefined): string {
  if (!report) return info ? `${info.python}${info.pythonVersion ? ` (${info.pythonVersion})` : ""}` : "python3";
  const { executable, prefix, base_prefix: base } = report.facts;
  let shown = executable;
  if (report.kind !== "transport") {
    try {
      shown = realpathSync(executable);
    } catch {
      // Gone since it started (a venv removed): its path as the worker knows it.
    }
  }
  const details = [info?.pythonVersion, prefix && base && prefix !== base ? `venv ${prefix}` : null].filter(Boolean);
  return details.length ? `${shown} (${details.join(", ")})` : shown;
}

function notFound(name: string): AwreplError {
  return new AwreplError("session_not_found", `No session named ${JSON.stringify(name)}`);
}

function nameTaken(name: string): AwreplError {
  return new AwreplError(
    "usage",
    `Session ${JSON.stringify(name)} already exists (running, or owned by another connection): an owned session needs a name of its own`,
  );
}

function closedBefore(name: string): AwreplError {
  return new AwreplError("session_closed", `Session ${JSON.stringify(name)} was closed before this call ran (close, or the supervisor stopping); nothing of it ran`);
}

/** The error of a call whose session was closed under it: before its turn (`ran` false), or while it ran. */
function closedUnder(name: string, err: unknown, ran: boolean): AwreplError {
  const error = asAwreplError(err);
  if (error.code !== "worker_closed") return error;
  if (!ran) return closedBefore(name);
  return new AwreplError("session_closed", `Session ${JSON.stringify(name)} was closed while this call ran (close, or the supervisor stopping)`);
}
