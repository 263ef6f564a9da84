// The shell-call benchmarks, against `/usr/bin/python3 -c pass` measured in the same run (alternating,
// so load on the shared machine hits both sides alike):
//   warm_shell_call          `awrepl -s s run "1+1"` with the supervisor and the session warm (target ≤ 0.5×)
//   new_session_shell_call   the same for a session name not seen before, the supervisor's spare worker
//                            ready (the usual case between an agent's calls), each beside a warm call:
//                            new_session_minus_warm (issue 14: ≤ the warm call + 5 ms)
//   parallel_clients_calls_per_s   64 client processes at once over 8 sessions
//
//   bun scripts/bench/shell_call.ts [--smoke] [--json]
// --json prints the figures as one JSON line at the end (scripts/bench/all.ts reads it).
import { spawn } from "node:child_process";
import { daemonStatus } from "../../lib/client/daemon.ts";
import { AWREPL_BIN, figure, type Figures, log, PYTHON, summarize, sweepHome, tempHome, timeSpawn, waitUntilAsync } from "./lib.ts";

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const asJson = args.includes("--json");

const WARM_RUNS = smoke ? 3 : 41;
const NEW_SESSION_RUNS = smoke ? 2 : 15;
const PARALLEL_CLIENTS = 64;
const PARALLEL_SESSIONS = 8;
const PARALLEL_CALLS_PER_CLIENT = smoke ? 1 : 4;

const { home, remove } = tempHome("awrepl-bench-shell-");
const env = { ...process.env, AWREPL_HOME: home, AWREPL_PYTHON: PYTHON, NO_COLOR: "1", AWREPL_SESSION: undefined };
const awrepl = (argv: string[]) => timeSpawn([AWREPL_BIN, ...argv], { env, cwd: home });

function expectOutput(run: { stdout: string }, want: string, what: string): void {
  if (run.stdout !== want) throw new Error(`${what} printed ${JSON.stringify(run.stdout)}, not ${JSON.stringify(want)}`);
}

/** `count` client processes at once, each making `calls` calls in turn; resolves the wall time. */
async function parallelClients(count: number, sessions: number, calls: number): Promise<number> {
  const start = performance.now();
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      for (let c = 0; c < calls; c++) {
        const out = await new Promise<string>((resolve, reject) => {
          const child = spawn(AWREPL_BIN, ["-s", `p${i % sessions}`, "run", "1+1"], { env, cwd: home, stdio: ["ignore", "pipe", "pipe"] });
          let stdout = "";
          let stderr = "";
          child.stdout.on("data", (d) => (stdout += d));
          child.stderr.on("data", (d) => (stderr += d));
          const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
          child.on("close", (code) => {
            clearTimeout(timer);
            if (code === 0) resolve(stdout);
            else reject(new Error(`parallel client ${i} exited ${code}: ${stderr}`));
          });
        });
        expectOutput({ stdout: out }, "2\n", "a parallel client");
      }
    }),
  );
  return performance.now() - start;
}

const figures: Figures = {};
try {
  log(`shell: warming the supervisor and session s (${home})`);
  expectOutput(awrepl(["-s", "s", "run", "1+1"]), "2\n", "the first call");

  log(`shell: ${WARM_RUNS} warm calls, alternating with python3 -c pass`);
  const warm: number[] = [];
  const baseline: number[] = [];
  for (let i = 0; i < WARM_RUNS; i++) {
    baseline.push(timeSpawn([PYTHON, "-c", "pass"]).ms);
    const r = awrepl(["-s", "s", "run", "1+1"]);
    expectOutput(r, "2\n", "a warm call");
    warm.push(r.ms);
  }
  figures.shell_baseline_python_c_pass = figure("ms", baseline, "measured alternately with the warm calls");
  figures.warm_shell_call = figure("ms", warm, 'awrepl -s s run "1+1", supervisor and session warm');

  log(`shell: ${NEW_SESSION_RUNS} calls that each start a new session, each beside a warm call, the spare worker ready`);
  const fresh: number[] = [];
  const warmBeside: number[] = [];
  const minusWarm: number[] = [];
  for (let i = 0; i < NEW_SESSION_RUNS; i++) {
    // The supervisor starts its next spare worker 100 ms after a session takes one.
    await waitUntilAsync(async () => ((await daemonStatus({ env })) ?? { spares: 0 }).spares > 0, 30_000, "a ready spare worker");
    const w = awrepl(["-s", "s", "run", "1+1"]);
    expectOutput(w, "2\n", "a warm call");
    const r = awrepl(["-s", `new${i}`, "run", "1+1"]);
    expectOutput(r, "2\n", "a new-session call");
    fresh.push(r.ms);
    warmBeside.push(w.ms);
    minusWarm.push(r.ms - w.ms);
    awrepl(["close", `new${i}`]);
  }
  figures.new_session_shell_call = figure("ms", fresh, 'awrepl -s NEW run "1+1", supervisor warm, its spare worker ready');
  figures.new_session_warm_beside = figure("ms", warmBeside, "the warm call made just before each new-session call");
  figures.new_session_minus_warm = figure("ms", minusWarm, "each new-session call − the warm call beside it");

  log(`shell: ${PARALLEL_CLIENTS} parallel clients over ${PARALLEL_SESSIONS} sessions`);
  const rates: number[] = [];
  for (let round = 0; round < (smoke ? 1 : 3); round++) {
    const ms = await parallelClients(PARALLEL_CLIENTS, PARALLEL_SESSIONS, PARALLEL_CALLS_PER_CLIENT);
    rates.push((PARALLEL_CLIENTS * PARALLEL_CALLS_PER_CLIENT * 1000) / ms);
  }
  figures.parallel_clients_calls_per_s = figure("calls/s", rates, `${PARALLEL_CLIENTS} client processes, ${PARALLEL_SESSIONS} sessions, ${PARALLEL_CALLS_PER_CLIENT} calls each`);
} finally {
  awrepl(["daemon", "stop"]);
  sweepHome(home, remove);
}

const base = summarize(figures.shell_baseline_python_c_pass?.samples ?? []).p50;
for (const [name, f] of Object.entries(figures)) {
  const s = summarize(f.samples);
  const ratio = f.unit === "ms" && name !== "shell_baseline_python_c_pass" ? `  ratio ${(s.p50 / base).toFixed(2)}×` : "";
  log(`${name}: median ${s.p50.toFixed(2)} ${f.unit} (min ${s.min.toFixed(2)}, max ${s.max.toFixed(2)}, n=${s.n})${ratio}`);
}
if (asJson) console.log(JSON.stringify(figures));
