// The round trip's other variable: where the kernel puts the Python process. On these VMs a reply
// that wakes a process on the other vCPU (halted: guest_halt_poll_ns is 0) costs tens of µs more
// than one on the same vCPU, and a process tends to stay where it was first placed, so one
// process's p50 can be twice another's for the same code. This measures each server of
// round_trip.ts (echo, the minimal Python server, runtime.py, and AWREPL_BENCH_BEFORE_RUNTIME when
// set) three ways, with this Bun process pinned to CPU 0: the server pinned to CPU 0 (same vCPU),
// pinned to CPU 1 (the other), and unpinned; every row from fresh processes, alternating.
//
// Needs Linux, `taskset` (util-linux) and two CPUs; otherwise it reports nothing and says why.
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process";
import { cpus } from "node:os";
import { resolveInterpreter } from "../../lib/worker/interpreter.ts";
import { runtimeLaunch } from "../../lib/worker/launch.ts";
import { figure, type Figures, log, PYTHON, summarize } from "./lib.ts";
import { ECHO, measureRow, MINIMAL, pipeRow } from "./round_trip.ts";

type Placement = "same" | "other" | "free";
const TASKSET: Record<Placement, string[]> = { same: ["taskset", "-c", "0"], other: ["taskset", "-c", "1"], free: [] };

/** p50 of `calls` execute("1+1") round trips to a fresh server started with argv, and its Python CPU per call. */
async function serverP50(name: string, argv: string[], until: string, calls: number): Promise<{ p50: number; cpuUs: number }> {
  const row = await pipeRow(name, spawn(argv[0] as string, argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] }) as ChildProcessWithoutNullStreams, until);
  try {
    const m = await measureRow(row, Math.max(20, calls / 5), calls);
    return { p50: summarize(m.times).p50, cpuUs: m.pyCpuUs };
  } finally {
    await row.close();
  }
}

function unavailable(): string | null {
  if (process.platform !== "linux") return "not Linux";
  if (cpus().length < 2) return "fewer than two CPUs";
  if (spawnSync("taskset", ["-p", String(process.pid)]).status !== 0) return "no taskset";
  return null;
}

export async function placementFigures(home: string, options: { smoke: boolean }): Promise<Figures> {
  const why = unavailable();
  if (why) {
    log(`placement: skipped (${why})`);
    return {};
  }
  const launch = await runtimeLaunch(home, await resolveInterpreter({ python: PYTHON }));
  if (launch.stdinPreamble) throw new Error("placement.ts expects a local runtime launch");
  const servers: Record<string, { argv: string[]; until: string }> = {
    echo: { argv: [PYTHON, "-c", ECHO], until: "\n" },
    minimal: { argv: [PYTHON, "-c", MINIMAL], until: '"done"' },
    runtime: { argv: launch.argv, until: '"done"' },
  };
  const before = process.env.AWREPL_BENCH_BEFORE_RUNTIME;
  if (before) servers.runtime_before = { argv: [PYTHON, "-u", before], until: '"done"' };
  const own = spawnSync("taskset", ["-p", String(process.pid)], { encoding: "utf8" }).stdout.trim().split(": ").pop() ?? "";
  spawnSync("taskset", ["-a", "-p", "1", String(process.pid)]); // this process, every thread, on CPU 0
  const rounds = options.smoke ? 1 : 5;
  const calls = options.smoke ? 20 : 1500;
  const p50: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  try {
    for (let r = 0; r < rounds; r++) {
      for (const placement of ["same", "other", "free"] as Placement[]) {
        for (const [name, server] of Object.entries(servers)) {
          const m = await serverP50(`${name} (${placement})`, [...TASKSET[placement], ...server.argv], server.until, calls);
          (p50[`${name}_${placement}`] ??= []).push(m.p50);
          (cpu[`${name}_${placement}`] ??= []).push(m.cpuUs);
        }
      }
    }
  } finally {
    if (own) spawnSync("taskset", ["-a", "-p", own, String(process.pid)]);
  }
  const where: Record<Placement, string> = { same: "on the host's vCPU", other: "on the other vCPU", free: "placed by the kernel" };
  const figures: Figures = {};
  for (const key of Object.keys(p50)) {
    const placement = key.split("_").pop() as Placement;
    figures[`placement_${key}_us`] = figure("us", p50[key] as number[], `p50 per fresh process, the server ${where[placement]}; ${calls} calls each`);
    figures[`placement_${key}_py_cpu_us`] = figure("us", cpu[key] as number[], "Python CPU per call, per process");
  }
  // The ratio with placement held equal: runtime.py against the echo, both on Bun's vCPU
  // (and both on the other one), per round.
  for (const placement of ["same", "other"] as Placement[]) {
    const echo = p50[`echo_${placement}`] as number[];
    for (const name of ["minimal", "runtime"]) {
      const ours = p50[`${name}_${placement}`] as number[];
      figures[`placement_${name}_${placement}_to_echo_ratio`] = figure("×", ours.map((v, i) => v / (echo[i] as number)), `per round: ${name}'s p50 ÷ the echo's, both ${where[placement]}`);
    }
  }
  return figures;
}
