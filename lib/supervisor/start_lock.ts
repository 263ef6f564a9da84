// The start-up lock: the arbiter when many clients start a supervisor at once. It is held only from
// "is anyone listening?" to "I am listening", so a crash leaves at worst a lock whose owner is dead
// (or one older than STALE_LOCK_MS), which the next starter takes over. The lock file is created
// complete (written under a private name, then hard-linked into place, which fails if it exists).
import { linkSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { processAlive } from "../core/process.ts";

/** A start-up lock older than this belongs to a starter that died. */
export const STALE_LOCK_MS = 10_000;

export type StartLock = { release(): void };

/**
 * Takes the lock, or resolves null when another live starter holds it. A file system error (a full
 * disk) is thrown as it is, and leaves no file of ours behind.
 */
export function acquireStartLock(lockPath: string): StartLock | null {
  const mine = `${lockPath}.${process.pid}`;
  try {
    writeFileSync(mine, String(process.pid), { mode: 0o600 });
  } catch (err) {
    removeQuietly(mine); // created, and then the write failed
    throw err;
  }
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        linkSync(mine, lockPath);
        return {
          release() {
            try {
              if (readFileSync(lockPath, "utf8") === String(process.pid)) unlinkSync(lockPath);
            } catch {
              // already gone
            }
          },
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      if (!takeOverIfStale(lockPath)) return null;
    }
    return null;
  } finally {
    removeQuietly(mine);
  }
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // not there
  }
}

/** The pid written in a lock file, if it is a live starter's and fresh. */
export function lockHolder(lockPath: string): number | null {
  try {
    const pid = Number(readFileSync(lockPath, "utf8"));
    const fresh = Date.now() - statSync(lockPath).mtimeMs < STALE_LOCK_MS;
    return Number.isInteger(pid) && pid > 0 && fresh && processAlive(pid) ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Moves a stale lock aside (rename is atomic: of several starters racing here, one moves it). If
 * what we moved turns out to be a live lock that replaced the stale one meanwhile, put it back.
 */
function takeOverIfStale(lockPath: string): boolean {
  if (lockHolder(lockPath) !== null) return false;
  const aside = `${lockPath}.stale.${process.pid}`;
  try {
    renameSync(lockPath, aside);
  } catch {
    return true; // someone else moved it: try to link again
  }
  const stillStale = lockHolder(aside) === null;
  if (!stillStale) {
    try {
      linkSync(aside, lockPath);
    } catch {
      // a third starter got in; it holds the lock now
    }
  }
  try {
    unlinkSync(aside);
  } catch {
    // ignore
  }
  return stillStale;
}
