// What `sessions` shows about a worker, from the worker itself (`info`): behind ssh the local process
// is the ssh client and behind bwrap it is bwrap, so their pid, RSS and cwd say nothing about the
// Python. Inside a sandbox the runtime's pid is its namespace's (2): the report adds its pid on this
// machine, found among bwrap's descendants by the namespace pid (/proc/PID/status NSpid).
import { readFileSync } from "node:fs";
import type { LimitsUsage } from "../protocol/limits.ts";
import type { WorkerFacts } from "../protocol/runtime.ts";
import { processTree } from "./proc_tree.ts";
import type { Worker } from "./worker.ts";

export type WorkerFactsReport = {
  facts: WorkerFacts;
  /** When the facts were measured (Date.now()); older than the call when the worker could not answer in time (busy in C). */
  at: number;
  /** The runtime's pid on this machine: the worker's own for a local one, found for a sandboxed one, null behind a transport (another machine or container). */
  hostPid: number | null;
  /** What the process is to the runtime: local, sandbox or transport. */
  kind: Worker["kind"];
  /** Its limits and what it uses now (measured here, by its cgroup or /proc); null: started without limits. */
  limits: LimitsUsage | null;
};

/** The worker's facts, asked in band within `timeoutMs` (the last ones when it cannot answer in time); null if it never answered. */
export async function workerFacts(worker: Worker, timeoutMs = 1_000): Promise<WorkerFactsReport | null> {
  const facts = await worker.info(timeoutMs);
  if (!facts) return null;
  const hostPid = worker.kind === "local" ? worker.pid : worker.kind === "sandbox" ? hostPidOf(worker.pid, facts.pid) : null;
  return { facts, at: worker.factsAt, hostPid, kind: worker.kind, limits: worker.limitsUsage() };
}

/** The descendant of `root` whose innermost namespace pid is `nsPid` (Linux; null elsewhere or when gone). */
export function hostPidOf(root: number, nsPid: number): number | null {
  for (const pid of processTree(root).slice(1)) {
    try {
      // "NSpid:\t13618\t2": its pid here, then in each nested pid namespace (the last: the innermost).
      const ids = /^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${pid}/status`, "latin1"))?.[1]?.trim().split(/\s+/) ?? [];
      if (ids.length > 1 && Number(ids.at(-1)) === nsPid) return pid;
    } catch {
      // gone
    }
  }
  return null;
}
