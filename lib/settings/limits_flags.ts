// The resource limits a new session gets from a command's flags over the config (`limits` in a config
// file): one function for every command that creates sessions (`run`, `serve`, `awrepl mcp`), as
// sandboxSpec is for the sandbox. Each flag replaces the config's value of its own limit. Here the
// values are read (sizes with units, through the one parser of lib/core/units.ts); the minimums a
// worker needs and what this machine can enforce are checked where the worker is planned
// (lib/worker/limits/plan.ts checkLimits, planLimits), which names the limit and its flag. Small and
// without static node: imports: `run` loads it on its hot path.
import { usageError } from "../core/errors.ts";
import { parseSize } from "../core/units.ts";
import type { ResourceLimits } from "../protocol/limits.ts";
import type { Settings } from "./context.ts";

/** The limit flags as given: `--memory SIZE`, `--max-procs N`, `--cpu PERCENT`, `--max-file-size SIZE`, `--limits-best-effort`. */
export type LimitFlags = {
  memory?: string;
  maxProcs?: string;
  cpu?: string;
  maxFileSize?: string;
  limitsBestEffort?: boolean;
};

/** The limits of a new session: the flags over the config's `limits`; undefined when neither asks for any. */
export function limitsSpec(settings: Settings, flags: LimitFlags = {}): ResourceLimits | undefined {
  const out: ResourceLimits = { ...settings.config().limits };
  if (flags.memory !== undefined) out.memory_bytes = sizeFlag("--memory", flags.memory);
  if (flags.maxProcs !== undefined) out.max_procs = wholeFlag("--max-procs", flags.maxProcs, "processes and threads");
  if (flags.cpu !== undefined) out.cpu_percent = percentFlag("--cpu", flags.cpu);
  if (flags.maxFileSize !== undefined) out.max_file_bytes = sizeFlag("--max-file-size", flags.maxFileSize);
  if (flags.limitsBestEffort) out.best_effort = true;
  const asked = Object.keys(out).some((k) => k !== "best_effort");
  if (!asked) {
    if (flags.limitsBestEffort) throw usageError('--limits-best-effort goes with a limit: --memory, --max-procs, --cpu or --max-file-size (or "limits" in the config)');
    return undefined;
  }
  return out;
}

/** A size flag or key (`512M`, `2G`; bare: bytes), more than 0. */
export function sizeFlag(flag: string, text: string): number {
  const parsed = parseSize(text);
  if ("problem" in parsed) throw usageError(`${flag} ${parsed.problem}`);
  if (parsed.value <= 0) throw usageError(`${flag} must be more than 0 bytes, not ${JSON.stringify(text)} (leave it out for no limit)`);
  return parsed.value;
}

/** A whole number of at least 1. */
export function wholeFlag(flag: string, text: string, what: string): number {
  const t = text.trim();
  if (!/^\d+$/.test(t) || Number(t) < 1 || !Number.isSafeInteger(Number(t))) {
    throw usageError(`${flag} must be a whole number of ${what}, 1 or more, not ${JSON.stringify(text)} (leave it out for no limit)`);
  }
  return Number(t);
}

/** A percentage of one CPU (`50`, `50%`, `150`: one and a half CPUs), more than 0. */
export function percentFlag(flag: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*%?$/.exec(text.trim());
  if (!m || Number(m[1]) <= 0) throw usageError(`${flag} must be a percentage of one CPU above 0 (50, 50%, 200 for two CPUs), not ${JSON.stringify(text)}`);
  return Number(m[1]);
}
