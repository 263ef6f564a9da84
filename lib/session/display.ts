// Display files: the images and other binary payloads of a session's display entries, one file each in
// the session's own folder under the state directory (<home>/display/<session>/), so that a JSON
// result carries a path instead of megabytes of base64. The folder is bounded: past a count or a
// size cap the oldest files go (the newest is always kept). It is removed when the session closes,
// except a folder kept on purpose (an ephemeral `run`: it prints the paths as it ends).
import { readdirSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ensurePrivateDir } from "../settings/home.ts";
import { extensionFor } from "./mime.ts";

/**
 * Caps of one folder, and of one payload written to it or kept inline (absent: the default,
 * DEFAULTS.displayMaxPayloadBytes); 0 = no limit.
 */
export type DisplayFileLimits = { maxFiles: number; maxBytes: number; maxPayloadBytes?: number };

type KnownFile = { path: string; bytes: number };

/** The folder of a session's display files: <home>/display/<id>, or /_<id> for one kept after close (no session name starts with "_"). */
export function displayFolder(home: string, id: string, kept: boolean): string {
  return join(home, "display", kept ? `_${id}` : id);
}

export class DisplayFiles {
  private seq = 0;
  /** Files in the folder, oldest first: read from the folder at the first write, then kept up to date. */
  private known: KnownFile[] | null = null;
  private total = 0;

  /** `prefix` starts every file name (the session id: a file moved elsewhere still says whose it is). */
  constructor(
    readonly dir: string,
    readonly prefix: string,
    readonly limits: DisplayFileLimits,
    readonly keepOnClose = false,
  ) {}

  /** Writes one payload; returns its path, or (a full disk, say) a text saying why it was not written. */
  write(mime: string, bytes: Uint8Array): { path: string } | { failure: string } {
    const name = `${this.prefix}-${Date.now().toString(36)}-${process.pid.toString(36)}-${++this.seq}.${extensionFor(mime)}`;
    const path = join(this.dir, name);
    try {
      const known = this.folder();
      writeFileSync(path, bytes, { mode: 0o600, flag: "wx" });
      known.push({ path, bytes: bytes.length });
      this.total += bytes.length;
    } catch (err) {
      // A full disk must not lose the cell's result: say what happened in place of the path.
      return { failure: `[${mime} display data (${bytes.length} bytes) not written to ${path}: ${(err as Error).message}]` };
    }
    this.evict();
    return { path };
  }

  /** How many files and bytes the folder holds, as far as this session knows. */
  get usage(): { files: number; bytes: number } {
    return { files: this.known?.length ?? 0, bytes: this.total };
  }

  /** Removes the folder with every file in it, unless it is kept. */
  remove(): void {
    if (this.keepOnClose) return;
    this.known = null;
    this.total = 0;
    try {
      rmSync(this.dir, { recursive: true, force: true });
    } catch {
      // Nothing to do about it at close; the next session of this name reuses (and bounds) the folder.
    }
  }

  /** The folder's files, read once (a session re-created after a crash, or the kept folder other runs share). */
  private folder(): KnownFile[] {
    if (this.known) return this.known;
    ensurePrivateDir(dirname(this.dir));
    ensurePrivateDir(this.dir);
    const found: (KnownFile & { mtime: number })[] = [];
    for (const name of readdirSync(this.dir)) {
      const path = join(this.dir, name);
      const st = statSync(path, { throwIfNoEntry: false });
      if (st?.isFile()) found.push({ path, bytes: st.size, mtime: st.mtimeMs });
    }
    found.sort((a, b) => a.mtime - b.mtime || (a.path < b.path ? -1 : 1));
    this.known = found.map(({ path, bytes }) => ({ path, bytes }));
    this.total = found.reduce((sum, f) => sum + f.bytes, 0);
    return this.known;
  }

  /** The oldest files go while the folder is over a cap; the newest stays even when it alone is over. */
  private evict(): void {
    const known = this.known;
    if (!known) return;
    const { maxFiles, maxBytes } = this.limits;
    let drop = 0;
    let total = this.total;
    while (known.length - drop > 1 && ((maxFiles > 0 && known.length - drop > maxFiles) || (maxBytes > 0 && total > maxBytes))) {
      const oldest = known[drop] as KnownFile;
      try {
        unlinkSync(oldest.path);
      } catch {
        // Already gone (moved to a --display-dir, removed by hand): it no longer counts either way.
      }
      total -= oldest.bytes;
      drop++;
    }
    if (drop > 0) {
      known.splice(0, drop);
      this.total = total;
    }
  }
}
