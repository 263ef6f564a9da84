// One worker process's limits, from its plan: the cgroup made for it before it starts (and the lines
// its preamble reads to join it), what it uses, why it died when the kernel's OOM killer ended it,
// and the cgroup's removal after its end. Worker (worker.ts) holds one per process it starts.
import type { LimitsUsage } from "../../protocol/limits.ts";
import { treeUsage } from "../proc_tree.ts";
import { WorkerCgroup } from "./cgroup.ts";
import { formatBytes } from "../../core/units.ts";
import type { LimitsPlan } from "./plan.ts";
import { preambleInput } from "./preamble.ts";

export class WorkerLimits {
  readonly group: WorkerCgroup | null;

  private constructor(readonly plan: LimitsPlan) {
    this.group = plan.cgroup ? WorkerCgroup.create(plan.cgroup.host, plan.cgroup.values) : null;
  }

  /** Makes the cgroup of one process started from `plan`; a refusal of the kernel is the start's error. */
  static prepare(plan: LimitsPlan): WorkerLimits {
    try {
      return new WorkerLimits(plan);
    } catch (err) {
      throw new Error(`The worker's limits could not be set up: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The first bytes of the worker's stdin: what its preamble reads (the cgroup directories it joins itself). */
  input(): Uint8Array | null {
    return this.group && this.plan.cgroup?.join === "preamble" ? preambleInput(this.group.dirs) : null;
  }

  /** A local worker's join, by the host (plan.cgroup.join "host"): settled before the worker counts as started. */
  join(pid: number): Promise<void> | null {
    if (!this.group || this.plan.cgroup?.join !== "host") return null;
    return this.group.join(pid);
  }

  /**
   * Why the worker died, when its limits explain it: the kernel's OOM killer acted in its memory
   * cgroup. Said as the rest of "The Python worker ...". Read before release() removes the group.
   */
  deathReason(exit: { code: number | null; signal: string | null }): string | null {
    // The OOM killer's SIGKILL, seen directly or as bwrap's 128 + 9 for its child.
    const killed = exit.signal === "SIGKILL" || exit.code === 137;
    if (!killed || !this.group || this.plan.enforced.memory_bytes === undefined || this.group.oomKills() === 0) return null;
    return `was ended by the kernel: memory limit ${formatBytes(this.plan.enforced.memory_bytes)} reached (${this.plan.mechanisms.memory})`;
  }

  /** The limits and what the worker (process `pid` and everything below it) uses now. */
  usage(pid: number): LimitsUsage {
    const g = this.group?.usage();
    const tree = pid > 0 ? treeUsage(pid) : null;
    return {
      limits: this.plan.enforced,
      mechanisms: this.plan.mechanisms,
      memory_bytes: g?.memoryBytes ?? tree?.rssBytes ?? null,
      peak_memory_bytes: g?.peakBytes ?? tree?.peakRssBytes ?? null,
      cpu_seconds: g?.cpuSeconds ?? tree?.cpuSeconds ?? null,
      procs: g?.procs ?? tree?.tasks ?? null,
    };
  }

  /** Ends what is left in the cgroup and removes it (once; after the worker's exit). */
  release(): void {
    this.group?.release();
  }
}
