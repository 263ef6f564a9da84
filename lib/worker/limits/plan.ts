// Which mechanism enforces each limit asked for one worker, decided once when its launch is built:
// a cgroup (v2, else v1) for memory, processes and CPU where this process may make one, else the
// rlimits that mean the same thing (RLIMIT_DATA for memory, RLIMIT_NPROC for processes where it binds:
// not for root), RLIMIT_FSIZE for the file size always. A limit nothing here can enforce fails the
// start with an error that names it and what is missing, unless best_effort (then it is "none").
// The choice and the values are the plan; preamble.ts turns it into the worker's command line and
// WorkerLimits (worker_limits.ts) makes the cgroup for each process started from it.
import { readdirSync, readFileSync } from "node:fs";
import { AwreplError } from "../../core/errors.ts";
import type { LimitMechanism, LimitMechanisms, ResourceLimits } from "../../protocol/limits.ts";
import { formatBytes } from "../../core/units.ts";
import { type CgroupHost, type CgroupValues, type Controller, probeCgroups } from "./cgroup.ts";

/** What this machine offers (probed once per process; tests pass their own, e.g. without cgroups). */
export type LimitsHost = { platform: NodeJS.Platform; uid: number; cgroups: CgroupHost | null };

export type LimitsPlan = {
  /** The limits as enforced (memory in whole KiB for an rlimit, the file size in 512-byte blocks). */
  enforced: Omit<ResourceLimits, "best_effort">;
  mechanisms: LimitMechanisms;
  /**
   * What goes in a cgroup, and where it is made (null: no cgroup). `join`: who moves the worker into
   * it. "preamble": the shell, before it execs (a sandbox: bwrap forks at once, and its children must
   * start inside). "host": this process, while the interpreter starts (a local worker forks nothing
   * before it is ready): moving a task takes the kernel an RCU grace period (~10-15 ms on cgroup v1
   * here), which then overlaps Python's own start instead of adding to it.
   */
  cgroup: { host: CgroupHost; values: CgroupValues; dirs: number; join: "preamble" | "host" } | null;
  /** The rlimits the preamble sets, in the shell's units (`ulimit`: -d KiB, -f 512-byte blocks). */
  rlimits: { dataKiB?: number; fsizeBlocks?: number; nproc?: number };
  /** The worker's OOM score: above the host's own, so that the kernel picks a worker before the supervisor. */
  oomScoreAdj: number;
};

/** Below these the worker itself cannot run (Python takes ~15 MiB; the runtime runs 4 threads, a sandbox 3 more processes). */
export const MIN_MEMORY_BYTES = 32 * 1024 * 1024;
export const MIN_PROCS = 8;
export const FILE_BLOCK = 512;
/** How far above the host's own OOM score a worker's is set (/proc/PID/oom_score_adj, -1000..1000). */
const OOM_SCORE_ABOVE_HOST = 500;

/** Each limit's key, the flag the CLI gives it, and what a value means (messages). */
const KEYS = {
  memory_bytes: { flag: "--memory", min: MIN_MEMORY_BYTES, what: "bytes" },
  max_procs: { flag: "--max-procs", min: MIN_PROCS, what: "processes and threads" },
  cpu_percent: { flag: "--cpu", min: 1, what: "percent of one CPU" },
  max_file_bytes: { flag: "--max-file-size", min: FILE_BLOCK, what: "bytes" },
} as const;

let probed: LimitsHost | null = null;

/** This machine, probed once per process (the cgroup layout does not change while it runs). */
export function limitsHost(): LimitsHost {
  probed ??= { platform: process.platform, uid: process.getuid?.() ?? -1, cgroups: probeCgroups() };
  return probed;
}

/** Checks limits that may come from a config file, a request or another process: a clear error naming the bad value. */
export function checkLimits(value: unknown): ResourceLimits {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new AwreplError("usage", `The limits must be an object, not ${JSON.stringify(value)}`);
  const out: ResourceLimits = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === "best_effort") {
      if (typeof v !== "boolean") throw new AwreplError("usage", `The limits' best_effort must be true or false, not ${JSON.stringify(v)}`);
      out.best_effort = v;
      continue;
    }
    const rule = (KEYS as Record<string, (typeof KEYS)[keyof typeof KEYS]>)[key];
    if (!rule) throw new AwreplError("usage", `Unknown limit ${JSON.stringify(key)} (known: ${Object.keys(KEYS).join(", ")}, best_effort)`);
    if (v === undefined) continue;
    const integer = key !== "cpu_percent";
    if (typeof v !== "number" || !Number.isFinite(v) || (integer && !Number.isSafeInteger(v))) {
      throw new AwreplError("usage", `The limit ${key} (${rule.flag}) must be ${integer ? "a whole number" : "a number"} of ${rule.what}, not ${JSON.stringify(v)}`);
    }
    if (v < rule.min) throw new AwreplError("usage", `The limit ${key} (${rule.flag}) must be at least ${describeValue(key, rule.min)}, not ${describeValue(key, v)}`);
    out[key as Exclude<keyof ResourceLimits, "best_effort">] = v;
  }
  return out;
}

/** The plan for `asked` on `host`: each limit's mechanism and value; throws for a limit nothing here enforces (unless best_effort). */
export function planLimits(asked: ResourceLimits, host: LimitsHost = limitsHost()): LimitsPlan {
  const limits = checkLimits(asked);
  const plan: LimitsPlan = { enforced: {}, mechanisms: {}, cgroup: null, rlimits: {}, oomScoreAdj: workerOomScore() };
  const cg = host.cgroups;
  const values: CgroupValues = {};
  const parents = new Set<string>();
  const missing: { key: keyof typeof KEYS; why: string }[] = [];
  const viaCgroup = (c: Controller): LimitMechanism | null => {
    const parent = cg?.parents[c];
    if (!parent) return null;
    parents.add(parent.dir);
    if (c === "cpu" && cg?.cpuacct) parents.add(cg.cpuacct);
    return parent.version;
  };
  const cgroupWhy = cg?.missing ? cg.missing : host.platform === "linux" ? "no cgroup this process can use" : `no cgroups on ${host.platform}`;

  if (limits.memory_bytes !== undefined) {
    const bytes = limits.memory_bytes;
    const m = viaCgroup("memory");
    if (m) {
      values.memoryBytes = bytes;
      set(plan, "memory", m, { memory_bytes: bytes });
    } else if (host.platform === "linux") {
      // RLIMIT_DATA, not RLIMIT_AS: glibc reserves 64 MiB of address space per thread's arena, which AS
      // counts and DATA does not; DATA counts every private writable mapping (Linux >= 4.7), the heap included.
      plan.rlimits.dataKiB = Math.floor(bytes / 1024);
      set(plan, "memory", "rlimit", { memory_bytes: plan.rlimits.dataKiB * 1024 });
    } else missing.push({ key: "memory_bytes", why: `${cgroupWhy}, and ${host.platform} does not enforce RLIMIT_DATA or RLIMIT_AS` });
  }
  if (limits.max_procs !== undefined) {
    const n = limits.max_procs;
    const m = viaCgroup("pids");
    if (m) {
      values.maxProcs = n;
      set(plan, "procs", m, { max_procs: n });
    } else if (host.uid !== 0) {
      // RLIMIT_NPROC counts every process of the user: the worker gets `n` more than the user runs now.
      plan.rlimits.nproc = userTasks(host.uid) + n;
      set(plan, "procs", "rlimit", { max_procs: n });
    } else missing.push({ key: "max_procs", why: `the pids cgroup controller is needed (${cgroupWhy}), and RLIMIT_NPROC does not bind root` });
  }
  if (limits.cpu_percent !== undefined) {
    const m = viaCgroup("cpu");
    if (m) {
      values.cpuPercent = limits.cpu_percent;
      set(plan, "cpu", m, { cpu_percent: limits.cpu_percent });
    } else missing.push({ key: "cpu_percent", why: `the cpu cgroup controller is needed (${cgroupWhy}); an rlimit can only cap total CPU seconds, not a share` });
  }
  if (limits.max_file_bytes !== undefined) {
    plan.rlimits.fsizeBlocks = Math.floor(limits.max_file_bytes / FILE_BLOCK);
    set(plan, "file_size", "rlimit", { max_file_bytes: plan.rlimits.fsizeBlocks * FILE_BLOCK });
  }
  if (missing.length && !limits.best_effort) {
    const said = missing.map((m) => `The limit ${m.key} (${KEYS[m.key].flag}) cannot be enforced here: ${m.why}`).join("; ");
    throw new AwreplError("usage", `${said}. Start without ${missing.length > 1 ? "them" : "it"}, or allow best-effort limits (best_effort, --limits-best-effort)`);
  }
  for (const m of missing) plan.mechanisms[MECHANISM_KEY[m.key]] = "none";
  if (cg && Object.keys(values).length) plan.cgroup = { host: cg, values, dirs: parents.size, join: "preamble" };
  return plan;
}

const MECHANISM_KEY = { memory_bytes: "memory", max_procs: "procs", cpu_percent: "cpu", max_file_bytes: "file_size" } as const;

function set(plan: LimitsPlan, which: keyof LimitMechanisms, mechanism: LimitMechanism, enforced: Omit<ResourceLimits, "best_effort">): void {
  plan.mechanisms[which] = mechanism;
  Object.assign(plan.enforced, enforced);
}

/** A limit's value for messages: sizes in MiB/GiB, the others as they are. */
export function describeValue(key: string, v: number): string {
  if (key === "memory_bytes" || key === "max_file_bytes") return formatBytes(v);
  if (key === "cpu_percent") return `${v}%`;
  return String(v);
}

/** The OOM score every worker gets: OOM_SCORE_ABOVE_HOST above this process's own, at most 1000. */
export function workerOomScore(): number {
  ownOomScore ??= readOwnOomScore();
  return Math.min(1000, Math.max(0, ownOomScore) + OOM_SCORE_ABOVE_HOST);
}

let ownOomScore: number | undefined;

function readOwnOomScore(): number {
  let own = 0;
  try {
    if (process.platform === "linux") own = Number(readFileSync("/proc/self/oom_score_adj", "latin1").trim()) || 0;
  } catch {
    // not readable: the default
  }
  return own;
}

/** Processes and threads the user runs now (what RLIMIT_NPROC counts). */
function userTasks(uid: number): number {
  if (process.platform !== "linux") return 0;
  let n = 0;
  for (const entry of safeList("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, "latin1");
      if (Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) === uid) n += Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? 1);
    } catch {
      // gone
    }
  }
  return n;
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
