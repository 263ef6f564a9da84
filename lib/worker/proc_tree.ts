// A worker's processes as /proc shows them (Linux): the process and all its descendants, and what they
// use together (resident memory, CPU seconds, tasks). For a sandboxed worker the process is bwrap, so
// its tree holds the runtime and everything the cells started; the numbers are those of the machine's
// pid namespace. facts.ts finds the runtime in it; limits/usage.ts measures it where no cgroup does.
import { readdirSync, readFileSync } from "node:fs";

/** `root` and its descendants, root first, parents before children (empty off Linux or when /proc is unreadable). */
export function processTree(root: number): number[] {
  if (process.platform !== "linux") return [];
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone
    }
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i] as number) ?? []));
  return out;
}

/** The CPU clock's ticks per second in /proc/PID/stat (USER_HZ: 100 on every Linux port that matters). */
const TICKS_PER_SECOND = 100;

export type TreeUsage = { rssBytes: number; peakRssBytes: number; cpuSeconds: number; tasks: number };

/** What `root`'s tree uses now; null when root is gone or /proc cannot tell. */
export function treeUsage(root: number): TreeUsage | null {
  const pids = processTree(root);
  if (!pids.length) return null;
  const usage: TreeUsage = { rssBytes: 0, peakRssBytes: 0, cpuSeconds: 0, tasks: 0 };
  let seen = false;
  for (const pid of pids) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, "latin1");
      const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
      const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0) * 1024;
      usage.rssBytes += kib("VmRSS");
      usage.peakRssBytes = Math.max(usage.peakRssBytes, kib("VmHWM"));
      usage.tasks += Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? 1);
      // Fields after the command: state is [0]; utime, stime, cutime, cstime are [11]..[14] (stat(5) 14-17).
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number);
      usage.cpuSeconds += ((f[11] ?? 0) + (f[12] ?? 0) + (pid === root ? (f[13] ?? 0) + (f[14] ?? 0) : 0)) / TICKS_PER_SECOND;
      seen = true;
    } catch {
      // exited meanwhile
    }
  }
  return seen ? usage : null;
}
