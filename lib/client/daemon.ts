// The calls about the supervisor and its sessions as a whole, from any process: list, close, interrupt,
// collect a detached result, status, stop, the log's path. Each connects without starting a
// supervisor (none running: nothing to list, close or stop) and resolves the layout once.
import { SupervisorConnection } from "./connection.ts";
import { connectSupervisor } from "./start.ts";
import { type Collected, collected } from "./attach.ts";
import { deadline } from "../core/deadline.ts";
import { processAlive } from "../core/process.ts";
import { AwreplError } from "../core/errors.ts";
import { checkSessionName } from "../core/names.ts";
import type { DaemonStatus, SessionInfo, StopSnapshot } from "../protocol/supervisor.ts";
import { type ClientOptions, type HomeLayout, layoutOf } from "../settings/home.ts";

/** The sessions the supervisor holds; empty when no supervisor runs (none is started). */
export async function listSessions(options: ClientOptions = {}): Promise<SessionInfo[]> {
  const layout = layoutOf(options);
  // `awrepl sessions` is on the CLI's fast path: the list goes out right behind hello, one round trip
  // instead of two. A supervisor of another version (or one that closed before answering) ran
  // nothing: then the usual way, which waits for hello and deals with it.
  const conn = await SupervisorConnection.connect(layout);
  if (!conn) return [];
  try {
    return await conn.call({ type: "list" });
  } catch (err) {
    if (!conn.neverRan(err)) throw err;
  } finally {
    conn.close();
  }
  return (await withSupervisor(layout, (c) => c.call({ type: "list" }))) ?? [];
}

export type CloseOptions = ClientOptions & {
  /** Keep the session's snapshot, so its next use restores it (default: forget it). */
  keep?: boolean;
};

/**
 * Ends one session's worker and forgets its snapshot (unless `keep`), also when the session is not
 * running. Resolves false when there was neither a running session nor a snapshot of that name. With
 * `keep`, a session whose snapshot fails is not closed (that would lose its state): snapshot_failed.
 */
export async function closeSession(name: string, options: CloseOptions = {}): Promise<boolean> {
  const report = await closeSessionReport(name, options);
  if (report.unsaved.length) throw new AwreplError("snapshot_failed", `Session ${name} was not closed: ${describeUnsaved(report.unsaved)}`);
  return report.found;
}

/** What `close` did: whether the name was known, and (with `keep`) the sessions left running because their snapshot failed. */
export type CloseReport = { found: boolean; unsaved: StopSnapshot[] };

/** As closeSession, resolving a report instead of rejecting (`awrepl close` prints it). */
export async function closeSessionReport(name: string, options: CloseOptions = {}): Promise<CloseReport> {
  checkSessionName(name);
  const layout = layoutOf(options);
  const keep = options.keep === true;
  const r = await withSupervisor(layout, (c) => c.call({ type: "close", session: name, keep }));
  if (r) {
    const unsaved = r.snapshot && r.snapshot.status !== "saved" ? [r.snapshot] : [];
    return { found: r.closed || r.forgot || unsaved.length > 0, unsaved };
  }
  // No supervisor: the files on disk are all there is of the session.
  const { forgetSnapshot, knownSessionNames } = await import("../session/snapshot_files.ts");
  return { found: keep ? knownSessionNames(layout.home).includes(name) : forgetSnapshot(layout.home, name), unsaved: [] };
}

/** Ends every session and forgets every snapshot (unless `keep`); resolves the names closed or forgotten. */
export async function closeAllSessions(options: CloseOptions = {}): Promise<string[]> {
  const report = await closeAllSessionsReport(options);
  if (report.unsaved.length) throw new AwreplError("snapshot_failed", `Not every session was closed: ${describeUnsaved(report.unsaved)}`);
  return report.closed;
}

/** As closeAllSessions, resolving the names closed and the sessions left running (their `keep` snapshot failed). */
export async function closeAllSessionsReport(options: CloseOptions = {}): Promise<{ closed: string[]; unsaved: StopSnapshot[] }> {
  const layout = layoutOf(options);
  const keep = options.keep === true;
  const r = await withSupervisor(layout, (c) => c.call({ type: "close_all", keep }));
  if (r) return { closed: [...new Set([...r.closed, ...r.forgot])].sort(), unsaved: (r.snapshots ?? []).filter((o) => o.status !== "saved") };
  if (keep) return { closed: [], unsaved: [] };
  const { forgetSnapshot, knownSessionNames } = await import("../session/snapshot_files.ts");
  return { closed: knownSessionNames(layout.home).filter((n) => forgetSnapshot(layout.home, n)), unsaved: [] };
}

/** Interrupts a session's running cell from any process. Resolves false when nothing ran. */
export async function interruptSession(name: string, options: ClientOptions = {}): Promise<boolean> {
  checkSessionName(name);
  const r = await withSupervisor(layoutOf(options), (c) => c.call({ type: "interrupt", session: name }));
  return r?.interrupted ?? false;
}

/**
 * A detached cell's result from any process (`awrepl -s NAME wait`): the session's kept result at
 * once, else waits up to `waitMs` for its oldest detached cell still queued or running.
 * session_not_found when no such session runs (no supervisor is started).
 */
export async function collectResult(name: string, options: ClientOptions & { waitMs?: number } = {}): Promise<Collected> {
  checkSessionName(name);
  const r = await withSupervisor(layoutOf(options), (c) => c.call({ type: "collect", session: name, wait_ms: options.waitMs ?? 0 }));
  if (!r) throw new AwreplError("session_not_found", `No session named ${JSON.stringify(name)} is running (no supervisor runs)`);
  return collected(r);
}

/** The running supervisor's status, or null when none runs. */
export async function daemonStatus(options: ClientOptions = {}): Promise<DaemonStatus | null> {
  return withSupervisor(layoutOf(options), (c) => c.call({ type: "status" }));
}

/** How long `daemon stop` waits for the snapshots' report (the supervisor's budget is 8 s, plus interrupts). */
const STOP_REPLY_WAIT_MS = 30_000;
/** How long it then waits for the supervisor's process to end (it waits at most 10 s for its workers). */
const STOP_EXIT_WAIT_MS = 15_000;

/** What `daemon stop` found: whether a supervisor ran, and what became of each session's state. */
export type DaemonStopReport = {
  stopped: boolean;
  /** One per session the supervisor held; null when the supervisor did not say (another version, or it crashed). */
  snapshots: StopSnapshot[] | null;
  /** The sessions whose state was not saved (their next use restores an older snapshot, or none). */
  unsaved: StopSnapshot[];
};

/**
 * Stops the supervisor (every session ends with it) and waits until it is gone. Resolves false if
 * none ran, true once it stopped; rejects with `snapshot_failed` (after the stop, the report in its
 * `report` property) when a session's state could not be saved: a stop never loses state silently.
 */
export async function stopDaemon(options: ClientOptions = {}): Promise<boolean> {
  const report = await stopDaemonReport(options);
  if (report.unsaved.length > 0) {
    const error = new AwreplError("snapshot_failed", `The supervisor stopped, but ${describeUnsaved(report.unsaved)}`);
    throw Object.assign(error, { report });
  }
  return report.stopped;
}

/** "the state of a, b was not saved (a: disk full; b: ...)". */
export function describeUnsaved(unsaved: StopSnapshot[]): string {
  return `the state of ${unsaved.map((o) => o.session).join(", ")} was not saved (${unsaved.map((o) => `${o.session}: ${o.error}`).join("; ")})`;
}

/** As stopDaemon, resolving the whole report instead of rejecting (`daemon stop` prints it). */
export async function stopDaemonReport(options: ClientOptions = {}): Promise<DaemonStopReport> {
  const layout = layoutOf(options);
  const conn = await SupervisorConnection.connect(layout);
  if (!conn) return { stopped: false, snapshots: null, unsaved: [] };
  let pid: number;
  try {
    pid = (await conn.hello).pid;
  } catch (err) {
    conn.close();
    if (!conn.wedged) return { stopped: false, snapshots: null, unsaved: [] }; // closed before answering: it was exiting anyway
    throw err;
  }
  // The reply comes once every session's snapshot was tried; an older supervisor answers null at once.
  // `op` too: a supervisor of protocol 1 reads that (docs/supervisor-protocol.md, "Versions").
  const reply = await deadline(conn.call({ type: "stop", op: "stop" }), STOP_REPLY_WAIT_MS, "the supervisor's stop report").catch(() => null);
  const stopBy = Date.now() + STOP_EXIT_WAIT_MS;
  while (Date.now() < stopBy && processAlive(pid)) await new Promise((r) => setTimeout(r, 10));
  conn.close();
  if (processAlive(pid)) {
    throw new AwreplError("internal", `The supervisor (pid ${pid}) did not stop; see its log: ${layout.log}`);
  }
  const snapshots = reply?.snapshots ?? null;
  return { stopped: true, snapshots, unsaved: (snapshots ?? []).filter((o) => o.status === "failed" || o.status === "no_worker") };
}

/** Where the supervisor logs (it may not exist yet). */
export function daemonLogPath(options: ClientOptions = {}): string {
  return layoutOf(options).log;
}

/** `fn` on a connection to the running supervisor, or null when none runs (none is started). */
async function withSupervisor<T>(layout: HomeLayout, fn: (conn: SupervisorConnection) => Promise<T>): Promise<T | null> {
  const conn = await connectSupervisor(layout, { autostart: false });
  if (!conn) return null;
  try {
    return await fn(conn);
  } finally {
    conn.close();
  }
}
