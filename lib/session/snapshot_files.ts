// Snapshot files on disk: where a session's default snapshot lives (<state>/snapshots/<name>.pkl and
// its JSON manifest <name>.json), what a manifest says, and the three things done to the files besides
// writing them (the runtime writes both atomically: temp file + os.replace): moving a corrupt one
// aside, forgetting a closed session's, and sweeping the temp files a killed writer left behind.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { writeFileAtomic } from "../core/files.ts";
import { basename, dirname, join } from "node:path";
import { SESSION_NAME } from "../core/names.ts";
import { processAlive } from "../core/process.ts";
import type { NameFailure } from "../protocol/runtime.ts";
import type { SessionSpec } from "../protocol/supervisor.ts";

/** What the runtime writes beside a payload (docs/protocol.md, "Snapshot and restore"). */
export type SnapshotManifest = {
  version: number;
  savedNames: string[];
  skipped: NameFailure[];
  pruned: string[];
  /** Size of the payload it describes: a payload of another size was written after this manifest. */
  bytes: number;
  pythonVersion: string;
  /** Seconds since the epoch. */
  timestamp: number;
  serializer?: "dill" | "pickle";
};

export function snapshotsDir(home: string): string {
  return join(home, "snapshots");
}

/** The default payload of session `name`. */
export function defaultSnapshotPath(home: string, name: string): string {
  return join(snapshotsDir(home), `${name}.pkl`);
}

/** The manifest beside a snapshot: `x.pkl` -> `x.json`, anything else -> `<path>.json`. */
export function manifestPath(snapshotPath: string): string {
  return snapshotPath.endsWith(".pkl") ? `${snapshotPath.slice(0, -4)}.json` : `${snapshotPath}.json`;
}

/** True when `path` is a session's default snapshot (files there are ours to move aside or remove). */
export function isDefaultSnapshot(home: string, path: string): boolean {
  return dirname(path) === snapshotsDir(home) && path.endsWith(".pkl");
}

/**
 * The manifest of `snapshotPath` when it describes the payload there now, else null (missing,
 * unreadable, or stale: a writer killed between the payload's rename and the manifest's).
 */
export function readManifest(snapshotPath: string): SnapshotManifest | null {
  try {
    const manifest = JSON.parse(readFileSync(manifestPath(snapshotPath), "utf8")) as SnapshotManifest;
    if (typeof manifest !== "object" || manifest === null || typeof manifest.timestamp !== "number") return null;
    return manifest.bytes === statSync(snapshotPath).size ? manifest : null;
  } catch {
    return null;
  }
}

/** "its snapshot of 2026-11-29 16:40:12 UTC (/path/x.pkl)": which state a session went back to. */
export function describeSnapshot(snapshotPath: string): string {
  let when: number | null = null;
  const manifest = readManifest(snapshotPath);
  if (manifest) when = manifest.timestamp * 1000;
  else {
    try {
      when = statSync(snapshotPath).mtimeMs;
    } catch {
      when = null;
    }
  }
  const stamp = when === null ? "unknown time" : `${new Date(when).toISOString().slice(0, 19).replace("T", " ")} UTC`;
  return `its snapshot of ${stamp} (${snapshotPath})`;
}

/**
 * Renames a snapshot (and its manifest) to `<file>.<label>-<UTC timestamp>`: one that cannot be read
 * (`corrupt`), so the next start does not trip over it again, or one with names that could not be
 * restored (`unrestored`) before a new snapshot would replace it. Nothing is deleted. Returns the
 * payload's new path, or null when it could not be moved (it is left where it is).
 */
export function moveAside(snapshotPath: string, label: "corrupt" | "unrestored" = "corrupt", now = new Date()): string | null {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
  const aside = `${snapshotPath}.${label}-${stamp}`;
  try {
    renameSync(snapshotPath, aside);
  } catch {
    return null;
  }
  const manifest = manifestPath(snapshotPath);
  try {
    if (existsSync(manifest)) renameSync(manifest, `${manifest}.${label}-${stamp}`);
  } catch {
    // The payload is out of the way, which is what matters; a stray manifest describes nothing.
  }
  return aside;
}

/** Where the spec a session was created with is kept, beside its default snapshot. */
export function specPath(home: string, name: string): string {
  return join(snapshotsDir(home), `${name}.spec.json`);
}

/**
 * Records how session `name` was made (interpreter, directory, environment, limits), so a host that
 * re-creates it from its snapshot makes it the same way. Mode 0600: the environment may hold secrets.
 */
export function writeSessionSpec(home: string, name: string, spec: SessionSpec): void {
  const path = specPath(home, name);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileAtomic(path, JSON.stringify(spec));
}

/** The spec saved for session `name`, or null (none, or unreadable). */
export function readSessionSpec(home: string, name: string): SessionSpec | null {
  try {
    const spec = JSON.parse(readFileSync(specPath(home, name), "utf8")) as unknown;
    return typeof spec === "object" && spec !== null && !Array.isArray(spec) ? (spec as SessionSpec) : null;
  } catch {
    return null;
  }
}

/** The names of the sessions with a default snapshot in `home` (files moved aside do not count). */
export function savedSessionNames(home: string): string[] {
  try {
    return readdirSync(snapshotsDir(home))
      .filter((n) => n.endsWith(".pkl"))
      .map((n) => n.slice(0, -4))
      .filter((n) => SESSION_NAME.test(n))
      .sort();
  } catch {
    return [];
  }
}

/** Removes session `name`'s default snapshot and manifest. Resolves whether a payload was there. */
export function forgetSnapshot(home: string, name: string): boolean {
  const path = defaultSnapshotPath(home, name);
  const existed = existsSync(path);
  rmSync(path, { force: true });
  rmSync(manifestPath(path), { force: true });
  rmSync(specPath(home, name), { force: true });
  sweepTempFiles(path);
  return existed;
}

/**
 * Removes the temp files (`.<file>.<pid>.tmp`, runtime.py's _atomic_write) of `snapshotPath` and its
 * manifest whose writer is gone: a worker killed mid-snapshot leaves one behind.
 */
export function sweepTempFiles(snapshotPath: string): void {
  const dir = dirname(snapshotPath);
  const stems = [basename(snapshotPath), basename(manifestPath(snapshotPath))];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^\.(.+)\.(\d+)\.tmp$/.exec(name);
    if (!m || !stems.includes(m[1] as string) || processAlive(Number(m[2]))) continue;
    rmSync(join(dir, name), { force: true });
  }
}

/** The runtime's reasons for a payload it could not read at all (rather than one name it could not revive). */
export function isUnreadableReason(reason: string | undefined): boolean {
  return reason !== undefined && (reason.startsWith("corrupt snapshot") || reason.startsWith("cannot read snapshot"));
}
