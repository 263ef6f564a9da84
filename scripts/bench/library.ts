// awrepl's library figures: execute("1+1") round trip (in-process ReplSession against the pipe echo
// and the layers between them: round_trip.ts; a supervisor-held session through attach()), new session
// to first result, interrupt latencies, and the 100 MB cell through the supervisor (client side: this
// process's attach(), and a CLI client in its own process, alternating with the bare-Python floor).
//
//   bun scripts/bench/library.ts [--smoke]      prints its figures as JSON
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { attach } from "../../lib/client/attach.ts";
import { daemonStatus, stopDaemon } from "../../lib/client/daemon.ts";
import { ReplSession } from "../../lib/session/session.ts";
import { SpareWorkers } from "../../lib/worker/spare.ts";
import type { Session } from "../../lib/protocol/api.ts";
import { cellThroughput } from "./floors.ts";
import { placementFigures } from "./placement.ts";
import { roundTripFigures } from "./round_trip.ts";
import { AWREPL_BIN, type BenchOptions, bigOutputCell, childUsage, figure, type Figures, log, peakRssMiB, processesWithHome, procStatusMiB, PYTHON, tempHome, timeSpawn, withTimeout } from "./lib.ts";

const CALL_MS = 30_000;

/** execute("1+1") count times after a warm-up; samples in microseconds. */
async function roundTrips(session: Session, count: number): Promise<number[]> {
  for (let i = 0; i < Math.min(200, count); i++) await session.execute("1+1");
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    const result = await session.execute("1+1");
    samples.push((performance.now() - start) * 1000);
    if (result.value !== "2") throw new Error(`execute("1+1") gave ${JSON.stringify(result)}`);
  }
  return samples;
}

/**
 * ReplSession.start() to the value of "1+1", a fresh worker each run, alternating with the baseline
 * (`python3 -c pass`) so that load on the shared machine hits both alike.
 */
async function newSessionToResult(home: string, runs: number): Promise<{ samples: number[]; baseline: number[] }> {
  const warm = await ReplSession.start("warm", { home, python: PYTHON }); // writes the runtime cache once
  await warm.close();
  const samples: number[] = [];
  const baseline: number[] = [];
  for (let i = 0; i < runs; i++) {
    baseline.push(timeSpawn([PYTHON, "-c", "pass"]).ms);
    const start = performance.now();
    const session = await withTimeout(ReplSession.start(`new${i}`, { home, python: PYTHON }), CALL_MS, "ReplSession.start");
    try {
      const result = await withTimeout(session.execute("1+1"), CALL_MS, "first execute");
      samples.push(performance.now() - start);
      if (result.value !== "2") throw new Error(`First result was ${JSON.stringify(result)}`);
    } finally {
      await session.close();
    }
  }
  return { samples, baseline };
}

/**
 * The same in a long-lived host that keeps a warm spare worker (SpareWorkers, as the supervisor may):
 * each run waits until the spare is ready, as a host creating sessions at an agent's pace would find it.
 */
async function newSessionWithSpare(home: string, runs: number): Promise<number[]> {
  const spares = new SpareWorkers();
  const sessions: ReplSession[] = [];
  try {
    sessions.push(await ReplSession.start("spare-warm", { home, python: PYTHON, spares }));
    const samples: number[] = [];
    for (let i = 0; i < runs; i++) {
      await waitForSpare(spares);
      const start = performance.now();
      const session = await withTimeout(ReplSession.start(`spare${i}`, { home, python: PYTHON, spares }), CALL_MS, "ReplSession.start");
      sessions.push(session);
      const result = await withTimeout(session.execute("1+1"), CALL_MS, "first execute");
      samples.push(performance.now() - start);
      if (result.value !== "2") throw new Error(`First result was ${JSON.stringify(result)}`);
    }
    return samples;
  } finally {
    await Promise.all(sessions.map((s) => s.close()));
    await spares.closeAll();
  }
}

async function waitForSpare(spares: SpareWorkers): Promise<void> {
  const deadline = performance.now() + CALL_MS;
  while ((await spares.pids()).length === 0) {
    if (performance.now() > deadline) throw new Error(`No spare worker became ready within ${CALL_MS} ms`);
    await Bun.sleep(10);
  }
}

/**
 * Milliseconds from interrupt() to the interrupted cell's result. The cell prints a marker first so the
 * interrupt is sent only once it runs, then waits a little so it is inside its loop or await.
 */
async function interruptLatency(session: Session, body: string, runs: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    let markSeen!: () => void;
    const started = new Promise<void>((resolve) => (markSeen = resolve));
    const cell = session.execute(`print('started', flush=True)\n${body}`, {
      timeoutMs: 0,
      onOutput: (_stream, text) => text.includes("started") && markSeen(),
    });
    await withTimeout(started, CALL_MS, "the cell's start marker");
    await Bun.sleep(100);
    const start = performance.now();
    await session.interrupt();
    const result = await withTimeout(cell, CALL_MS, "the interrupted cell's result");
    samples.push(performance.now() - start);
    if (result.status !== "interrupted") throw new Error(`Interrupted cell ended ${result.status}: ${result.exception}`);
  }
  return samples;
}

const INTERRUPT_CELLS = {
  busy_loop: "while True: pass",
  sleep_loop: "import time\nwhile True: time.sleep(0.01)",
  asyncio_sleep: "import asyncio\nawait asyncio.sleep(1e9)",
} as const;

/** Resets VmHWM to the current RSS (Linux clear_refs 5), so a later VmHWM is the peak of what came between. */
function resetPeakRss(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch (err) {
    log(`cannot reset the peak RSS of ${pid} (${String(err)}): the peak includes the supervisor's start`);
  }
}

/** The pid of the supervisor serving a home, or null when none runs. */
export async function supervisorPid(home: string): Promise<number | null> {
  const status = await withTimeout(daemonStatus({ home }), CALL_MS, "daemon status");
  return status?.pid ?? null;
}

/** Stops a home's supervisor, then kills (by pid) anything this bench started there that is still alive. */
export async function cleanUpHome(home: string): Promise<void> {
  await withTimeout(stopDaemon({ home }), CALL_MS, "daemon stop").catch((err) => log(String(err)));
  for (const p of processesWithHome(home)) {
    log(`killing leftover process ${p.pid} (${p.cmdline.join(" ")})`);
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

/**
 * CPU time (user + system) of a warm `awrepl -s NAME run "1+1"` client process and of the baseline,
 * alternating: the shell-call ratio in a unit that the machine's load barely moves.
 */
function shellCallCpu(name: string, env: NodeJS.ProcessEnv, runs: number): Figures {
  const client: number[] = [];
  const baseline: number[] = [];
  for (let i = 0; i < runs; i++) {
    baseline.push(childUsage([PYTHON, "-c", "pass"]).cpuMs);
    const call = childUsage([AWREPL_BIN, "-s", name, "run", "1+1"], { env });
    if (call.stdout !== "2\n") throw new Error(`A warm call printed ${JSON.stringify(call.stdout)}`);
    client.push(call.cpuMs);
  }
  return {
    warm_shell_call_cpu: figure("ms", client, 'CPU time of the `awrepl -s s run "1+1"` process'),
    baseline_python_c_pass_cpu: figure("ms", baseline, "CPU time of python3 -c pass, alternating"),
  };
}

/** Peak RSS growth of a process over a stretch of work: VmHWM after it − VmRSS before it. */
async function peakGrowth(pid: number, work: () => Promise<void>): Promise<number> {
  const before = procStatusMiB(pid);
  resetPeakRss(pid);
  await work();
  const peak = procStatusMiB(pid, "VmHWM");
  if (before === null || peak === null) throw new Error(`Cannot read the RSS of the supervisor (pid ${pid})`);
  return peak - before;
}

/**
 * The big-output cell through the supervisor, twice: to an attach() client that asks for no live
 * output, and from the CLI, which streams live output (the supervisor forwards every byte). MB/s of
 * each, the CLI client's peak RSS, and the supervisor's peak RSS growth over each; then cells of 300
 * and 600 MB from the CLI, whose extra peak shows whether memory follows the output's size.
 */
async function bigOutputFigures(remote: Session, home: string, env: NodeJS.ProcessEnv, smoke: boolean): Promise<Figures> {
  const figures: Figures = {};
  const bytes = smoke ? 1_000_000 : 100_000_000;
  const runs = smoke ? 1 : 3;
  const pid = await supervisorPid(home);
  if (pid === null) throw new Error("No supervisor runs after attach()");
  const speeds: number[] = [];
  const attachGrowth = await peakGrowth(pid, async () => {
    for (let i = 0; i < runs; i++) {
      log(`attach: cell printing ${bytes / 1e6} MB`);
      const start = performance.now();
      const result = await withTimeout(remote.execute(bigOutputCell(bytes), { timeoutMs: 0 }), 600_000, "the big-output cell");
      speeds.push(bytes / 1e6 / ((performance.now() - start) / 1000));
      if (result.status !== "ok" || result.stdout.length + result.truncated_bytes < bytes) {
        throw new Error(`Big-output cell: status ${result.status}, kept ${result.stdout.length}, dropped ${result.truncated_bytes}`);
      }
    }
  });
  figures.attach_big_output_mb_per_s = figure("MB/s", speeds, `${bytes / 1e6} MB, default 64 KiB output limit`);
  figures.attach_big_output_supervisor_growth_mib = figure("MiB", [attachGrowth], "supervisor VmHWM − VmRSS before, attach() without live output");

  const cliCall = (size: number) => {
    const file = join(home, `cell_${size}.py`);
    writeFileSync(file, bigOutputCell(size));
    return [AWREPL_BIN, "-s", remote.id, "run", "-f", file];
  };
  const cliSpeeds: number[] = [];
  const floorSpeeds: number[] = [];
  const envFloorSpeeds: number[] = [];
  const unbuffered = process.env.PYTHONUNBUFFERED ? `PYTHONUNBUFFERED=${process.env.PYTHONUNBUFFERED}` : "PYTHONUNBUFFERED unset";
  const cliGrowth = await peakGrowth(pid, async () => {
    for (let i = 0; i < runs; i++) {
      log(`cli: cell printing ${bytes / 1e6} MB, --max-output 4096, then the same cell in a bare Python into a pipe (buffered, and as the environment runs it)`);
      const run = timeSpawn([...cliCall(bytes), "--max-output", "4096"], { env, timeoutMs: 600_000 });
      cliSpeeds.push(bytes / 1e6 / (run.ms / 1000));
      floorSpeeds.push(...cellThroughput(bytes, true, 1));
      envFloorSpeeds.push(...cellThroughput(bytes, true, 1, false));
    }
  });
  figures.cli_big_output_mb_per_s = figure("MB/s", cliSpeeds, "whole `awrepl -s s run -f cell.py --max-output 4096` call, live output on");
  figures.cli_big_output_floor_mb_per_s = figure("MB/s", floorSpeeds, "the same cell in a bare Python (buffered), stdout to a pipe Bun drains; alternating with the CLI calls");
  figures.cli_big_output_env_floor_mb_per_s = figure("MB/s", envFloorSpeeds, `the same, with the environment as it is (${unbuffered}); alternating`);
  figures.cli_big_output_supervisor_growth_mib = figure("MiB", [cliGrowth], "supervisor VmHWM − VmRSS before, CLI calls (live output streamed)");
  const versionPeak = peakRssMiB([AWREPL_BIN, "--version"]);
  figures.cli_big_output_client_peak_rss_mib = figure("MiB", [peakRssMiB(cliCall(bytes), { env, timeoutMs: 600_000 })], `awrepl --version alone peaks at ${versionPeak.toFixed(1)} MiB`);
  if (!smoke) {
    // Bounded means the peak does not follow the output's size. Bun's GC lets the heap settle at a
    // level of its own over the first big cells, so compare two cells past that: one of 3× and one of
    // 6× the size; the second must not raise the peak by more than GC slack. HWM is not reset here.
    for (const factor of [3, 6]) {
      log(`cli: cell printing ${(factor * bytes) / 1e6} MB`);
      const peakBefore = procStatusMiB(pid, "VmHWM");
      timeSpawn(cliCall(factor * bytes), { env, timeoutMs: 600_000 });
      const peakAfter = procStatusMiB(pid, "VmHWM");
      if (factor === 6 && peakBefore !== null && peakAfter !== null) {
        figures.cli_600mb_supervisor_extra_peak_mib = figure("MiB", [peakAfter - peakBefore], "extra supervisor peak from a 600 MB CLI cell after a 300 MB one");
      }
    }
  }
  return figures;
}

export async function libraryFigures(options: BenchOptions = {}): Promise<Figures> {
  const smoke = options.smoke ?? false;
  const figures: Figures = {};
  const { home, remove } = tempHome();
  const env = { ...process.env, AWREPL_HOME: home, AWREPL_BIN, AWREPL_PYTHON: PYTHON };
  try {
    log("library: new session to first result");
    const cold = await newSessionToResult(home, smoke ? 1 : 9);
    figures.library_new_session_to_result = figure("ms", cold.samples);
    figures.library_baseline_python_c_pass = figure("ms", cold.baseline, "measured alternately with the new sessions");
    log("library: new session to first result, warm spare worker");
    figures.library_new_session_with_spare = figure("ms", await newSessionWithSpare(home, smoke ? 1 : 9), "SpareWorkers: a spare was ready");

    log("library: execute round trip against the pipe echo, layer by layer (round_trip.ts)");
    Object.assign(figures, await roundTripFigures(home, { smoke }));
    log("library: the same servers placed on the same vCPU, the other one, and by the kernel (placement.ts)");
    Object.assign(figures, await placementFigures(home, { smoke }));
    const local = await ReplSession.start("local", { home, python: PYTHON });
    try {
      for (const [name, body] of Object.entries(INTERRUPT_CELLS)) {
        log(`library: interrupt ${name}`);
        figures[`library_interrupt_${name}`] = figure("ms", await interruptLatency(local, body, smoke ? 1 : 7));
      }
    } finally {
      await local.close();
    }

    log("attach: execute round trip through the supervisor");
    const remote = await withTimeout(attach("remote", { home, python: PYTHON, clientEnv: env }), CALL_MS, "attach()");
    try {
      figures.attach_round_trip = figure("us", await roundTrips(remote, smoke ? 50 : 3000));
      Object.assign(figures, shellCallCpu(remote.id, env, smoke ? 2 : 21));
      Object.assign(figures, await bigOutputFigures(remote, home, env, smoke));
    } finally {
      await remote.close();
    }
  } finally {
    await cleanUpHome(home);
    remove();
  }
  return figures;
}

if (import.meta.main) {
  const figures = await libraryFigures({ smoke: process.argv.includes("--smoke") });
  console.log(JSON.stringify(figures));
}
