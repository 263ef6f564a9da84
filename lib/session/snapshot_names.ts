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
 * What snapshots/ says, from one reading of it: the sessions with a default snapshot and those it
 * knows of (a snapshot or a spec), sorted; and `flat`: whether it holds anything but session
 * directories (files of the older flat layout, a killed writer's leftovers), which
 * snapshot_files.ts migrateLegacyLayout() moves or removes. No snapshots/ yet: nothing.
 */
export function sessionFiles(home: string): { saved: string[]; known: string[]; flat: boolean } {
  const dir = snapshotsDir(home);
  let entries: string[];
  try {
    entries = listDir(dir).sort();
  } catch {
    return { saved: [], known: [], flat: false };
  }
  const saved: string[] = [];
  const known: string[] = [];
  let flat = false;
  for (const name of entries) {
    const path = join(dir, name);
    // "entry/." exists only for a directory.
    if (!fileExists(`${path}/.`)) {
      flat = true;
      continue;
    }
    if (!SESSION_NAME.test(name)) continue;
    const hasPayload = fileExists(join(path, PAYLOAD));
    if (hasPayload) saved.push(name);
    if (hasPayload || fileExists(join(path, SPEC))) known.push(name);
  }
  return { saved, known, flat };
}
