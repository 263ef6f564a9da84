// Shared helpers for the benchmarks: blocking timed spawns, statistics, RSS from /proc, temporary
// AWREPL_HOMEs, and the one figure shape every bench script (and jupyter.py's JSON) reports in.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const REPO = resolve(import.meta.dir, "../..");
export const PYTHON = "/usr/bin/python3";
/** The executable measured: dist/awrepl, or AWREPL_BENCH_BIN (another build, for a before/after). */
export const AWREPL_BIN = process.env.AWREPL_BENCH_BIN || join(REPO, "dist/awrepl");

/** One measured figure: raw samples plus how to read them. Matches jupyter.py's JSON. */
/** Every benchmark script takes these (the smoke test runs each in a tiny mode). */
export type BenchOptions = { smoke?: boolean };

export type Figure = { unit: string; samples: number[]; note?: string };
export type Figures = Record<string, Figure>;

export type Summary = { n: number; min: number; p50: number; p99: number; max: number; mean: number };

/** Nearest-rank percentile of already sorted samples (p in 0..100). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = sorted.reduce((sum, x) => sum + x, 0) / (sorted.length || 1);
  return {
    n: sorted.length,
    min: sorted[0] ?? Number.NaN,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean: sorted.length ? mean : Number.NaN,
  };
}

export function figure(unit: string, samples: number[], note?: string): Figure {
  return note ? { unit, samples, note } : { unit, samples };
}

export type TimedRun = { ms: number; exitCode: number | null; stdout: string; stderr: string };

/**
 * Spawns argv and waits with a blocking wait (Bun.spawnSync: the thread sleeps in waitpid, no polling),
 * so the time is spawn-to-exit and nothing else. Throws on timeout or a non-zero exit unless allowed.
 */
export function timeSpawn(
  argv: string[],
  options: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number; stdin?: string; allowFailure?: boolean } = {},
): TimedRun {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const start = performance.now();
  const proc = Bun.spawnSync(argv, {
    env: options.env ?? process.env,
    cwd: options.cwd,
    stdin: options.stdin === undefined ? "ignore" : Buffer.from(options.stdin),
    stdout: "pipe",
    stderr: "pipe",
    timeout: timeoutMs,
  });
  const ms = performance.now() - start;
  const stdout = proc.stdout?.toString() ?? "";
  const stderr = proc.stderr?.toString() ?? "";
  if (proc.exitedDueToTimeout) throw new Error(`${argv.join(" ")} did not exit within ${timeoutMs} ms`);
  if (proc.exitCode !== 0 && !options.allowFailure) {
    throw new Error(`${argv.join(" ")} exited with ${proc.exitCode ?? proc.signalCode}: ${stderr.slice(-2000)}`);
  }
  return { ms, exitCode: proc.exitCode, stdout, stderr };
}

// Bun's resourceUsage.maxRSS (like getrusage after vfork+exec) starts from the PARENT's peak, so a
// child of a bench process that holds 100 MB looks 100 MB big. This wrapper forks from a small Python,
// execs the command, and reports the child's own ru_maxrss and CPU time (from wait4) on its last
// stderr line. CPU time barely moves with the load of a shared machine, unlike wall time.
const USAGE_WRAPPER = [
  "import os, sys",
  "pid = os.fork()",
  "if pid == 0:",
  "    os.execv(sys.argv[1], sys.argv[1:])",
  "_, status, usage = os.wait4(pid, 0)",
  "sys.stderr.write('\\nusage peak_rss_kib=%d cpu_ms=%.3f\\n' % (usage.ru_maxrss, (usage.ru_utime + usage.ru_stime) * 1000))",
  "sys.exit(os.waitstatus_to_exitcode(status))",
].join("\n");

export type ChildUsage = { peakRssMiB: number; cpuMs: number; stdout: string };

/** Runs argv once under the fork/exec wrapper: its own peak RSS (MiB) and CPU time (user + system, ms). */
export function childUsage(argv: string[], options: Parameters<typeof timeSpawn>[1] = {}): ChildUsage {
  const run = timeSpawn([PYTHON, "-c", USAGE_WRAPPER, ...argv], options);
  const match = /usage peak_rss_kib=(\d+) cpu_ms=([\d.]+)\s*$/.exec(run.stderr);
  if (!match) throw new Error(`No resource usage reported for ${argv.join(" ")}`);
  return { peakRssMiB: Number(match[1]) / 1024, cpuMs: Number(match[2]), stdout: run.stdout };
}

/** A command's own peak RSS in MiB (not inherited from this process). */
export function peakRssMiB(argv: string[], options: Parameters<typeof timeSpawn>[1] = {}): number {
  return childUsage(argv, options).peakRssMiB;
}

/** `/usr/bin/python3 -c pass`, the baseline every shell-call and start-up figure is divided by. */
export function measureBaseline(runs: number): Figure {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) samples.push(timeSpawn([PYTHON, "-c", "pass"]).ms);
  return figure("ms", samples);
}

/**
 * A field of /proc/PID/status in MiB (VmRSS now, VmHWM peak, RssAnon: VmRSS without the pages of
 * files, i.e. of the executable); null when the process is gone.
 */
/** CPU time every thread of pid has run, in µs (Linux: /proc/PID/task/TID/schedstat, ns on the CPU). */
export function processCpuUs(pid: number): number {
  let total = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "latin1").split(" ")[0]) / 1000;
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return total;
}

export function procStatusMiB(pid: number, field: "VmRSS" | "VmHWM" | "RssAnon" = "VmRSS"): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    return match ? Number(match[1]) / 1024 : null;
  } catch {
    return null;
  }
}

export type ProcInfo = { pid: number; ppid: number; exe: string; cmdline: string[] };

/**
 * Processes whose environment holds AWREPL_HOME=home: the supervisor and workers a bench started.
 * With `under`, any AWREPL_HOME inside that directory (the smoke test's TMPDIR) matches.
 */
export function processesWithHome(home: string, options: { under?: boolean } = {}): ProcInfo[] {
  const needle = options.under ? `AWREPL_HOME=${home.replace(/\/$/, "")}/` : `AWREPL_HOME=${home}\0`;
  const found: ProcInfo[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, "latin1") + "\0";
      if (!environ.includes(needle)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").filter(Boolean);
      found.push({ pid, ppid, exe: readlinkSync(`/proc/${pid}/exe`), cmdline });
    } catch {
      // The process exited while we looked, or is not ours to read.
    }
  }
  return found;
}

/** True for a Python worker process (its executable is a python interpreter). */
/**
 * After a bench script stopped its supervisor: kills whatever process of `home` is still alive (saying
 * so: a benchmark must leave nothing behind) and removes the directory.
 */
export function sweepHome(home: string, remove: () => void): void {
  const left = processesWithHome(home);
  for (const p of left) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  remove();
  if (left.length) log(`warning: killed ${left.length} process(es) left behind`);
}

export function isPython(info: ProcInfo): boolean {
  return /python[\d.]*$/.test(info.exe);
}

/** A fresh AWREPL_HOME under the temp directory, and its removal. */
export function tempHome(prefix = "awrepl-bench-"): { home: string; remove: () => void } {
  const home = mkdtempSync(join(tmpdir(), prefix));
  return { home, remove: () => rmSync(home, { recursive: true, force: true }) };
}

/** Rejects when the promise has not settled within ms, naming what was awaited. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls a condition every few ms until it holds or ms pass; for waiting on other processes' state. */
export async function waitUntil(condition: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await Bun.sleep(5);
  }
}

/** The cell both sides run for the output-throughput figure (as jupyter_common.big_output_cell). */
export function bigOutputCell(totalBytes: number): string {
  return `import sys\nline = 'x' * 999 + '\\n'\nfor _ in range(${Math.floor(totalBytes / 1000)}): sys.stdout.write(line)`;
}

/** Progress on stderr so stdout stays the table (or JSON). */
export function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/** Polls an async condition every 10 ms until it holds or ms pass. */
export async function waitUntilAsync(condition: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await Bun.sleep(10);
  }
}
