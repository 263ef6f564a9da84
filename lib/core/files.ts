// Writing a file so that a reader sees the old content or the new, never a part: a temporary file
// beside it, then a rename. A failed write (a full disk) removes its temporary file: nothing is left.
import { readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): void {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
  try {
    writeFileSync(tmp, data, { mode });
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // Not created, or already renamed: the write's error is the one to report.
    }
    throw err;
  }
}

/** The first 4 KiB of a small text file (a version file, a gitfile), or null when it cannot be read. */
export function readHead(file: string): string | null {
  try {
    return readFileSync(file, "utf8").slice(0, 4096);
  } catch {
    return null;
  }
}
