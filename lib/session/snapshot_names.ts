// Which sessions a state directory keeps a snapshot or a spec of: what `awrepl sessions` lists beside
// the running ones. Apart from snapshot_files.ts (which re-exports these, and migrates an older flat
// layout before it lists) because `sessions` runs on the CLI's fast path, where no node: module is
// imported (lib/core/fastio.ts says what each costs a start).
import { fileExists, joinPath as join, listDir } from "../core/fastio.ts";
import { SESSION_NAME } from "../core/names.ts";

/** The files of a session's directory that say it has a snapshot, and that it was created. */
export const PAYLOAD = "snapshot.pkl";
export const SPEC = "spec.json";

export function snapshotsDir(home: string): string {
  return join(home, "snapshots");
}

/** The directory that holds everything of session `name` (and nothing of any other session). */
export function sessionDir(home: string, name: string): string {
  return join(snapshotsDir(home), name);
}

/**
 * True when snapshots/ holds anything but session directories: files of the older flat layout (or a
 * killed writer's leftovers), which snapshot_files.ts migrateLegacyLayout() moves or removes.
 */
export function hasFlatFiles(home: string): boolean {
  const dir = snapshotsDir(home);
  try {
    // "entry/." exists only for a directory.
    return listDir(dir).some((name) => !fileExists(`${join(dir, name)}/.`));
  } catch {
    return false;
  }
}

/** The sessions with a default snapshot, sorted (the layout already migrated). */
export function sessionsWithSnapshot(home: string): string[] {
  return sessionNamesWith(home, PAYLOAD);
}

/** The sessions `home` knows of: a saved spec or snapshot, sorted (the layout already migrated). */
export function sessionsKnown(home: string): string[] {
  return [...new Set([...sessionNamesWith(home, PAYLOAD), ...sessionNamesWith(home, SPEC)])].sort();
}

function sessionNamesWith(home: string, file: string): string[] {
  try {
    return listDir(snapshotsDir(home))
      .filter((n) => SESSION_NAME.test(n) && fileExists(join(snapshotsDir(home), n, file)))
      .sort();
  } catch {
    return [];
  }
}
