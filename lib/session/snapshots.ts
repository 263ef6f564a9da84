// One session's snapshots: writing and reading them through the session's worker, the latest one (what
// a lost worker goes back to), autosave's change check, and the notes a restore or an autosave leaves
// for the session's next result. The files: snapshot_files.ts; the whole story: docs/persistence.md.
import { existsSync, statSync } from "node:fs";
import { AwreplError } from "../core/errors.ts";
import type { DoneEvent, NameFailure, RuntimeRequest } from "../protocol/runtime.ts";
import type { RestoreReport } from "../protocol/result.ts";
import {
  checkManifestTarget,
  clearUnsaved,
  defaultSnapshotPath,
  ensureSessionDir,
  heldNotice,
  isDefaultSnapshot,
  isUnreadableReason,
  manifestPath,
  markHeld,
  migrateLegacyLayout,
  moveAside,
  readHeld,
  readManifest,
  readUnsaved,
  restoredNotice,
  snapshotTime,
  sweepTempFiles,
  unsavedNotice,
} from "./snapshot_files.ts";
import type { SnapshotReport } from "../protocol/api.ts";
import { openPayload, PayloadFile, type PayloadSource, restoreRequest } from "../worker/payload.ts";
import type { RequestHandlers, Worker } from "../worker/worker.ts";
import { writeFileAtomic } from "../core/files.ts";

type Body<T extends RuntimeRequest["type"]> = Omit<Extract<RuntimeRequest, { type: T }>, "id">;
type AnyBody = Body<"snapshot"> | Body<"restore"> | Body<"variables"> | Body<"execute">;

/**
 * The session's request path: the request under the session's deadline (or `timeoutMs`).
 * `recoverOnKill: false` keeps a kill during a restore from restoring again; `handlers` hear the
 * request's events; `onSent` runs once the request is written to `worker` with `id`.
 */
export type SnapshotRequester = (
  body: AnyBody,
  options: {
    recoverOnKill?: boolean;
    timeoutMs?: number;
    handlers?: RequestHandlers;
    onSent?: (worker: Worker, id: string) => void;
    payload?: () => AsyncIterable<Uint8Array>;
  },
) => Promise<DoneEvent>;

export type SnapshotRead = { report: RestoreReport } | { missing: true } | { missing: false; error: string };

/** After a lost worker: restored from `state` (which snapshot, said in words), or not, and why. */
export type Recovery = { report: RestoreReport; state: string } | { error: string; state: string };

/** Up to this payload size autosave saves after every cell, without looking for a change first. */
export const ALWAYS_SAVE_BYTES = 256 * 1024;

export type SnapshotCaps = { maxBytes: number; maxVariableBytes: number };

/**
 * The largest snapshot file a restore reads: the payload cap (names only) plus room for the
 * payload's own framing. 0: no cap.
 */
export function restoreCap(maxBytes: number): number {
  return maxBytes > 0 ? maxBytes + Math.max(1024 * 1024, Math.ceil(maxBytes / 100)) : 0;
}

/**
 * Refuses, before any worker sees it, a file a restore must not read: not a regular file (a FIFO
 * would block the worker, /dev/zero never ends), or larger than `cap` bytes. False: nothing there.
 */
export function checkRestoreSource(path: string, cap: number): boolean {
  let st;
  try {
    st = statSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw new AwreplError("restore_failed", `Cannot read snapshot ${path}: ${(err as Error).message}`);
  }
  if (!st.isFile()) {
    const kind = st.isFIFO()
      ? "a FIFO"
      : st.isCharacterDevice()
      ? "a character device"
      : st.isBlockDevice()
      ? "a block device"
      : st.isDirectory()
      ? "a directory"
      : st.isSocket()
      ? "a socket"
      : "not a regular file";
    throw new AwreplError("usage", `Cannot restore from ${path}: it is ${kind}, not a snapshot file`);
  }
  if (cap > 0 && st.size > cap) {
    throw new AwreplError("usage", `Cannot restore from ${path}: it is ${st.size} bytes, over the snapshot cap of ${cap} bytes (snapshotMaxBytes, plus room for framing)`);
  }
  return true;
}

/** How snapshot bytes move between the worker and the files (ReplSessionOptions.snapshotTransfer). */
export type SnapshotTransfer = "path" | "stream";

export class SessionSnapshots {
  /** The snapshot this session last wrote or restored: what a lost worker goes back to. */
  latest: string | null = null;
  /** A default snapshot restored with failed names: kept aside before anything overwrites it. */
  private partlyRestored: string | null = null;
  /** The namespace as autosave last saved it (names and short reprs); null: not saved yet. */
  private savedFingerprint: string | null = null;
  /** Size of the last autosave's payload; null: none yet. */
  private autosavedBytes: number | null = null;
  /** restoreAtStart said that the last stop could not save this session (its state is older, or gone). */
  toldUnsaved = false;
  /** restoreAtStart marked this process as the holder of the session's state (snapshot_files.ts markHeld). */
  private holding = false;
  /** Names the last autosave skipped, so a new one is reported once, not after every cell. */
  private autosaveSkipped = new Set<string>();
  /** Runs after each default snapshot is written: what is kept with it (the idempotency keys) is written then too. */
  afterDefaultWrite: (() => void) | null = null;

  constructor(
    private readonly id: string,
    private readonly home: string,
    private readonly caps: SnapshotCaps,
    readonly transfer: SnapshotTransfer,
    private readonly request: SnapshotRequester,
    /** Something the session's next result says once (`notice`). */
    private readonly note: (text: string) => void,
  ) {}

  /** <state>/snapshots/<id>/snapshot.pkl, its directory created. */
  defaultPath(): string {
    ensureSessionDir(this.home, this.id);
    return defaultSnapshotPath(this.home, this.id);
  }

  /**
   * Saves the namespace to `target`, a path on this machine: written by the worker itself (`path`),
   * or streamed over the protocol and written here (`stream`). `durable`: fsync'd before it is renamed
   * into place (an explicit snapshot, the one at a stop); an autosave passes false (the next one follows soon).
   */
  async write(target: string, timeoutMs?: number, maxVariableMs?: number, durable = true): Promise<SnapshotReport> {
    if (target === this.partlyRestored && existsSync(target)) {
      const aside = moveAside(target, "unrestored");
      if (aside) this.note(`The earlier snapshot of session ${this.id} held names this worker could not restore; it was kept as ${aside}.`);
      this.partlyRestored = null;
    }
    const done = this.transfer === "stream" ? await this.writeStreamed(target, timeoutMs, maxVariableMs, durable) : await this.writeByPath(target, timeoutMs, maxVariableMs, durable);
    this.latest = target;
    // The state on disk is current again: an earlier failed stop snapshot no longer needs saying.
    // Not so the marker of a session this process holds: its next cell is newer than this snapshot.
    const isDefault = isDefaultSnapshot(this.home, target);
    if (!this.holding && isDefault) clearUnsaved(this.home, this.id);
    // This session's own default snapshot (not a path that happens to be another session's).
    if (isDefault && target === defaultSnapshotPath(this.home, this.id)) this.afterDefaultWrite?.();
    return {
      path: target,
      saved: done.saved ?? [],
      skipped: (done.skipped ?? []).map((s): NameFailure => (typeof s === "string" ? { name: s, reason: "" } : s)),
      pruned: done.pruned ?? [],
      bytes: done.bytes ?? 0,
    };
  }

  /** The caps every snapshot request carries (0 means no cap, as a timeout of 0 means none). */
  private capped(request: Body<"snapshot">, maxVariableMs?: number): Body<"snapshot"> {
    if (this.caps.maxBytes > 0) request.max_bytes = this.caps.maxBytes;
    if (this.caps.maxVariableBytes > 0) request.max_variable_bytes = this.caps.maxVariableBytes;
    if (maxVariableMs !== undefined && maxVariableMs > 0) request.max_variable_ms = maxVariableMs;
    return request;
  }

  private async writeByPath(target: string, timeoutMs?: number, maxVariableMs?: number, durable = true): Promise<DoneEvent> {
    let done: DoneEvent;
    const request = this.capped({ type: "snapshot", path: target, manifest_path: manifestPath(target) }, maxVariableMs);
    if (!durable) request.fsync = false;
    try {
      done = await this.request(request, { timeoutMs });
    } catch (err) {
      // A worker killed while it wrote leaves its temp file beside the target (the runtime streams the
      // payload into it): its writer is gone now, so it goes (the previous snapshot stays in place).
      sweepTempFiles(target);
      throw err;
    }
    if (done.status !== "ok") throw new AwreplError("snapshot_failed", `Snapshot of session ${this.id} to ${target} failed: ${done.reason ?? "no reason given"}`);
    return done;
  }

  /**
   * The payload streams here in pieces and is written to a temp file beside `target` as it comes;
   * more than the cap allows stops the snapshot (nothing past the cap is written); the size and
   * sha256 are checked against the worker's `done`; then the file is renamed into place and its
   * manifest written beside it. A failure at any point leaves the previous file where it was.
   */
  private async writeStreamed(target: string, timeoutMs?: number, maxVariableMs?: number, durable = true): Promise<DoneEvent> {
    const failed = (why: string) => new AwreplError("snapshot_failed", `Snapshot of session ${this.id} to ${target} failed: ${why}`);
    checkManifestTarget(manifestPath(target));
    const file = new PayloadFile(target);
    const cap = restoreCap(this.caps.maxBytes);
    let over = false;
    let stop: () => void = () => {};
    const handlers: RequestHandlers = {
      data: (piece, seq) => {
        if (over) return;
        if (cap > 0 && file.bytes + piece.length > cap) {
          over = true; // not written: the worker is asked to stop sending
          stop();
          return;
        }
        file.handlers.data?.(piece, seq);
      },
    };
    try {
      const done = await this.request(this.capped({ type: "snapshot", to: "host" }, maxVariableMs), {
        timeoutMs,
        handlers,
        onSent: (worker, id) => (stop = () => worker.interrupt(id)),
      });
      if (over) throw failed(`the worker sent more than the snapshot cap of ${cap} bytes; nothing was kept`);
      if (done.status !== "ok") throw failed(done.reason ?? "no reason given");
      try {
        file.commit(done, durable);
      } catch (err) {
        throw failed((err as Error).message.replace(/^Snapshot to .* failed: /, ""));
      }
      if (done.manifest) {
        try {
          writeFileAtomic(manifestPath(target), `${JSON.stringify({ ...done.manifest, sha256: done.sha256 }, null, 2)}\n`);
        } catch (err) {
          // The payload is whole and in place; a missing manifest only costs its time and names.
          throw failed(`the payload was saved, but its manifest ${manifestPath(target)} could not be written: ${(err as Error).message}`);
        }
      }
      return done;
    } finally {
      file.discard();
    }
  }

  /** Restores `path` into the live worker; a default snapshot that cannot be read is moved aside. */
  async read(path: string, recoverOnKill = true, timeoutMs?: number): Promise<SnapshotRead> {
    if (!checkRestoreSource(path, restoreCap(this.caps.maxBytes))) return { missing: true };
    const done = this.transfer === "stream" ? await this.readStreamed(path, recoverOnKill, timeoutMs) : await this.request({ type: "restore", path }, { recoverOnKill, timeoutMs });
    if (done === null) return { missing: true };
    if (done.status === "ok") {
      if (done.reason === "snapshot not found") return { missing: true };
      this.latest = path;
      const failed = done.failed ?? [];
      // Names this worker could not revive (dill missing, a module not installed) are still in the
      // file: it must not be replaced by a snapshot without them.
      this.partlyRestored = failed.length > 0 && isDefaultSnapshot(this.home, path) ? path : null;
      // Names the snapshot could not save are reported here too: whoever sees this restore (often
      // not whoever saw the snapshot, taken when a supervisor stopped) learns they are gone.
      const notSaved = (readManifest(path)?.skipped ?? []).map((s): NameFailure => ({ name: s.name, reason: `not in the snapshot: ${s.reason}` }));
      const restored = done.restored ?? [];
      return { report: { source: path, restored, failed: [...failed, ...notSaved] } };
    }
    let error = done.reason ?? "no reason given";
    if (isUnreadableReason(done.reason) && isDefaultSnapshot(this.home, path)) {
      const aside = moveAside(path);
      error += aside ? `; the file was moved aside to ${aside}` : "; it could not be moved aside";
    }
    return { missing: false, error };
  }

  /**
   * The file's bytes streamed to the worker (it cannot read this machine's files): hashed first, its
   * size declared (already checked against the cap), then sent piece by piece as the pipe takes them.
   * Null when the file went away meanwhile.
   */
  private async readStreamed(path: string, recoverOnKill: boolean, timeoutMs?: number): Promise<DoneEvent | null> {
    let source: PayloadSource;
    try {
      source = await openPayload(path, restoreCap(this.caps.maxBytes));
    } catch (err) {
      if (!existsSync(path)) return null;
      throw err;
    }
    return this.request(restoreRequest(source), { recoverOnKill, timeoutMs, payload: () => source.pieces() });
  }

  /**
   * At start: the default snapshot, if any, into the first worker. Failures become a note; null:
   * nothing restored. Whatever comes back is said with its snapshot's age, and so is what the marker
   * beside the session says of its last holder (a failed stop, or a holder that ended without saving
   * it); then this process marks itself as the holder.
   */
  async restoreAtStart(isClosed: () => boolean): Promise<RestoreReport | null> {
    migrateLegacyLayout(this.home);
    const path = defaultSnapshotPath(this.home, this.id);
    sweepTempFiles(path);
    const unsaved = readUnsaved(this.home, this.id);
    const held = unsaved ? null : readHeld(this.home, this.id);
    const tell = (restoredFrom: string | null) => {
      if (unsaved || held) clearUnsaved(this.home, this.id);
      const takenAt = restoredFrom === null ? null : snapshotTime(restoredFrom);
      const restored = restoredFrom !== null && takenAt !== null ? { path: restoredFrom, takenAt } : null;
      // A stop that could not save this session: said once, with which (older) state came back, if
      // any. Unless the snapshot was written after the stop began: that stop's own snapshot finished
      // after all (it was late).
      if (unsaved && !(restored && restored.takenAt >= unsaved.at)) {
        this.toldUnsaved = true;
        this.note(unsavedNotice(this.id, unsaved, restored));
        return;
      }
      // Nothing came back: whether state was lost is the host's to say (it knows whether the session existed).
      if (!restored) return;
      this.note(held ? heldNotice(this.id, held, restored) : restoredNotice(this.id, restored.takenAt));
    };
    const report = await this.restoreDefault(path, isClosed, tell);
    this.hold();
    return report;
  }

  private async restoreDefault(path: string, isClosed: () => boolean, tell: (restoredFrom: string | null) => void): Promise<RestoreReport | null> {
    if (!existsSync(path)) {
      tell(null);
      return null;
    }
    try {
      const outcome = await this.read(path);
      tell("report" in outcome ? path : null);
      if ("report" in outcome) return outcome.report;
      if (!outcome.missing) this.note(`Session ${this.id} could not be restored: ${outcome.error}. It starts fresh.`);
    } catch (err) {
      // Closed meanwhile: nobody hears this start, so the marker stays for the next one.
      if (isClosed()) throw err;
      tell(null);
      // The payload killed or hung its worker (a __reduce__ that exits, a C extension that crashes):
      // keep it aside, or the next snapshot of the fresh session would replace every good name in it.
      const aside = moveAside(path, "unrestored");
      const kept = aside ? ` The file was kept as ${aside}.` : "";
      this.note(`Session ${this.id} could not be restored from ${path}: ${(err as Error).message}. It starts fresh.${kept}`);
    }
    return null;
  }

  /** This process holds the session's state from now on: marked beside it while the disk has room. */
  private hold(): void {
    try {
      markHeld(this.home, this.id);
      this.holding = true;
    } catch {
      // A disk already full: a supervisor refuses the session right after, when its spec cannot be
      // written either; a library session runs on, with only the age of a later restore to warn.
    }
  }

  /**
   * After a lost worker (a fresh one is running): restores the latest snapshot into it. Null when there
   * is none. Never throws; a snapshot that cannot be restored is not tried again (a payload that kills
   * its worker must not do so on every call).
   */
  async recover(describe: (path: string) => string): Promise<Recovery | null> {
    const path = this.latest;
    if (!path || !existsSync(path)) return null;
    const state = describe(path);
    try {
      const outcome = await this.read(path, false);
      if ("report" in outcome) return { report: outcome.report, state };
      this.latest = null;
      return { error: outcome.missing ? "the file is gone" : outcome.error, state };
    } catch (err) {
      this.latest = null;
      return { error: (err as Error).message, state };
    }
  }

  /**
   * Autosave: snapshots to the default place after a cell. A small namespace (its last autosave at
   * most ALWAYS_SAVE_BYTES) is saved every time: that is the only way to see every change, and it
   * costs milliseconds. A larger one is saved only when its `variables` listing in `form: "repr"`
   * (every name with its type and short repr; the default one-line form says only a frame's shape and
   * dtypes) changed: cheap, but blind to a change its short repr does not show, such as an append to
   * a long list (docs/persistence.md).
   */
  async autosave(isClosed: () => boolean): Promise<void> {
    try {
      const target = this.defaultPath();
      let fingerprint: string | null = null;
      if (this.autosavedBytes === null || this.autosavedBytes > ALWAYS_SAVE_BYTES) {
        const listing = await this.request({ type: "variables", form: "repr" }, {});
        if (listing.status !== "ok") throw new Error(listing.reason ?? "the variables check failed");
        fingerprint = JSON.stringify(listing.variables ?? {});
        if (fingerprint === this.savedFingerprint && this.latest === target && existsSync(target)) return;
      }
      const report = await this.write(target, undefined, undefined, false);
      this.autosavedBytes = report.bytes;
      this.savedFingerprint = fingerprint;
      const fresh = report.skipped.filter((s) => !this.autosaveSkipped.has(s.name));
      this.autosaveSkipped = new Set(report.skipped.map((s) => s.name));
      if (fresh.length > 0) {
        const list = fresh.map((s) => `${s.name} (${s.reason})`).join(", ");
        this.note(`Autosave could not save ${list}; a worker loss would lose ${fresh.length === 1 ? "it" : "them"}.`);
      }
    } catch (err) {
      if (isClosed()) return;
      this.savedFingerprint = null;
      this.autosavedBytes = null;
      this.note(`Autosave after the last cell failed: ${(err as Error).message}`);
    }
  }
}

/** What a lost cell's result says happened to the session's state after the loss. */
export function aftermath(back: Recovery): string {
  if ("report" in back) {
    const failed = back.report.failed.length ? `; not restored: ${back.report.failed.map((f) => `${f.name} (${f.reason})`).join(", ")}` : "";
    return `the session went back to ${back.state}: ${back.report.restored.length} name(s) restored${failed}.`;
  }
  return `the session's state was lost: ${back.state} could not be restored (${back.error}). The session continues in a fresh worker.`;
}
