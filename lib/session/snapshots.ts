// One session's snapshots: writing and reading them through the session's worker, the latest one (what
// a lost worker goes back to), autosave's change check, and the notes a restore or an autosave leaves
// for the session's next result. The files: snapshot_files.ts; the whole story: docs/persistence.md.
import { existsSync } from "node:fs";
import { AwreplError } from "../core/errors.ts";
import { ensurePrivateDir } from "../settings/home.ts";
import type { DoneEvent, NameFailure, RuntimeRequest } from "../protocol/runtime.ts";
import type { RestoreReport } from "../protocol/result.ts";
import {
  defaultSnapshotPath,
  isDefaultSnapshot,
  isUnreadableReason,
  manifestPath,
  moveAside,
  readManifest,
  snapshotsDir,
  sweepTempFiles,
} from "./snapshot_files.ts";
import type { SnapshotReport } from "../protocol/api.ts";

type Body<T extends RuntimeRequest["type"]> = Omit<Extract<RuntimeRequest, { type: T }>, "id">;
type AnyBody = Body<"snapshot"> | Body<"restore"> | Body<"variables"> | Body<"execute">;

/**
 * The session's request path: the request under the session's deadline. `recoverOnKill: false`
 * keeps a kill during a restore from restoring again.
 */
export type SnapshotRequester = (body: AnyBody, recoverOnKill: boolean) => Promise<DoneEvent>;

export type SnapshotRead = { report: RestoreReport } | { missing: true } | { missing: false; error: string };

/** After a lost worker: restored from `state` (which snapshot, said in words), or not, and why. */
export type Recovery = { report: RestoreReport; state: string } | { error: string; state: string };

/** Up to this payload size autosave saves after every cell, without looking for a change first. */
export const ALWAYS_SAVE_BYTES = 256 * 1024;

export type SnapshotCaps = { maxBytes: number; maxVariableBytes: number };

export class SessionSnapshots {
  /** The snapshot this session last wrote or restored: what a lost worker goes back to. */
  latest: string | null = null;
  /** A default snapshot restored with failed names: kept aside before anything overwrites it. */
  private partlyRestored: string | null = null;
  /** The namespace as autosave last saved it (names and short reprs); null: not saved yet. */
  private savedFingerprint: string | null = null;
  /** Size of the last autosave's payload; null: none yet. */
  private autosavedBytes: number | null = null;
  /** Names the last autosave skipped, so a new one is reported once, not after every cell. */
  private autosaveSkipped = new Set<string>();

  constructor(
    private readonly id: string,
    private readonly home: string,
    private readonly caps: SnapshotCaps,
    private readonly request: SnapshotRequester,
    /** Something the session's next result says once (`notice`). */
    private readonly note: (text: string) => void,
  ) {}

  /** <state>/snapshots/<id>.pkl, its directory created. */
  defaultPath(): string {
    ensurePrivateDir(snapshotsDir(this.home));
    return defaultSnapshotPath(this.home, this.id);
  }

  async write(target: string): Promise<SnapshotReport> {
    const request: Body<"snapshot"> = { type: "snapshot", path: target, manifest_path: manifestPath(target) };
    // 0 means no cap, as a timeout of 0 means none.
    if (this.caps.maxBytes > 0) request.max_bytes = this.caps.maxBytes;
    if (this.caps.maxVariableBytes > 0) request.max_variable_bytes = this.caps.maxVariableBytes;
    if (target === this.partlyRestored && existsSync(target)) {
      const aside = moveAside(target, "unrestored");
      if (aside) this.note(`The earlier snapshot of session ${this.id} held names this worker could not restore; it was kept as ${aside}.`);
      this.partlyRestored = null;
    }
    const done = await this.request(request, true);
    if (done.status !== "ok") throw new AwreplError("snapshot_failed", `Snapshot of session ${this.id} to ${target} failed: ${done.reason ?? "no reason given"}`);
    this.latest = target;
    return {
      path: target,
      saved: done.saved ?? [],
      skipped: (done.skipped ?? []).map((s): NameFailure => (typeof s === "string" ? { name: s, reason: "" } : s)),
      pruned: done.pruned ?? [],
      bytes: done.bytes ?? 0,
    };
  }

  /** Restores `path` into the live worker; a default snapshot that cannot be read is moved aside. */
  async read(path: string, recoverOnKill = true): Promise<SnapshotRead> {
    const done = await this.request({ type: "restore", path }, recoverOnKill);
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

  /** At start: the default snapshot, if any, into the first worker. Failures become a note; null: nothing restored. */
  async restoreAtStart(isClosed: () => boolean): Promise<RestoreReport | null> {
    const path = defaultSnapshotPath(this.home, this.id);
    sweepTempFiles(path);
    if (!existsSync(path)) return null;
    try {
      const outcome = await this.read(path);
      if ("report" in outcome) return outcome.report;
      if (!outcome.missing) this.note(`Session ${this.id} could not be restored: ${outcome.error}. It starts fresh.`);
    } catch (err) {
      if (isClosed()) throw err;
      // The payload killed or hung its worker (a __reduce__ that exits, a C extension that crashes):
      // keep it aside, or the next snapshot of the fresh session would replace every good name in it.
      const aside = moveAside(path, "unrestored");
      const kept = aside ? ` The file was kept as ${aside}.` : "";
      this.note(`Session ${this.id} could not be restored from ${path}: ${(err as Error).message}. It starts fresh.${kept}`);
    }
    return null;
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
   * costs milliseconds. A larger one is saved only when its `variables` listing (every name with its
   * type and short repr) changed: cheap, but blind to a change its short repr does not show, such as
   * an append to a long list (docs/persistence.md).
   */
  async autosave(isClosed: () => boolean): Promise<void> {
    try {
      const target = this.defaultPath();
      let fingerprint: string | null = null;
      if (this.autosavedBytes === null || this.autosavedBytes > ALWAYS_SAVE_BYTES) {
        const listing = await this.request({ type: "variables" }, true);
        if (listing.status !== "ok") throw new Error(listing.reason ?? "the variables check failed");
        fingerprint = JSON.stringify(listing.variables ?? {});
        if (fingerprint === this.savedFingerprint && this.latest === target && existsSync(target)) return;
      }
      const report = await this.write(target);
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
