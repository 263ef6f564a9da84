// The library's round trip against its floor (issue 14), and what the gap between them is made of:
// the same request line, `{"type":"execute","code":"1+1",...}`, answered by four servers in alternating
// blocks in this one process, so load changes hit every row alike:
//   echo      a Python that echoes the line back (the floor: Bun → Python → Bun over pipes, no work)
//   runtime   runtime.py itself, spoken to over raw pipes (its own per-call work, no awrepl host code)
//   worker    the same through lib/worker/worker.ts (Worker.request: the host's process layer)
//   session   ReplSession.execute("1+1"): the library (result assembly, deadline, queue)
// Per row: the latency of every call, and per block the CPU time per call on each side (Bun: this
// process's cpuUsage; Python: /proc/PID/schedstat, in ns).
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { ReplSession } from "../../lib/session/session.ts";
import { resolveInterpreter } from "../../lib/worker/interpreter.ts";
import { runtimeLaunch } from "../../lib/worker/launch.ts";
import { Worker } from "../../lib/worker/worker.ts";
import { type Figures, figure, PYTHON, summarize, withTimeout } from "./lib.ts";

const CALL_MS = 30_000;
const ECHO = "import sys\nr, w = sys.stdin.buffer, sys.stdout.buffer\nfor line in r:\n    w.write(line)\n    w.flush()";

type Row = { name: string; pid: number; call(): Promise<unknown>; close(): Promise<unknown> | void };

/** CPU time a process has run, in µs (/proc/PID/schedstat: ns on the CPU). */
function cpuUs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, "latin1").split(" ")[0]) / 1000;
}

/** A child answering each request line with output that contains `until`; resolves when it has. */
function pipeRow(name: string, child: ChildProcessWithoutNullStreams, until: string, ready?: string): Promise<Row> {
  let waiter: (() => void) | null = null;
  let started: () => void = () => {};
  const up = new Promise<void>((resolve) => (started = resolve));
  let id = 0;
  child.stdout.on("data", (chunk: Buffer) => {
    if (ready && chunk.includes(ready)) started();
    if (chunk.includes(until)) {
      const w = waiter;
      waiter = null;
      w?.();
    }
  });
  if (!ready) started();
  const row: Row = {
    name,
    pid: child.pid as number,
    call() {
      const done = new Promise<void>((resolve) => (waiter = resolve));
      child.stdin.write(`{"type":"execute","code":"1+1","id":"${++id}"}\n`);
      return withTimeout(done, CALL_MS, `${name}'s answer`);
    },
    close: () => void child.kill("SIGKILL"),
  };
  return withTimeout(up, CALL_MS, `${name} to start`).then(() => row);
}

export async function roundTripFigures(home: string, options: { smoke: boolean }): Promise<Figures> {
  const launch = await runtimeLaunch(home, await resolveInterpreter({ python: PYTHON }));
  const spawnRaw = () => {
    const child = spawn(launch.argv[0] as string, launch.argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] }) as ChildProcessWithoutNullStreams;
    if (launch.stdinPreamble) child.stdin.write(launch.stdinPreamble);
    return child;
  };
  const worker = await Worker.start({ argv: launch.argv, stdinPreamble: launch.stdinPreamble });
  const session = await ReplSession.start("round-trip", { home, python: PYTHON });
  const rows: Row[] = [
    await pipeRow("echo", spawn(PYTHON, ["-c", ECHO], { stdio: ["pipe", "pipe", "pipe"] }) as ChildProcessWithoutNullStreams, "\n"),
    await pipeRow("runtime", spawnRaw(), '"done"', '"ready"'),
    { name: "worker", pid: worker.pid, call: () => worker.request({ type: "execute", code: "1+1" }), close: () => worker.close() },
    {
      name: "session",
      pid: session.pid as number,
      async call() {
        const r = await session.execute("1+1");
        if (r.value !== "2") throw new Error(`execute("1+1") gave ${JSON.stringify(r)}`);
      },
      close: () => session.close(),
    },
  ];
  const blocks = options.smoke ? 1 : 10;
  const perBlock = options.smoke ? 20 : 500;
  const results = rows.map(() => ({ latency: [] as number[], blockP50: [] as number[], bunCpu: [] as number[], pyCpu: [] as number[] }));
  try {
    for (const row of rows) for (let i = 0; i < (options.smoke ? 20 : 300); i++) await row.call();
    for (let b = 0; b < blocks; b++) {
      for (const [j, row] of rows.entries()) {
        const r = results[j]!;
        const times: number[] = [];
        const bun0 = process.cpuUsage();
        const py0 = cpuUs(row.pid);
        for (let i = 0; i < perBlock; i++) {
          const start = performance.now();
          await row.call();
          times.push((performance.now() - start) * 1000);
        }
        const bun = process.cpuUsage(bun0);
        r.pyCpu.push((cpuUs(row.pid) - py0) / perBlock);
        r.bunCpu.push((bun.user + bun.system) / perBlock);
        r.latency.push(...times);
        r.blockP50.push(summarize(times).p50);
      }
    }
  } finally {
    await Promise.all(rows.map((row) => row.close()));
  }
  const figures: Figures = {};
  const notes: Record<string, string> = {
    echo: "the floor: one JSON line Bun → Python echo → Bun",
    runtime: "runtime.py over raw pipes (no awrepl host code)",
    worker: "Worker.request (lib/worker)",
    session: 'ReplSession.execute("1+1") (the library)',
  };
  rows.forEach((row, j) => {
    const r = results[j]!;
    figures[`rt_${row.name}_us`] = figure("us", r.latency, `${notes[row.name]}; ${blocks} blocks of ${perBlock}, alternating`);
    figures[`rt_${row.name}_bun_cpu_us`] = figure("us", r.bunCpu, "Bun CPU per call, per block");
    figures[`rt_${row.name}_py_cpu_us`] = figure("us", r.pyCpu, "Python CPU per call, per block");
  });
  const echo = results[0]!.blockP50;
  const lib = results[3]!.blockP50;
  figures.rt_session_to_echo_p50_ratio = figure("×", lib.map((v, i) => v / (echo[i] as number)), "per block: the library's p50 ÷ the echo's p50");
  figures.library_round_trip = figure("us", results[3]!.latency, "ReplSession.execute, the session row above");
  return figures;
}
