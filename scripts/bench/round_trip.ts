// The library's round trip against its floor (issue 14), and what the gap between them is made of:
// the same request line, `{"type":"execute","code":"1+1",...}`, answered by five servers in alternating
// blocks in this one process, so load changes hit every row alike:
//   echo      a Python that echoes the line back (the floor: Bun → Python → Bun over pipes, no work)
//   minimal   a 10-line Python doing only what any runtime must (JSON in, compile, eval, repr, JSON
//             out): the floor of a Python REPL on this protocol
//   runtime   runtime.py itself, spoken to over raw pipes (its own per-call work, no awrepl host code)
//   worker    the same through lib/worker/worker.ts (Worker.request: the host's process layer)
//   session   ReplSession.execute("1+1"): the library (result assembly, deadline, queue)
// With AWREPL_BENCH_BEFORE_RUNTIME=FILE, an older runtime.py over raw pipes joins the blocks as
// `runtime_before` (the runtime's change, measured in the same blocks as the new one).
// Per row: the latency of every call, and per block the CPU time per call on each side (Bun: this
// process's cpuUsage; Python: every thread's /proc/PID/task/TID/schedstat). Every block starts
// every row's process afresh.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { ReplSession } from "../../lib/session/session.ts";
import { resolveInterpreter } from "../../lib/worker/interpreter.ts";
import { runtimeLaunch } from "../../lib/worker/launch.ts";
import { Worker } from "../../lib/worker/worker.ts";
import { figure, type Figures, processCpuUs, PYTHON, summarize, withTimeout } from "./lib.ts";

const CALL_MS = 30_000;
const BEFORE_RUNTIME = process.env.AWREPL_BENCH_BEFORE_RUNTIME;
export const ECHO = "import sys\nr, w = sys.stdin.buffer, sys.stdout.buffer\nfor line in r:\n    w.write(line)\n    w.flush()";
export const MINIMAL = [
  "import json, sys",
  "r, w, ns = sys.stdin.buffer, sys.stdout.buffer, {}",
  "for line in r:",
  "    m = json.loads(line)",
  "    v = eval(compile(m['code'], '<cell>', 'eval'), ns)",
  "    w.write((json.dumps({'event': 'result', 'id': m['id'], 'text': repr(v)}) + '\\n'",
  "             + json.dumps({'event': 'done', 'id': m['id'], 'status': 'ok'}) + '\\n').encode())",
  "    w.flush()",
].join("\n");

export type Row = { name: string; pid: number; call(): Promise<unknown>; close(): Promise<unknown> | void };

/** A child answering each request line with output that contains `until`; resolves when it has. */
export function pipeRow(name: string, child: ChildProcessWithoutNullStreams, until: string, ready?: string): Promise<Row> {
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

/** `calls` timed round trips (µs) after `warmUp` untimed ones, with each side's CPU per call. */
export async function measureRow(row: Row, warmUp: number, calls: number): Promise<{ times: number[]; bunCpuUs: number; pyCpuUs: number }> {
  for (let i = 0; i < warmUp; i++) await row.call();
  const times: number[] = [];
  const bun0 = process.cpuUsage();
  const py0 = processCpuUs(row.pid);
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    await row.call();
    times.push((performance.now() - start) * 1000);
  }
  const bun = process.cpuUsage(bun0);
  return { times, bunCpuUs: (bun.user + bun.system) / calls, pyCpuUs: (processCpuUs(row.pid) - py0) / calls };
}

export async function roundTripFigures(home: string, options: { smoke: boolean }): Promise<Figures> {
  const launch = await runtimeLaunch(home, await resolveInterpreter({ python: PYTHON }));
  const spawnRaw = () => {
    const child = spawn(launch.argv[0] as string, launch.argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] }) as ChildProcessWithoutNullStreams;
    if (launch.stdinPreamble) child.stdin.write(launch.stdinPreamble);
    return child;
  };
  const python = (args: string[]) => spawn(PYTHON, args, { stdio: ["pipe", "pipe", "pipe"] }) as ChildProcessWithoutNullStreams;
  // Fresh processes in every block: where the kernel first puts a process (on Bun's vCPU or the
  // other one) decides its round trip for its whole life (placement.ts), so one long-lived process
  // per row would make each row a draw of that placement.
  const starters: { name: string; start(): Promise<Row> }[] = [
    { name: "echo", start: () => pipeRow("echo", python(["-c", ECHO]), "\n") },
    { name: "minimal", start: () => pipeRow("minimal", python(["-c", MINIMAL]), '"done"') },
    { name: "runtime", start: () => pipeRow("runtime", spawnRaw(), '"done"', '"ready"') },
    ...(BEFORE_RUNTIME ? [{ name: "runtime_before", start: () => pipeRow("runtime_before", python(["-u", BEFORE_RUNTIME]), '"done"', '"ready"') }] : []),
    {
      name: "worker",
      async start(): Promise<Row> {
        const worker = await Worker.start({ argv: launch.argv, stdinPreamble: launch.stdinPreamble });
        return { name: "worker", pid: worker.pid, call: () => worker.request({ type: "execute", code: "1+1" }), close: () => worker.close() };
      },
    },
    {
      name: "session",
      async start(): Promise<Row> {
        const session = await ReplSession.start("round-trip", { home, python: PYTHON });
        return {
          name: "session",
          pid: session.pid as number,
          async call() {
            const r = await session.execute("1+1");
            if (r.value !== "2") throw new Error(`execute("1+1") gave ${JSON.stringify(r)}`);
          },
          close: () => session.close(),
        };
      },
    },
  ];
  const rows = starters;
  const blocks = options.smoke ? 1 : 12;
  const perBlock = options.smoke ? 20 : 400;
  const warmUp = options.smoke ? 20 : 200;
  const results = rows.map(() => ({ latency: [] as number[], blockP50: [] as number[], bunCpu: [] as number[], pyCpu: [] as number[] }));
  for (let b = 0; b < blocks; b++) {
    for (const [j, starter] of starters.entries()) {
      const row = await starter.start();
      try {
        const r = results[j]!;
        const m = await measureRow(row, warmUp, perBlock);
        r.pyCpu.push(m.pyCpuUs);
        r.bunCpu.push(m.bunCpuUs);
        r.latency.push(...m.times);
        r.blockP50.push(summarize(m.times).p50);
      } finally {
        await row.close();
      }
    }
  }
  const figures: Figures = {};
  const notes: Record<string, string> = {
    echo: "the floor: one JSON line Bun → Python echo → Bun",
    minimal: "a minimal Python REPL server: JSON, compile, eval, repr, JSON (the floor of any runtime)",
    runtime: "runtime.py over raw pipes (no awrepl host code)",
    runtime_before: `AWREPL_BENCH_BEFORE_RUNTIME (${BEFORE_RUNTIME}) over raw pipes`,
    worker: "Worker.request (lib/worker)",
    session: 'ReplSession.execute("1+1") (the library)',
  };
  rows.forEach((row, j) => {
    const r = results[j]!;
    figures[`rt_${row.name}_us`] = figure("us", r.latency, `${notes[row.name]}; ${blocks} blocks of ${perBlock}, alternating`);
    figures[`rt_${row.name}_bun_cpu_us`] = figure("us", r.bunCpu, "Bun CPU per call, per block");
    figures[`rt_${row.name}_py_cpu_us`] = figure("us", r.pyCpu, "Python CPU per call, per block");
  });
  const blockP50 = (name: string) => results[rows.findIndex((row) => row.name === name)]!.blockP50;
  const echo = blockP50("echo");
  const minimal = blockP50("minimal");
  const lib = blockP50("session");
  figures.rt_session_to_echo_p50_ratio = figure("×", lib.map((v, i) => v / (echo[i] as number)), "per block: the library's p50 ÷ the echo's p50");
  figures.rt_minimal_to_echo_p50_ratio = figure("×", minimal.map((v, i) => v / (echo[i] as number)), "per block: the minimal server's p50 ÷ the echo's p50");
  figures.rt_session_to_minimal_p50_ratio = figure("×", lib.map((v, i) => v / (minimal[i] as number)), "per block: the library's p50 ÷ the minimal server's p50");
  figures.library_round_trip = figure("us", results[rows.findIndex((row) => row.name === "session")]!.latency, "ReplSession.execute, the session row above");
  return figures;
}
