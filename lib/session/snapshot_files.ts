// Snapshot files on disk. Every session has a directory of its own, <state>/snapshots/<name>/, so the
// files of two sessions can never be the same file whatever their names (`x` and `x.spec` used to
// share `x.spec.json`): a session name holds no `/` and is never `.` or `..` (lib/core/names.ts).
//
//   snapshots/<name>/snapshot.pkl          the default snapshot's payload
//   snapshots/<name>/snapshot.json         its manifest (what the runtime, or the host, wrote beside it)
//   snapshots/<name>/spec.json             how the supervisor created the session (mode 0600: its env)
//   snapshots/<name>/keys.json             its idempotency keys and their results, written with the
//                                          default snapshot (mode 0600: they hold the cells' output)
//   snapshots/<name>/history.json          its history (lib/supervisor/history.ts), written with the
//                                          default snapshot (mode 0600: the cells' code and output)
//   snapshots/<name>/unsaved.json          a process holds the session's state, newer than its snapshot
//                                          (markHeld), or the last stop's snapshot failed: either is said
//                                          to the session's next user
//   snapshots/<name>/snapshot.pkl.corrupt-<UTC time>, .unrestored-<UTC time>   kept aside, never deleted
//
// Files are written atomically (temp file + rename); a payload is renamed before its manifest. The
// layout of earlier versions (snapshots/<name>.pkl, <name>.json, <name>.spec.json) is moved into this
// one the first time a state directory is used (migrateLegacyLayout).
import { closeSync, existsSync, openSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, statSync, writeSync } from "node:fs";
import { AwreplError } from "../core/errors.ts";
import { writeFileAtomic } from "../core/files.ts";
import { basename, dirname, join } from "node:path";
import { SESSION_NAME } from "../core/names.ts";
import { processAlive } from "../core/process.ts";
import type { WireManifest } from "../protocol/runtime.ts";
import type { SessionSpec } from "../protocol/supervisor.ts";
import { ensurePrivateDir } from "../settings/home.ts";
import { displayFolder } from "./display.ts";
import { PAYLOAD, sessionDir, sessionFiles, snapshotsDir, SPEC } from "./snapshot_names.ts";

export { sessionDir, snapshotsDir };

/**
 * What the runtime writes beside a payload (docs/protocol.md, "Snapshot and restore"): the manifest of
 * the protocol, read leniently (older files lack the newer fields), plus the payload's SHA-256, which
 * the host writes for a snapshot that travelled over the protocol.
 */
export type SnapshotManifest =
  & Pick<WireManifest, "version" | "savedNames" | "skipped" | "pruned" | "bytes" | "pythonVersion" | "timestamp">
  & Partial<Pick<WireManifest, "serializer" | "serializers" | "support">>
  & { sha256?: string };

const UNSAVED = "unsaved.json";
/**
 * The size of the marker markHeld reserves: room for a failed stop's record, which a full disk lets
 * through only in place, over blocks the file already has.
 */
const MARKER_BYTES = 4096;

/** snapshots/<name>/keys.json: the session's idempotency keys, written with its default snapshot (idempotency.ts). */
export function keysPath(home: string, name: string): string {
  return join(sessionDir(home, name), "keys.json");
}

/** snapshots/<name>/history.json: the session's history, written with its default snapshot (lib/supervisor/history.ts). */
export function historyPath(home: string, name: string): string {
  return join(sessionDir(home, name), "history.json");
}

/** Creates session `name`'s directory (and snapshots/), private; returns it. */
export function ensureSessionDir(home: string, name: string): string {
  ensurePrivateDir(snapshotsDir(home));
  return ensurePrivateDir(sessionDir(home, name));
}

/** The default payload of session `name`. */
export function defaultSnapshotPath(home: string, name: string): string {
  return join(sessionDir(home, name), PAYLOAD);
}

/** The manifest beside a snapshot: `x.pkl` -> `x.json`, anything else -> `<path>.json`. */
export function manifestPath(snapshotPath: string): string {
  return snapshotPath.endsWith(".pkl") ? `${snapshotPath.slice(0, -4)}.json` : `${snapshotPath}.json`;
}

/** True when `path` is a session's default snapshot (files there are ours to move aside or remove). */
export function isDefaultSnapshot(home: string, path: string): boolean {
  const dir = dirname(path);
  return basename(path) === PAYLOAD && dirname(dir) === snapshotsDir(home) && SESSION_NAME.test(basename(dir));
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

/** Keys every manifest has (runtime.py's _MANIFEST_KEYS): a file without them is not ours to replace. */
const MANIFEST_KEYS = ["version", "savedNames", "timestamp"];
const MANIFEST_MAX_BYTES = 16 << 20;

/**
 * Refuses, before anything is written, to replace a file at a manifest's path that is not an awrepl
 * manifest: the name is derived from the snapshot's (x.pkl -> x.json), so it may be a file of the
 * user's (runtime.py's _check_manifest_target, for the snapshots the host writes itself).
 */
export function checkManifestTarget(path: string): void {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) return;
  const refuse = () => new AwreplError("snapshot_failed", `Refusing to overwrite ${path}: it exists and is not an awrepl snapshot manifest (move it away or snapshot to another path)`);
  if (!st.isFile() || st.size > MANIFEST_MAX_BYTES) throw refuse();
  const content = readObject(path);
  if (!content || !MANIFEST_KEYS.every((k) => k in content)) throw refuse();
}

/** When the snapshot at `snapshotPath` was taken (ms since the epoch): its manifest's time, else the file's; null when there is none. */
export function snapshotTime(snapshotPath: string): number | null {
  const manifest = readManifest(snapshotPath);
  if (manifest) return manifest.timestamp * 1000;
  return statSync(snapshotPath, { throwIfNoEntry: false })?.mtimeMs ?? null;
}

/** "2026-11-29 16:40:12 UTC" */
export function utcStamp(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** "40 s", "12 min", "3.5 h", "2 days": how long ago something was. */
export function ageText(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${(s / 3600).toFixed(1).replace(/\.0$/, "")} h`;
  return `${Math.round(s / 86_400)} days`;
}

/** "its snapshot of 2026-11-29 16:40:12 UTC (/path/x.pkl)": which state a session went back to. */
export function describeSnapshot(snapshotPath: string): string {
  const when = snapshotTime(snapshotPath);
  return `its snapshot of ${when === null ? "unknown time" : utcStamp(when)} (${snapshotPath})`;
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

/** Where the spec a session was created with is kept. */
export function specPath(home: string, name: string): string {
  return join(sessionDir(home, name), SPEC);
}

/**
 * Records how session `name` was made (interpreter, sandbox, directory, environment, limits), so a
 * host that re-creates it makes it the same way. Mode 0600: the environment may hold secrets.
 */
export function writeSessionSpec(home: string, name: string, spec: SessionSpec): void {
  ensureSessionDir(home, name);
  writeFileAtomic(specPath(home, name), JSON.stringify(spec));
}

/** The spec saved for session `name`, or null (none, or unreadable). */
export function readSessionSpec(home: string, name: string): SessionSpec | null {
  migrateLegacyLayout(home);
  return readObject(specPath(home, name)) as SessionSpec | null;
}

/** A stop whose snapshot of a session failed, kept beside it until its next user has been told. */
export type UnsavedState = {
  /** When the stop happened (ms since the epoch). */
  at: number;
  /** What stopped the supervisor: "stop requested", "idle for 1800000 ms", "received SIGTERM", ... */
  stop: string;
  error: string;
  /** The snapshot left on disk then, if any: what the next use restores (older than the session's state). */
  kept: { path: string; taken_at: number } | null;
};

function unsavedPath(home: string, name: string): string {
  return join(sessionDir(home, name), UNSAVED);
}

/**
 * Records that session `name`'s state could not be saved when its supervisor stopped. Written safely
 * (a temp file, then a rename) when the disk lets it; on a full disk, over the marker the session
 * reserved while it ran (markHeld), in place; throws when neither can be written.
 */
export function recordUnsaved(home: string, name: string, unsaved: UnsavedState): void {
  ensureSessionDir(home, name);
  const path = unsavedPath(home, name);
  try {
    writeFileAtomic(path, JSON.stringify(unsaved));
  } catch (err) {
    if (!writeOverMarker(path, unsaved)) throw err;
  }
}

/**
 * Writes `unsaved` over the reserved marker at `path`, padded to its size (JSON allows the trailing
 * spaces), so that no block needs to be allocated; an error too long for it is cut. False when there
 * is no marker to write over, or the write fails (a copy-on-write file system still needs space).
 */
function writeOverMarker(path: string, unsaved: UnsavedState): boolean {
  let fd: number | null = null;
  try {
    const size = statSync(path).size;
    let error = unsaved.error;
    let text = JSON.stringify(unsaved);
    while (Buffer.byteLength(text) > size && error.length > 0) {
      error = error.slice(0, Math.floor(error.length * 0.8));
      text = JSON.stringify({ ...unsaved, error: `${error}…` });
    }
    if (Buffer.byteLength(text) > size) return false;
    const bytes = Buffer.alloc(size, " ");
    bytes.write(text);
    fd = openSync(path, "r+");
    return writeSync(fd, bytes, 0, size, 0) === size;
  } catch {
    return false;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** The failed stop snapshot recorded for session `name`, or null. */
export function readUnsaved(home: string, name: string): UnsavedState | null {
  const value = readObject(unsavedPath(home, name)) as UnsavedState | null;
  return value && typeof value.at === "number" && typeof value.error === "string" ? value : null;
}

/** Forgets the record or marker (it was said, or a newer snapshot replaced the stale one). */
export function clearUnsaved(home: string, name: string): void {
  rmSync(unsavedPath(home, name), { force: true });
}

/** A process holds session `name`'s state (since when), which its snapshot on disk may not have. */
export type HeldState = { held_by: number; since: number };

/**
 * Marks session `name`'s state as held by this process from now on: newer, once a cell runs, than
 * any snapshot on disk. Written while the disk has room (when the session starts), not when a stop
 * fails, and removed (clearHeld) once a snapshot at the session's end succeeded; a marker left
 * behind tells the next user that state was lost, whatever ended its holder (a kill, a crash, a stop
 * on a full disk that refused its own record too). Padded to MARKER_BYTES: a failed stop's record
 * fits over it in place (recordUnsaved).
 */
export function markHeld(home: string, name: string, now = Date.now()): void {
  ensureSessionDir(home, name);
  const held: HeldState = { held_by: process.pid, since: now };
  writeFileAtomic(unsavedPath(home, name), JSON.stringify(held).padEnd(MARKER_BYTES, " "));
}

/** The marker of a process that held session `name`'s state and did not clear it, or null. */
export function readHeld(home: string, name: string): HeldState | null {
  const value = readObject(unsavedPath(home, name)) as HeldState | null;
  return value && typeof value.held_by === "number" && typeof value.since === "number" ? value : null;
}

/** True when another live process holds session `name`'s state now: its marker is its own to clear or replace. */
export function heldByAnother(home: string, name: string): boolean {
  const held = readHeld(home, name);
  return held !== null && held.held_by !== process.pid && processAlive(held.held_by);
}

/** Session `name`'s state is saved at its end: nothing is left for its next user to hear (unless another process holds it now). */
export function clearHeld(home: string, name: string): void {
  if (!heldByAnother(home, name)) clearUnsaved(home, name);
}

/**
 * "came back from its snapshot of <time> (<age> old[, <path>]): cells run after that snapshot are
 * not in it.": said of every restore at start (unsavedNotice says as much in its own words), so that
 * an older state never comes back as if it were current, whether or not a marker is left to say why.
 */
function cameBack(restored: { path?: string; takenAt: number }, now: number): string {
  const where = restored.path === undefined ? "" : `, ${restored.path}`;
  return `came back from its snapshot of ${utcStamp(restored.takenAt)} (${ageText(now - restored.takenAt)} old${where}): cells run after that snapshot are not in it.`;
}

/** A restore at start with nothing else to say: the snapshot's time and age. */
export function restoredNotice(name: string, takenAt: number, now = Date.now()): string {
  return `Session ${name} ${cameBack({ takenAt }, now)}`;
}

/** A restore at start after a holder that did not save the session's state (a marker it left). */
export function heldNotice(name: string, held: HeldState, restored: { path: string; takenAt: number }, now = Date.now()): string {
  return `Session ${name} was held by process ${held.held_by} from ${utcStamp(held.since)}, and its state was not saved when it ended: it ${cameBack(restored, now)}`;
}

/**
 * What the next user of a session is told about a recorded failed stop snapshot: which older state
 * came back (`restored`: the snapshot and when it was taken) and how old it is, or that the state is gone.
 */
export function unsavedNotice(name: string, unsaved: UnsavedState, restored: { path: string; takenAt: number } | null, now = Date.now()): string {
  const when = `when its supervisor stopped (${unsaved.stop}) ${ageText(now - unsaved.at)} ago`;
  const failed = `The snapshot of session ${name} ${when} failed: ${unsaved.error}.`;
  if (restored !== null) {
    return `${failed} It was restored from an OLDER snapshot, of ${utcStamp(restored.takenAt)} (${ageText(now - restored.takenAt)} old, ${restored.path}): anything done after that is lost.`;
  }
  return `${failed} Its state was lost; this call ran in a fresh worker made as the session was created.`;
}

/** The names of the sessions with a default snapshot in `home` (files moved aside do not count). */
export function savedSessionNames(home: string): string[] {
  migrateLegacyLayout(home);
  return sessionFiles(home).saved;
}

/** The names of the sessions `home` knows of: a saved spec or snapshot (a session whose stop snapshot failed included). */
export function knownSessionNames(home: string): string[] {
  migrateLegacyLayout(home);
  return sessionFiles(home).known;
}

/**
 * Removes session `name`'s default snapshot, manifest, spec and failure record, and its display files
 * (files kept aside stay: nothing is deleted that awrepl once chose to keep). Resolves whether there
 * was a snapshot or a spec: whether the session was known.
 */
export function forgetSnapshot(home: string, name: string): boolean {
  migrateLegacyLayout(home);
  const path = defaultSnapshotPath(home, name);
  const existed = existsSync(path) || existsSync(specPath(home, name));
  rmSync(path, { force: true });
  rmSync(manifestPath(path), { force: true });
  rmSync(specPath(home, name), { force: true });
  rmSync(keysPath(home, name), { force: true });
  rmSync(historyPath(home, name), { force: true });
  clearUnsaved(home, name);
  sweepTempFiles(path);
  rmSync(displayFolder(home, name, false), { recursive: true, force: true });
  try {
    rmdirSync(sessionDir(home, name)); // only when empty
  } catch {
    // Files kept aside (or none of it existed).
  }
  return existed;
}

/**
 * Removes the temp files of `snapshotPath` and its manifest whose writer is gone: `.<file>.<pid>.tmp`
 * (runtime.py's _atomic_write) and `.<file>.<pid>.<random>.tmp` (the host's). A worker or supervisor
 * killed mid-snapshot leaves one behind.
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
    for (const stem of stems) {
      if (!name.startsWith(`.${stem}.`)) continue;
      const m = /^(\d+)(?:\.[a-z0-9]+)?\.tmp$/.exec(name.slice(stem.length + 2));
      if (m && !processAlive(Number(m[1]))) rmSync(join(dir, name), { force: true });
    }
  }
}

/** The runtime's reasons for a payload it could not read at all (rather than one name it could not revive). */
export function isUnreadableReason(reason: string | undefined): boolean {
  return reason !== undefined && (reason.startsWith("corrupt snapshot") || reason.startsWith("cannot read snapshot"));
}

function readObject(path: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(readFileSync(path, "utf8")) as unknown;
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// The layout of awrepl 0.1 (one flat directory): snapshots/<name>.pkl, <name>.json (manifest),
// <name>.spec.json (spec), and files kept aside as <name>.pkl.corrupt-<time>. Its names collide:
// session `x`'s spec and session `x.spec`'s manifest are both `x.spec.json`. A file's content tells
// which of the two it is (a manifest has `savedNames` and a numeric `timestamp`; a spec has neither).
// ---------------------------------------------------------------------------------------------

const migrated = new Set<string>();

export type Migration = { moved: string[]; left: string[] };

/**
 * Moves the flat layout's files of `home` into per-session directories, once per process and home
 * (a later call is free). Nothing is deleted: a file that cannot be placed (its new name is taken, or
 * it belongs to no valid session name) stays where it is and is listed in `left`. Safe to run by two
 * processes at once (each move is one rename; a file another process moved first is skipped).
 */
export function migrateLegacyLayout(home: string): Migration {
  const result: Migration = { moved: [], left: [] };
  if (migrated.has(home)) return result;
  migrated.add(home);
  const dir = snapshotsDir(home);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return result;
  }
  for (const file of names) {
    const target = legacyTarget(dir, file);
    if (target === undefined) continue; // a session directory, or not a file of ours
    if (target === null) {
      result.left.push(file);
      continue;
    }
    const [session, newName] = target;
    const to = join(dir, session, newName);
    try {
      ensurePrivateDir(join(dir, session));
      if (existsSync(to)) {
        result.left.push(file);
        continue;
      }
      renameSync(join(dir, file), to);
      result.moved.push(`${file} -> ${session}/${newName}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") result.left.push(file);
    }
  }
  return result;
}

/** Where a flat-layout file goes: [session, file name]; null: ours but unplaceable; undefined: not ours. */
function legacyTarget(dir: string, file: string): [string, string] | null | undefined {
  let st;
  try {
    st = statSync(join(dir, file));
  } catch {
    return undefined;
  }
  if (!st.isFile()) return undefined;
  if (file.startsWith(".")) {
    // A temp file of a dead writer: nothing to keep. One of a live writer (an old supervisor still
    // stopping) is left alone.
    const m = /\.(\d+)(?:\.[a-z0-9]+)?\.tmp$/.exec(file);
    if (m && !processAlive(Number(m[1]))) rmSync(join(dir, file), { force: true });
    return undefined;
  }
  const aside = /^(.+)\.(pkl|json)(\.(?:corrupt|unrestored)-\d{8}T\d{6}Z)$/.exec(file);
  const plain = aside ? null : /^(.+)\.(pkl|json)$/.exec(file);
  const m = aside ?? plain;
  if (!m) return null;
  const [, stem, ext, suffix = ""] = m as unknown as [string, string, string, string?];
  if (ext === "pkl") return SESSION_NAME.test(stem) ? [stem, `${PAYLOAD}${suffix}`] : null;
  // A .json: a manifest of session `stem`, or (when `stem` ends in .spec) the spec of the rest.
  const content = readObject(join(dir, file));
  const isManifest = content !== null && Array.isArray(content.savedNames) && typeof content.timestamp === "number";
  if (isManifest) return SESSION_NAME.test(stem) ? [stem, `snapshot.json${suffix}`] : null;
  if (stem.endsWith(".spec") && !suffix) {
    const session = stem.slice(0, -5);
    return SESSION_NAME.test(session) ? [session, SPEC] : null;
  }
  return null;
}
