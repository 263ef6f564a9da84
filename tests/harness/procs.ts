// The process table for tests (Linux, reads /proc): find the processes a test or fixture started — by
// descent from a pid, or by a marker in their environment (which survives reparenting to PID 1, so
// double-forked helpers such as the runtime's watchdog are found too) — kill them, and wait, with a
// deadline, until none is left. Zombies count as gone: they have exited and only wait to be reaped
// (this machine's PID 1 does not always reap). binary.ts's processesOf() is a marker search too.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { deadline, DeadlineError } from "../../lib/core/deadline.ts";
import { sleep } from "./common.ts";

export type Proc = { pid: number; ppid: number; pgid: number; sid: number; state: string; comm: string };

/** One process's stat line, or null when it is gone (or not ours to read). */
export function readProc(pid: number): Proc | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const close = stat.lastIndexOf(")");
    const comm = stat.slice(stat.indexOf("(") + 1, close);
    const f = stat.slice(close + 2).split(" ");
    return { pid, comm, state: f[0] ?? "?", ppid: Number(f[1]), pgid: Number(f[2]), sid: Number(f[3]) };
  } catch {
    return null;
  }
}

export function listProcs(): Proc[] {
  const out: Proc[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    const p = readProc(Number(e));
    if (p) out.push(p);
  }
  return out;
}

export function isLive(p: Proc | null): p is Proc {
  return p !== null && p.state !== "Z" && p.state !== "X";
}

/** True while `pid` runs (a zombie has exited: it is gone). */
export function running(pid: number): boolean {
  return isLive(readProc(pid));
}

/** Live descendants of `root` (not `root` itself), parents before children. */
export function descendants(root: number, procs = listProcs()): Proc[] {
  const kids = new Map<number, Proc[]>();
  for (const p of procs) kids.set(p.ppid, [...(kids.get(p.ppid) ?? []), p]);
  const out: Proc[] = [];
  const todo = [root];
  while (todo.length) {
    for (const k of kids.get(todo.shift() as number) ?? []) {
      out.push(k);
      todo.push(k.pid);
    }
  }
  return out.filter(isLive);
}

/** Live processes (self excluded) whose environment holds one of the `NAME=VALUE` pairs exactly. */
export function withEnv(name: string, value: string, procs = listProcs()): Proc[] {
  return withAnyEnv([[name, value]], procs);
}

export function withAnyEnv(pairs: [string, string][], procs = listProcs()): Proc[] {
  if (process.platform !== "linux") return [];
  const needles = pairs.map(([n, v]) => Buffer.from(`${n}=${v}\0`));
  const out: Proc[] = [];
  for (const p of procs) {
    if (p.pid === process.pid || !isLive(p)) continue;
    try {
      const env = readFileSync(`/proc/${p.pid}/environ`);
      const match = needles.some((needle) => env.subarray(0, needle.length).equals(needle) || env.includes(Buffer.concat([Buffer.from([0]), needle])));
      if (match) out.push(p);
    } catch {
      // Gone, or another user's.
    }
  }
  return out;
}

/** The command line of a process (NULs as spaces), "" when gone. */
export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0+$/, "").replace(/\0/g, " ");
  } catch {
    return "";
  }
}

export function killPids(pids: Iterable<number>, signal: NodeJS.Signals = "SIGKILL"): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** Polls `find` until it returns nothing; resolves with what is still there after `timeoutMs`. */
export async function waitForNone(find: () => Proc[], timeoutMs = 5_000, everyMs = 25): Promise<Proc[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = find();
    if (left.length === 0 || Date.now() >= deadline) return left;
    await sleep(everyMs);
  }
}

/** How long until `pid` is gone (ms), or null when it still runs after `timeoutMs`. */
export async function goneWithin(pid: number, timeoutMs: number): Promise<number | null> {
  const t0 = performance.now();
  for (;;) {
    if (!running(pid)) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) return null;
    await sleep(10);
  }
}

/** Resolves `p`, or rejects after `ms` with `what` in the message. Every fixture wait goes through it. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return deadline(p, ms, what).catch((err) => {
    throw err instanceof DeadlineError ? new Error(`${what}: not done within ${ms} ms`) : err;
  });
}

/** The namespace a process is in ("mnt:[4026532248]"), or null when it is gone. */
export function nsOf(pid: number, kind: "mnt" | "net" | "pid"): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/${kind}`);
  } catch {
    return null;
  }
}
