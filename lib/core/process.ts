// Processes seen from the host: is one alive, how much memory it holds, and ending a whole process
// group at once (a worker and everything its cells started). Light on imports: the CLI's hot path
// loads it. (node:fs is loaded where it is used, not at the top: lib/core/fastio.ts says what it costs.)
import type { ChildProcess } from "node:child_process";
import { builtin } from "./fastio.ts";

/** True while `pid` runs. A zombie (exited, not yet reaped: a detached supervisor's parent is init,
 * which may reap slowly) counts as gone. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  if (process.platform !== "linux") return true;
  try {
    const stat = builtin("node:fs").readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.charAt(stat.lastIndexOf(")") + 2) !== "Z";
  } catch {
    return false;
  }
}

/** Kills the process group `pid` leads (the process alone on Windows, through `child` when given). */
export function killGroup(pid: number, child?: ChildProcess): void {
  if (pid <= 0) return;
  try {
    if (process.platform === "win32") {
      if (child) child.kill("SIGKILL");
      else process.kill(pid, "SIGKILL");
    } else process.kill(-pid, "SIGKILL");
  } catch {
    // ESRCH: the group is already gone.
    try {
      child?.kill("SIGKILL");
    } catch {
      // Nothing left to kill.
    }
  }
}

/** Resident memory of a process in bytes, or null when it cannot be read (gone, not ours, another platform). */
export function processRss(pid: number): number | null {
  try {
    if (process.platform === "linux") {
      const m = /VmRSS:\s+(\d+)\s+kB/.exec(builtin("node:fs").readFileSync(`/proc/${pid}/status`, "utf8"));
      return m ? Number(m[1]) * 1024 : null;
    }
    if (process.platform === "darwin") {
      const { execFileSync } = process.getBuiltinModule("node:child_process");
      const kb = Number(execFileSync("ps", ["-o", "rss=", "-p", String(pid)], { encoding: "utf8" }).trim());
      return Number.isFinite(kb) && kb > 0 ? kb * 1024 : null;
    }
  } catch {
    // gone, or not ours to read
  }
  return null;
}
