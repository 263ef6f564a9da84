// Line history for `awrepl serve`, one file per session under <state>/history/ so that two `serve` runs
// of the same name share it. One entry per line, oldest first (like Python's ~/.python_history), appended
// as lines are entered so concurrent runs never overwrite each other. The file is bounded: when it has
// grown past twice the limit it is rewritten with the newest `limit` entries on the next start.
import { appendFileSync, readFileSync } from "node:fs";
import { writeFileAtomic } from "../../core/files.ts";
import { join } from "node:path";
import { ensurePrivateDir } from "../../settings/home.ts";

export const HISTORY_LIMIT = 1000;

/** The file name unnamed sessions share: not a valid session name, so it never collides with one. */
export const UNNAMED_HISTORY = "_unnamed";

export function historyPath(home: string, session: string | undefined): string {
  return join(home, "history", session ?? UNNAMED_HISTORY);
}

export class HistoryFile {
  readonly path: string;
  readonly limit: number;
  private last: string | undefined;
  private failed = false;

  constructor(path: string, limit = HISTORY_LIMIT) {
    this.path = path;
    this.limit = limit;
  }

  /** The newest `limit` entries, newest first (the order node:readline's `history` option takes). */
  load(): string[] {
    let lines: string[];
    try {
      lines = readFileSync(this.path, "utf8").split("\n").filter((line) => line.trim() !== "");
    } catch {
      return []; // no history yet, or unreadable: the REPL works without it
    }
    const kept = lines.slice(-this.limit);
    if (lines.length > 2 * this.limit) this.compact(kept);
    this.last = kept.at(-1);
    return kept.reverse();
  }

  /** Records one entered line; blank lines and an immediate repeat are skipped, as readline does. */
  append(line: string): void {
    if (this.failed || line.trim() === "" || line === this.last || line.includes("\n")) return;
    this.last = line;
    try {
      ensurePrivateDir(join(this.path, ".."));
      appendFileSync(this.path, `${line}\n`, { mode: 0o600 });
    } catch {
      this.failed = true; // a read-only or full disk must not break the session; stop trying
    }
  }

  private compact(kept: string[]): void {
    try {
      writeFileAtomic(this.path, kept.map((line) => `${line}\n`).join(""));
    } catch {
      // Compaction is housekeeping: the next start tries again.
    }
  }
}
