// What a long-lived host of named sessions (the supervisor) does to make them outlive it: sessions it
// creates restore their default snapshot, autosave when asked to, and take the configured size caps;
// before any planned stop every live session is snapshotted; a session closed on purpose is forgotten.
// The files themselves: lib/snapshot_store.ts. What survives and what cannot: docs/persistence.md.
import type { Config } from "../settings/config.ts";
import type { ReplSession, ReplSessionOptions } from "../session/session.ts";
import { forgetSnapshot } from "../session/snapshot_files.ts";

export type PersistenceConfig = Pick<Config, "autosave" | "snapshotMaxBytes" | "snapshotMaxVariableBytes">;

/** How long a planned stop waits, at most, for every session's snapshot together. */
export const STOP_SNAPSHOT_BUDGET_MS = 8_000;
/** How long a stop waits for an interrupted cell to end before giving up on that session's snapshot. */
const INTERRUPT_WAIT_MS = 2_000;

/** The options that make a session the host creates persistent; `autosave` from the caller beats the config's. */
export function persistentSessionOptions(
  config: PersistenceConfig,
  autosave?: boolean,
): Pick<ReplSessionOptions, "restoreOnStart" | "autosave" | "snapshotMaxBytes" | "snapshotMaxVariableBytes"> {
  return {
    restoreOnStart: true,
    autosave: autosave ?? config.autosave,
    snapshotMaxBytes: config.snapshotMaxBytes,
    snapshotMaxVariableBytes: config.snapshotMaxVariableBytes,
  };
}

export type SnapshotOutcome = { name: string; saved: number; skipped: string[] } | { name: string; error: string } | { name: string; noWorker: true };

/**
 * Before a planned stop: snapshots every session that has a live worker to its default place, all at
 * once, within `budgetMs` together. A running cell is interrupted first (the stop would end it anyway,
 * and the snapshot waits its turn behind it). A session whose worker is gone keeps the snapshot it
 * has on disk. A snapshot still running at the deadline is left to the worker's exit: the runtime
 * writes to a temp file and renames it, so the last good snapshot stays in place.
 */
export async function snapshotBeforeStop(
  sessions: Iterable<[string, ReplSession]>,
  log: (line: string) => void,
  budgetMs = STOP_SNAPSHOT_BUDGET_MS,
): Promise<SnapshotOutcome[]> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), budgetMs);
  });
  const one = async (name: string, session: ReplSession): Promise<SnapshotOutcome> => {
    if (session.pid === null) return { name, noWorker: true };
    if (session.busy) {
      await session.interrupt();
      // Code in C can ignore the interrupt; the stop must not wait for it.
      if (!(await idleWithin(session, Math.min(budgetMs, INTERRUPT_WAIT_MS)))) {
        return { name, error: "its running cell did not stop when interrupted; the previous snapshot, if any, is kept" };
      }
    }
    const saving = session.snapshot().then(
      (r): SnapshotOutcome => ({ name, saved: r.saved.length, skipped: r.skipped.map((s) => `${s.name} (${s.reason})`) }),
      (err: unknown): SnapshotOutcome => ({ name, error: (err as Error).message }),
    );
    const outcome = await Promise.race([saving, deadline]);
    return outcome === "late" ? { name, error: `not finished within ${budgetMs} ms; the previous snapshot, if any, is kept` } : outcome;
  };
  try {
    const outcomes = await Promise.all([...sessions].map(([name, session]) => one(name, session)));
    for (const o of outcomes) log(`session ${o.name}: ${describeOutcome(o)}`);
    return outcomes;
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves true once the session has nothing running or queued, false after `ms`. */
async function idleWithin(session: ReplSession, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (session.busy) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return true;
}

function describeOutcome(o: SnapshotOutcome): string {
  if ("noWorker" in o) return "no live worker; its snapshot on disk, if any, is kept";
  if ("error" in o) return `snapshot failed: ${o.error}`;
  return `snapshot saved ${o.saved} name(s)${o.skipped.length ? `; skipped ${o.skipped.join(", ")}` : ""}`;
}

/** `close NAME` forgets the session's snapshot unless asked to keep it. Resolves whether one was removed. */
export function forgetClosedSession(home: string, name: string, keep: boolean): boolean {
  return keep ? false : forgetSnapshot(home, name);
}
