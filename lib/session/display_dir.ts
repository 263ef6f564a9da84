// `--display-dir DIR`: a cell's display files moved where the caller wants them (an agent's workspace)
// once its result is in, from the session's folder under the state directory, and the result's paths
// changed to match. The directory is the caller's: created if missing, any mode, and never cleaned
// by awrepl (the state directory's caps and `close` do not reach it).
import { copyFileSync, mkdirSync, renameSync, statSync, unlinkSync } from "node:fs";
import { basename, join } from "node:path";
import { AwreplError } from "../core/errors.ts";
import type { ExecResult } from "../protocol/result.ts";
import { fileMimes } from "./mime.ts";

/** Creates `dir` (and its parents) when missing; a usage error naming it when it is not a directory that can be made. */
export function prepareDisplayDir(dir: string): string {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new AwreplError("usage", `--display-dir ${dir}: cannot create it: ${(err as Error).message}`);
  }
  if (!statSync(dir).isDirectory()) throw new AwreplError("usage", `--display-dir ${dir} is not a directory`);
  return dir;
}

/**
 * Moves every display file of `result` into `dir` and points the entries at the new paths. A file
 * that cannot be moved (a full disk) stays where it was, its entry unchanged; the reasons are returned.
 */
export function moveDisplayFiles(result: ExecResult, dir: string): string[] {
  const failures: string[] = [];
  for (const item of result.display) {
    for (const mime of fileMimes(item)) {
      const from = item[mime] as string;
      const to = join(dir, basename(from));
      try {
        moveFile(from, to);
        item[mime] = to;
      } catch (err) {
        failures.push(`could not move ${from} to ${dir}: ${(err as Error).message}`);
      }
    }
  }
  return failures;
}

function moveFile(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
    // Another filesystem: copied, then the original removed (a failed copy leaves the original).
    copyFileSync(from, to);
    unlinkSync(from);
  }
}
