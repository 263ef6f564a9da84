// The cgroups a worker's limits live in (Linux): where this process may make them (probeCgroups),
// one group per worker made before its process starts and removed after it ends (WorkerCgroup), what
// the group has used, and whether the kernel's OOM killer acted in it. The worker joins the group
// itself, before any user code runs (the preamble in preamble.ts writes its own pid to cgroup.procs).
//
// cgroup v2 is used where a group with the controllers can be made: as root, under
// <v2 mount>/awrepl (the root cgroup's subtree_control must offer the controllers); as another user,
// under its own cgroup when that is delegated to it (owned by its uid; the process moves itself into
// a leaf first, as the "no internal processes" rule asks). cgroup v1 as root (or whoever may write the
// controller's directory): under the process's own cgroup of each controller, so that the limits of
// whatever runs awrepl still hold. Groups are named w-<pid namespace>-<pid>-<n> after the process that
// made them, so the groups of a dead awrepl are found and removed at the next one's first group.
import { accessSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { processAlive } from "../../core/process.ts";
import type { LimitMechanism } from "../../protocol/limits.ts";

export type Controller = "memory" | "pids" | "cpu";
export type CgroupVersion = Extract<LimitMechanism, "cgroup v1" | "cgroup v2">;

/** Where this process can make worker groups: per controller, the parent directory and its version. */
export type CgroupHost = {
  parents: Partial<Record<Controller, CgroupParent>>;
  /** cgroup v1's cpuacct (CPU seconds), when a cpu group is made there. */
  cpuacct: string | null;
  /** Why a controller is missing, for the start's error (one phrase). */
  missing: string;
};

/** A directory worker groups are made in; v2: `above`, when set, must hand the controllers down to it first (the root cgroup). */
export type CgroupParent = { version: CgroupVersion; dir: string; above?: string };

/** The values a worker's group enforces (absent: not by the group). */
export type CgroupValues = { memoryBytes?: number; maxProcs?: number; cpuPercent?: number };

const PARENT = "awrepl";
const CPU_PERIOD_US = 100_000;

/** What /proc/self/cgroup and /proc/mounts say (null off Linux or when unreadable). */
export function probeCgroups(uid = process.getuid?.() ?? -1): CgroupHost | null {
  if (process.platform !== "linux") return null;
  let mounts: string;
  let own: string;
  try {
    mounts = readFileSync("/proc/mounts", "utf8");
    own = readFileSync("/proc/self/cgroup", "utf8");
  } catch {
    return null;
  }
  const host: CgroupHost = { parents: {}, cpuacct: null, missing: "" };
  const v1Mounts = new Map<string, string>();
  let v2Mount: string | null = null;
  for (const line of mounts.split("\n")) {
    const [, dir, type, opts] = line.split(" ");
    if (!dir || !opts) continue;
    if (type === "cgroup2") v2Mount ??= unescapeMount(dir);
    else if (type === "cgroup") { for (const opt of opts.split(",")) if (["memory", "pids", "cpu", "cpuacct"].includes(opt)) v1Mounts.set(opt, unescapeMount(dir)); }
  }
  const ownPaths = new Map<string, string>();
  for (const line of own.split("\n")) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    for (const c of (m[1] ?? "").split(",")) ownPaths.set(c, m[2] ?? "/");
  }
  const why: string[] = [];
  const v2 = v2Mount ? v2Parent(v2Mount, ownPaths.get("") ?? "/", uid, why) : null;
  for (const c of ["memory", "pids", "cpu"] as const) {
    if (v2?.controllers.includes(c)) {
      host.parents[c] = { version: "cgroup v2", dir: v2.dir, ...(v2.above ? { above: v2.above } : {}) };
      continue;
    }
    const mount = v1Mounts.get(c);
    const base = mount ? join(mount, ownPaths.get(c) ?? "/") : null;
    if (base && writable(base)) host.parents[c] = { version: "cgroup v1", dir: join(base, PARENT) };
    else if (base) why.push(`cgroup v1 ${c}: ${base} is not writable (root is needed)`);
    else if (!v2?.controllers.length) why.push(`no ${c} controller is mounted`);
  }
  const acct = v1Mounts.get("cpuacct");
  if (host.parents.cpu?.version === "cgroup v1" && acct) {
    const base = join(acct, ownPaths.get("cpuacct") ?? "/");
    if (writable(base)) host.cpuacct = join(base, PARENT);
  }
  if (!v2Mount && v1Mounts.size === 0) why.push("no cgroup file system is mounted");
  host.missing = why.join("; ");
  return host;
}

/** The v2 parent this process may make worker groups under, and the controllers it offers. */
function v2Parent(mount: string, own: string, uid: number, why: string[]): { dir: string; above?: string; controllers: Controller[] } | null {
  const offered = (dir: string) => readWords(join(dir, "cgroup.controllers")).filter((c): c is Controller => c === "memory" || c === "pids" || c === "cpu");
  if (uid === 0) {
    const controllers = offered(mount);
    if (controllers.length === 0) why.push(`cgroup v2 (${mount}) offers no memory, pids or cpu controller (they are bound to cgroup v1)`);
    return controllers.length && writable(mount) ? { dir: join(mount, PARENT), above: mount, controllers } : null;
  }
  const dir = join(mount, own);
  try {
    if (statSync(dir).uid !== uid || !writable(dir)) {
      why.push(`cgroup v2: ${dir} is not delegated to this user (run awrepl under systemd-run --user --scope -p Delegate=yes)`);
      return null;
    }
  } catch {
    return null;
  }
  const controllers = offered(dir);
  if (controllers.length === 0) why.push(`cgroup v2: ${dir} offers no memory, pids or cpu controller`);
  return controllers.length ? { dir, controllers } : null;
}

let sequence = 0;
/** The parents swept for stale groups by this process (once each, at its first group there). */
const swept = new Set<string>();

/** One worker's group: made with its limits before the process starts, removed once it has ended. */
export class WorkerCgroup {
  /** Each distinct directory the worker joins (v1: one per controller hierarchy). */
  readonly dirs: string[] = [];
  private readonly byController: Partial<Record<Controller | "cpuacct", { version: CgroupVersion; dir: string }>> = {};
  private released = false;

  private constructor(readonly values: CgroupValues) {}

  /** Makes the group(s) for `values` under `host`'s parents; throws (naming the file) when the kernel refuses. */
  static create(host: CgroupHost, values: CgroupValues): WorkerCgroup {
    const group = new WorkerCgroup(values);
    if (leftovers.size) removeLeftovers();
    const name = `w-${pidNamespace()}-${process.pid}-${++sequence}`;
    const wanted: [Controller | "cpuacct", CgroupParent | undefined][] = [];
    if (values.memoryBytes !== undefined) wanted.push(["memory", host.parents.memory]);
    if (values.maxProcs !== undefined) wanted.push(["pids", host.parents.pids]);
    if (values.cpuPercent !== undefined) {
      wanted.push(["cpu", host.parents.cpu]);
      if (host.cpuacct) wanted.push(["cpuacct", { version: "cgroup v1", dir: host.cpuacct }]);
    }
    try {
      for (const [controller, parent] of wanted) {
        if (!parent) throw new Error(`no ${controller} controller`);
        if (!swept.has(parent.dir)) {
          swept.add(parent.dir);
          sweepStaleGroups(parent.dir);
        }
        const dir = join(parent.dir, name);
        if (!group.dirs.includes(dir)) {
          prepareParent(parent);
          mkdirSync(dir);
          group.dirs.push(dir);
        }
        group.byController[controller] = { version: parent.version, dir };
      }
      group.writeLimits();
    } catch (err) {
      group.release();
      throw err;
    }
    return group;
  }

  private writeLimits(): void {
    const { memoryBytes, maxProcs, cpuPercent } = this.values;
    const mem = this.byController.memory;
    if (mem && memoryBytes !== undefined) {
      if (mem.version === "cgroup v1") {
        write(mem.dir, "memory.limit_in_bytes", String(memoryBytes));
        // Memory and swap together: without it the kernel swaps the worker out instead of enforcing the limit.
        if (existsSync(join(mem.dir, "memory.memsw.limit_in_bytes"))) write(mem.dir, "memory.memsw.limit_in_bytes", String(memoryBytes));
      } else {
        write(mem.dir, "memory.max", String(memoryBytes));
        if (existsSync(join(mem.dir, "memory.swap.max"))) write(mem.dir, "memory.swap.max", "0");
        // The whole group goes together: a worker never lives on with half of its processes killed.
        if (existsSync(join(mem.dir, "memory.oom.group"))) write(mem.dir, "memory.oom.group", "1");
      }
    }
    const pids = this.byController.pids;
    if (pids && maxProcs !== undefined) write(pids.dir, "pids.max", String(maxProcs));
    const cpu = this.byController.cpu;
    if (cpu && cpuPercent !== undefined) {
      const quota = Math.max(1_000, Math.round((cpuPercent / 100) * CPU_PERIOD_US));
      if (cpu.version === "cgroup v1") {
        write(cpu.dir, "cpu.cfs_period_us", String(CPU_PERIOD_US));
        write(cpu.dir, "cpu.cfs_quota_us", String(quota));
      } else write(cpu.dir, "cpu.max", `${quota} ${CPU_PERIOD_US}`);
    }
  }

  /** Moves process `pid` (all its threads) into each directory; the kernel's wait happens off the event loop. */
  async join(pid: number): Promise<void> {
    await Promise.all(
      this.dirs.map((dir) =>
        writeFile(join(dir, "cgroup.procs"), String(pid)).catch((err: NodeJS.ErrnoException) => {
          throw new Error(`cannot move process ${pid} into ${dir}: ${err.code ?? err.message}`);
        })
      ),
    );
  }

  /** How many times the kernel's OOM killer killed a process of this group (0 when it has no memory group). */
  oomKills(): number {
    const mem = this.byController.memory;
    if (!mem) return 0;
    const text = readText(join(mem.dir, mem.version === "cgroup v1" ? "memory.oom_control" : "memory.events")) ?? "";
    return Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0);
  }

  /** What the group has used: its memory charge and peak, CPU seconds, tasks (null where it has no such controller). */
  usage(): { memoryBytes: number | null; peakBytes: number | null; cpuSeconds: number | null; procs: number | null } {
    const mem = this.byController.memory;
    const v1 = mem?.version === "cgroup v1";
    const memoryBytes = mem ? readNumber(join(mem.dir, v1 ? "memory.usage_in_bytes" : "memory.current")) : null;
    const peakBytes = mem ? readNumber(join(mem.dir, v1 ? "memory.max_usage_in_bytes" : "memory.peak")) : null;
    let cpuSeconds: number | null = null;
    const acct = this.byController.cpuacct;
    const cpu = this.byController.cpu;
    if (acct) cpuSeconds = (readNumber(join(acct.dir, "cpuacct.usage")) ?? NaN) / 1e9;
    else if (cpu?.version === "cgroup v2") cpuSeconds = Number(/^usage_usec (\d+)$/m.exec(readText(join(cpu.dir, "cpu.stat")) ?? "")?.[1] ?? NaN) / 1e6;
    const pids = this.byController.pids;
    const procs = pids ? readNumber(join(pids.dir, "pids.current")) : null;
    return { memoryBytes, peakBytes, cpuSeconds: Number.isFinite(cpuSeconds) ? cpuSeconds : null, procs };
  }

  /**
   * Ends whatever still runs in the group and removes it. A group whose last tasks are still exiting
   * (zombies count until they are reaped) is retried for a while, then at this process's next group
   * and its exit; a group left after all that is a stale one for the next awrepl process.
   */
  release(): void {
    if (this.released) return;
    this.released = true;
    for (const dir of this.dirs) {
      killAll(dir);
      leftovers.add(dir);
    }
    const attempt = (tries: number) => {
      if (removeLeftovers(this.dirs) && tries > 0) setTimeout(() => attempt(tries - 1), 20).unref?.();
    };
    attempt(50);
  }
}

/** Groups released but not yet removed (their last tasks were still exiting). */
const leftovers = new Set<string>();
let exitHooked = false;

/** Tries to remove `dirs` (of the leftovers); true while some of them remain. */
function removeLeftovers(dirs: Iterable<string> = leftovers): boolean {
  let remain = false;
  for (const dir of [...dirs]) {
    if (!leftovers.has(dir)) continue;
    try {
      rmdirSync(dir);
      leftovers.delete(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") leftovers.delete(dir);
      else remain = true;
    }
  }
  if (remain && !exitHooked) {
    exitHooked = true;
    process.once("exit", () => removeLeftovers());
  }
  return remain;
}

/** A parent made once, with the v2 controllers handed down to its children. */
function prepareParent(parent: CgroupParent): void {
  if (parent.above) enableControllers(parent.above);
  if (!existsSync(parent.dir)) mkdirSync(parent.dir, { recursive: true });
  if (parent.version === "cgroup v1") return;
  // A delegated cgroup that holds this process must become a parent without processes of its own:
  // this process moves into a leaf beside the workers' groups.
  const here = readWords(join(parent.dir, "cgroup.procs"));
  if (here.length) {
    const leaf = join(parent.dir, "awrepl-host");
    if (!existsSync(leaf)) mkdirSync(leaf);
    for (const pid of here) write(leaf, "cgroup.procs", pid);
  }
  enableControllers(parent.dir);
}

/** v2: the memory, pids and cpu controllers `dir` offers, handed down to its children. */
function enableControllers(dir: string): void {
  const offered = readWords(join(dir, "cgroup.controllers"));
  const enabled = readWords(join(dir, "cgroup.subtree_control"));
  const add = ["memory", "pids", "cpu"].filter((c) => offered.includes(c) && !enabled.includes(c));
  if (add.length) write(dir, "cgroup.subtree_control", add.map((c) => `+${c}`).join(" "));
}

/** Removes the groups of awrepl processes (of this pid namespace) that are gone, and what still runs in them. */
export function sweepStaleGroups(parentDir: string): void {
  let names: string[];
  try {
    names = readdirSync(parentDir);
  } catch {
    return;
  }
  const ns = pidNamespace();
  for (const name of names) {
    const m = /^w-(\d+)-(\d+)-\d+$/.exec(name);
    if (!m || m[1] !== ns || Number(m[2]) === process.pid || processAlive(Number(m[2]))) continue;
    const dir = join(parentDir, name);
    killAll(dir);
    try {
      rmdirSync(dir);
    } catch {
      // Its last tasks are still exiting: the next sweep gets it.
    }
  }
}

/** SIGKILL to every process in the group (v2: cgroup.kill where the kernel has it). */
function killAll(dir: string): void {
  if (existsSync(join(dir, "cgroup.kill"))) {
    try {
      writeFileSync(join(dir, "cgroup.kill"), "1");
      return;
    } catch {
      // fall back to one by one
    }
  }
  for (const pid of readWords(join(dir, "cgroup.procs"))) {
    try {
      process.kill(Number(pid), "SIGKILL");
    } catch {
      // gone
    }
  }
}

let pidNs: string | null = null;
function pidNamespace(): string {
  if (pidNs !== null) return pidNs;
  try {
    pidNs = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? "0";
  } catch {
    pidNs = "0";
  }
  return pidNs;
}

function write(dir: string, file: string, value: string): void {
  try {
    writeFileSync(join(dir, file), value);
  } catch (err) {
    throw new Error(`cannot write ${value} to ${join(dir, file)}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

function writable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

function readNumber(path: string): number | null {
  const text = readText(path)?.trim();
  if (!text || !/^\d+$/.test(text)) return null;
  return Number(text);
}

function readWords(path: string): string[] {
  return (readText(path) ?? "").split(/\s+/).filter(Boolean);
}

/** /proc/mounts escapes a space as \040 (and tab, newline, backslash likewise). */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}
