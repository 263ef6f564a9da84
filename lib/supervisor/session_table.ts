// The supervisor's named sessions: each has its own FIFO of calls (one runs at a time, in arrival
// order), so a busy session never delays another. A call belongs to the connection that sent it:
// when that connection goes away its queued calls are dropped and its running cell is interrupted.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { AwreplError } from "../core/errors.ts";
import type { RequestId, SessionInfo, SessionSpec } from "../protocol/supervisor.ts";
import type { ReplSession } from "../session/session.ts";

export type SessionFactory = (name: string, spec: SessionSpec) => Promise<ReplSession>;

/** One request waiting for (or holding) its session. */
export type Call = {
  owner: object;
  id: RequestId;
  readonly abort: AbortController;
  run(session: ReplSession, signal: AbortSignal): Promise<void>;
  fail(error: AwreplError): void;
};

type Entry = {
  name: string;
  spec: SessionSpec;
  session: ReplSession | null;
  createdAt: number;
  lastUsedAt: number;
  running: Call | null;
  queue: Call[];
  closed: boolean;
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
    entry.queue.push(call);
    this.pump(entry);
    return created;
  }

  /** Interrupts the running cell of a session. Resolves false when nothing was running. */
  async interrupt(name: string): Promise<boolean> {
    const entry = this.entries.get(name);
    if (!entry?.session || !entry.running) return false;
    await entry.session.interrupt();
    return true;
  }

  /** Withdraws one call of `owner`: dropped if queued, its cell interrupted if running. */
  cancel(owner: object, id: RequestId): boolean {
    for (const entry of this.entries.values()) {
      const i = entry.queue.findIndex((c) => c.owner === owner && c.id === id);
      if (i >= 0) {
        const [call] = entry.queue.splice(i, 1);
        call?.fail(new AwreplError("internal", "Cancelled before it ran"));
        return true;
      }
      if (entry.running?.owner === owner && entry.running.id === id) {
        entry.running.abort.abort();
        return true;
      }
    }
    return false;
  }

  /** The connection `owner` went away: nobody waits for its calls any more. */
  dropOwner(owner: object): void {
    for (const entry of this.entries.values()) {
      entry.queue = entry.queue.filter((c) => c.owner !== owner);
      if (entry.running?.owner === owner) {
        this.log(`session ${entry.name}: client went away, interrupting its call ${String(entry.running.id)}`);
        entry.running.abort.abort();
      }
    }
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
    return this.close(name);
  }

  /** Ends a session's worker. Its queued calls fail; its running call ends with the worker. */
  async close(name: string): Promise<boolean> {
    const entry = this.entries.get(name);
    if (!entry) return false;
    entry.closed = true;
    this.entries.delete(name);
    const closedError = new AwreplError("session_not_found", `Session ${JSON.stringify(name)} was closed`);
    for (const call of entry.queue.splice(0)) call.fail(closedError);
    this.log(`session ${name}: closing`);
    this.onChange();
    await entry.session?.close();
    return true;
  }

  async closeAll(): Promise<string[]> {
    const names = this.names;
    await Promise.all(names.map((n) => this.close(n)));
    return names;
  }

  list(): SessionInfo[] {
    const now = Date.now();
    return [...this.entries.values()].map((e) => {
      const info = e.session?.info();
      const pid = info?.pid ?? null;
      const lastUsed = Math.max(e.lastUsedAt, info?.lastActiveAt ?? 0);
      return {
        name: e.name,
        pid,
        python: info ? `${info.python}${info.pythonVersion ? ` (${info.pythonVersion})` : ""}` : (e.spec.python ?? "python3"),
        cwd: info?.cwd ?? e.spec.cwd ?? "",
        state: e.running ? "busy" : "idle",
        queued: e.queue.length,
        cells_run: info?.cellsRun ?? 0,
        age_ms: now - e.createdAt,
        idle_ms: e.running ? 0 : now - lastUsed,
        rss_bytes: pid === null ? null : processRss(pid),
      };
    });
  }

  private create(name: string, spec: SessionSpec): Entry {
    const now = Date.now();
    const entry: Entry = { name, spec, session: null, createdAt: now, lastUsedAt: now, running: null, queue: [], closed: false };
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
        for (const call of entry.queue.splice(0)) call.fail(error);
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
    while ((call = entry.queue.shift()) && call.abort.signal.aborted) {}
    if (!call) return;
    entry.running = call;
    const current = call;
    current
      .run(session, current.abort.signal)
      .catch((err: unknown) => current.fail(asAwreplError(err)))
      .finally(() => {
        entry.running = null;
        entry.lastUsedAt = Date.now();
        this.pump(entry);
      });
  }
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
