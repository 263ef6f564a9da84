// What a long-lived host of named sessions (the supervisor) does to make them outlive it: sessions it
// creates restore their default snapshot and autosave when asked to (their size caps are limits, as
// session_spec.ts specLimits resolves them); before any planned stop every live session is
// snapshotted, and every session whose state could not be saved is reported (to a client that waits:
// `daemon stop`, `close --keep`) and recorded beside the session, so that its next user hears it
// whoever stopped the supervisor (idle exit, an upgrade, a signal); a session closed on purpose is
// forgotten. A session's history (history.ts) is written whenever its default snapshot is (and at a stop
// that could not save the state: what ran is still worth knowing).
// The files themselves: lib/session/snapshot_files.ts. What survives and what cannot: docs/persistence.md.
import { deadline, DeadlineError } from "../core/deadline.ts";
import type { Config } from "../settings/config.ts";
import type { StopSnapshot } from "../protocol/supervisor.ts";
import type { ReplSession, ReplSessionOptions } from "../session/session.ts";
import { saveHistoryWithSnapshot } from "./history.ts";
import { ageText, clearHeld, defaultSnapshotPath, forgetSnapshot, heldByAnother, recordUnsaved, snapshotTime, utcStamp } from "../session/snapshot_files.ts";

export type PersistenceConfig = Pick<Config, "autosave">;

/** How long a planned stop waits, at most, for every session's snapshot together. */
export const STOP_SNAPSHOT_BUDGET_MS = 8_000;
/** How long a stop waits for an interrupted cell to end before giving up on that session's snapshot. */
const INTERRUPT_WAIT_MS = 2_000;

/** The options that make a session the host creates persistent; `autosave` from the caller beats the config's. */
export function persistentSessionOptions(config: PersistenceConfig, autosave?: boolean): Pick<ReplSessionOptions, "restoreOnStart" | "autosave"> {
  return { restoreOnStart: true, autosave: autosave ?? config.autosave };
}

export type StopSnapshotOptions = {
  /** The state directory: failures are recorded there, beside each session, for its next user. */
  home: string;
  /** What stops the sessions ("stop requested", "idle for 1800000 ms", "received SIGTERM"): said with a failure. */
  stop: string;
  budgetMs?: number;
  /**
   * Record failures for the sessions' next users (default true). False when a failure keeps the
   * session running (parking an idle session, `close --keep`): nothing is lost then.
   */
  record?: boolean;
};

/**
 * Before a planned stop: snapshots every session that has a live worker to its default place, all at
 * once, within `budgetMs` together. A running cell is interrupted first (the stop would end it anyway,
 * and the snapshot waits its turn behind it). A snapshot still running at the deadline is given up:
 * its temp file never replaces the last good snapshot. Every session whose state is not saved
 * (`failed`, `no_worker`) is logged and recorded beside it (snapshot_files.ts recordUnsaved), with
 * the snapshot its next use will restore instead (older than its state) or none; where even that
 * cannot be written, the marker the session left when it started (markHeld) still says its state
 * was not saved. A session saved has its marker removed: nothing is left to say.
 */
export async function snapshotBeforeStop(
  sessions: Iterable<[string, ReplSession]>,
  log: (line: string) => void,
  options: StopSnapshotOptions,
): Promise<StopSnapshot[]> {
  const budgetMs = options.budgetMs ?? STOP_SNAPSHOT_BUDGET_MS;
  const startedAt = Date.now();
  // One budget for all of them together: each waits for what is left of it.
  const budgetLeft = () => Math.max(0, startedAt + budgetMs - Date.now());
  const one = async (name: string, session: ReplSession): Promise<StopSnapshot> => {
    if (session.pid === null) return notSaved(options.home, name, "no_worker", "its worker was gone before the stop (it had died or was being replaced)");
    if (session.busy) {
      await session.interrupt();
      // Code in C can ignore the interrupt; the stop must not wait for it.
      if (!(await idleWithin(session, Math.min(budgetMs, INTERRUPT_WAIT_MS)))) {
        return notSaved(options.home, name, "failed", `its running cell did not stop within ${Math.min(budgetMs, INTERRUPT_WAIT_MS)} ms of being interrupted (code in C)`);
      }
    }
    // Each name gets a share of the budget: one slow to pickle is skipped (and listed), not the session.
    const saving = session.snapshot(undefined, { maxVariableMs: Math.max(100, Math.floor(budgetMs / 4)) }).then(
      (r): StopSnapshot => ({ session: name, status: "saved", path: r.path, saved: r.saved.length, skipped: r.skipped, bytes: r.bytes }),
      (err: unknown): StopSnapshot => notSaved(options.home, name, "failed", (err as Error).message),
    );
    return deadline(saving, budgetLeft(), `the snapshot of ${name}`).catch((err) => {
      if (!(err instanceof DeadlineError)) throw err;
      // The worker is ended next: a write it has not finished is dropped (temp file, never renamed).
      return notSaved(options.home, name, "failed", `it did not finish within the stop's snapshot budget of ${budgetMs} ms (a namespace too large or too slow to pickle)`);
    });
  };
  const outcomes = await Promise.all([...sessions].map(([name, session]) => one(name, session)));
  for (const o of outcomes) {
    log(`session ${o.session}: ${describeStopSnapshot(o)}`);
    // Its history too, also when its state could not be saved: what ran is still worth knowing.
    if (o.status !== "not_written") saveHistoryWithSnapshot(options.home, o.session);
    if (o.status === "saved") clearHeld(options.home, o.session);
    else if (isUnsaved(o) && options.record !== false) record(options, o, startedAt, log);
  }
  return outcomes;
}

/** A session whose state is not saved: what its next use gets instead (the snapshot on disk, or nothing). */
function notSaved(home: string, session: string, status: "failed" | "no_worker", error: string): StopSnapshot {
  const path = defaultSnapshotPath(home, session);
  const taken = snapshotTime(path);
  const kept = taken === null ? null : { path, taken_at: new Date(taken).toISOString(), age_ms: Math.max(0, Date.now() - taken) };
  return { session, status, error, kept };
}

function record(options: StopSnapshotOptions, o: StopSnapshot, startedAt: number, log: (line: string) => void): void {
  // Another supervisor re-created the session meanwhile (this one's socket was taken): what its next
  // user hears is that one's to say.
  if (heldByAnother(options.home, o.session)) {
    log(`session ${o.session}: its failed snapshot is not recorded: another process holds the session now`);
    return;
  }
  try {
    recordUnsaved(options.home, o.session, {
      at: startedAt,
      stop: options.stop,
      error: o.error ?? "unknown",
      kept: o.kept ? { path: o.kept.path, taken_at: Date.parse(o.kept.taken_at) } : null,
    });
  } catch (err) {
    // The disk that refused the snapshot may refuse this too: the log (and a waiting client) still have
    // it, and the session's marker tells its next user that its state was not saved.
    log(`session ${o.session}: cannot record its failed snapshot for its next user (its marker says its state was not saved): ${(err as Error).message}`);
  }
}

/** Resolves true once the session has nothing running or queued, false after `ms`. */
async function idleWithin(session: ReplSession, ms: number): Promise<boolean> {
  const giveUpAt = Date.now() + ms;
  while (session.busy) {
    if (Date.now() >= giveUpAt) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return true;
}

/** True when the outcome leaves the session's state unsaved (what makes `daemon stop` exit 1). */
export function isUnsaved(o: StopSnapshot): boolean {
  return o.status === "failed" || o.status === "no_worker";
}

/** One line per outcome, for the log and for `daemon stop`: "snapshot saved 3 name(s)", "NOT saved: ...". */
export function describeStopSnapshot(o: StopSnapshot, now = Date.now()): string {
  switch (o.status) {
    case "saved": {
      const skipped = o.skipped?.length ? `; could not save ${o.skipped.map((s) => `${s.name} (${s.reason})`).join(", ")}` : "";
      return `snapshot saved ${o.saved ?? 0} name(s)${skipped}`;
    }
    case "not_written":
      return `not snapshotted: ${o.error ?? "another supervisor owns the name now"}`;
    default: {
      const kept = o.kept
        ? `its next use restores an OLDER snapshot, of ${utcStamp(Date.parse(o.kept.taken_at))} (${ageText(now - Date.parse(o.kept.taken_at))} old, ${o.kept.path})`
        : "it has no earlier snapshot: its state is lost";
      return `state NOT saved: ${o.error}; ${kept}`;
    }
  }
}

/** `close NAME` (without --keep) forgets the session: its snapshot, spec and display files. Resolves whether it was known. */
export function forgetClosedSession(home: string, name: string): boolean {
  return forgetSnapshot(home, name);
}
