// `--sandbox` at the command line and session level (the worker-level start, the far side's cleanup
// and streamed snapshots are scripts/bench/workers.ts's). Every figure beside its floor, measured in
// the same run in interleaved rounds (the machine is shared: load hits both sides alike):
//
//   warm_call_local / warm_call_sandbox            `awrepl -s S run "1+1"` on a live session
//       floor: each other (the sandbox costs nothing once the worker runs: the client's start dominates)
//   warm_call_sandbox_flag                         the same with `--sandbox` on the command line (fast path)
//   new_session_local / new_session_sandbox        a NEW named session's first result, a spare ready
//       target (docs/architecture.md, "Benchmarks"): sandbox <= 1.2 x local; floor: the warm call measured beside it
//   cold_run_local / cold_run_sandbox              an ephemeral `awrepl run "1+1"` (no supervisor, no spare)
//       floors: `bwrap <the profile's namespaces> /bin/true` and `python3 -c pass`
//
//   bun scripts/bench/sandbox_cli.ts [--smoke] [--json]
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { BWRAP_FLOOR_FLAGS, bwrapAvailable } from "../../tests/harness/bwrap.ts";
import { AWREPL_BIN, figure, type Figures, log, PYTHON, summarize, tempHome, timeSpawn } from "./lib.ts";

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const asJson = args.includes("--json");

const ROUNDS = smoke ? 2 : 25;
/** Time for the supervisor to refill its spare after a session took it (it waits 100 ms, then starts one). */
const SPARE_SETTLE_MS = smoke ? 400 : 700;

export async function benchSandboxCli(options: { smoke?: boolean } = {}): Promise<{ figures: Figures; skipped?: string }> {
  const check = bwrapAvailable();
  if (!check.ok) return { figures: {}, skipped: check.reason };
  const rounds = options.smoke ? 2 : ROUNDS;
  const { home: root, remove } = tempHome("awrepl-bench-sandbox-");
  // The project beside the state directory, not in it: a writable path inside awrepl's state is refused.
  const cwd = join(root, "project");
  const home = join(root, "state");
  mkdirSync(cwd);
  mkdirSync(home, { mode: 0o700 });
  const env = { ...process.env, AWREPL_HOME: home, AWREPL_PYTHON: PYTHON, NO_COLOR: "1", AWREPL_SESSION: undefined };
  const awrepl = (argv: string[]) => {
    const r = timeSpawn([AWREPL_BIN, ...argv], { env, cwd });
    if (r.stdout !== "2\n") throw new Error(`awrepl ${argv.join(" ")} printed ${JSON.stringify(r.stdout)}: ${r.stderr}`);
    return r.ms;
  };
  const samples: Record<string, number[]> = {};
  const add = (name: string, ms: number) => (samples[name] ??= []).push(ms);
  try {
    log("sandbox_cli: warming the supervisor, one local and one sandboxed session, and their spares");
    awrepl(["-s", "L", "run", "1+1"]);
    awrepl(["-s", "S", "--sandbox", "run", "1+1"]);
    await Bun.sleep(SPARE_SETTLE_MS);
    for (let i = 0; i < rounds; i++) {
      add("warm_call_local", awrepl(["-s", "L", "run", "1+1"]));
      add("warm_call_sandbox", awrepl(["-s", "S", "run", "1+1"]));
      add("warm_call_sandbox_flag", awrepl(["-s", "S", "--sandbox", "run", "1+1"]));
      // A new name, same directory, environment and profile: it takes the warm spare.
      add("new_session_local", awrepl(["-s", `nl${i}`, "run", "1+1"]));
      add("new_session_sandbox", awrepl(["-s", `ns${i}`, "--sandbox", "run", "1+1"]));
      await Bun.sleep(SPARE_SETTLE_MS);
      add("cold_run_local", awrepl(["run", "1+1"]));
      add("cold_run_sandbox", awrepl(["--sandbox", "run", "1+1"]));
      add("floor_bwrap_true", timeSpawn([check.bwrap, ...BWRAP_FLOOR_FLAGS, "--", "/bin/true"], { env: { PATH: "/usr/bin:/bin" } }).ms);
      add("floor_python_pass", timeSpawn([PYTHON, "-c", "pass"]).ms);
      // Closing the new sessions keeps the supervisor's memory flat across rounds.
      timeSpawn([AWREPL_BIN, "close", `nl${i}`], { env, cwd });
      timeSpawn([AWREPL_BIN, "close", `ns${i}`], { env, cwd });
    }
  } finally {
    timeSpawn([AWREPL_BIN, "daemon", "stop"], { env, cwd, allowFailure: true });
    remove();
  }
  const figures: Figures = {};
  for (const [name, values] of Object.entries(samples)) figures[`sandbox_cli_${name}`] = figure("ms", values);
  return { figures };
}

function ratio(figures: Figures, a: string, b: string): string {
  const x = summarize(figures[`sandbox_cli_${a}`]?.samples ?? []).p50;
  const y = summarize(figures[`sandbox_cli_${b}`]?.samples ?? []).p50;
  return `${(x / y).toFixed(2)} x`;
}

if (import.meta.main) {
  const { figures, skipped } = await benchSandboxCli({ smoke });
  if (skipped) {
    log(`sandbox_cli skipped: ${skipped}`);
  } else if (asJson) {
    console.log(JSON.stringify(figures));
  } else {
    const rows = Object.entries(figures).map(([name, f]) => {
      const s = summarize(f.samples);
      return `${name.replace("sandbox_cli_", "").padEnd(24)} p50 ${s.p50.toFixed(1).padStart(7)} ms   min ${s.min.toFixed(1).padStart(7)}   max ${s.max.toFixed(1).padStart(7)}   n ${s.n}`;
    });
    console.log(rows.join("\n"));
    console.log(
      [
        "",
        `warm call, sandbox / local:                  ${ratio(figures, "warm_call_sandbox", "warm_call_local")}`,
        `new session (spare ready), sandbox / local:  ${ratio(figures, "new_session_sandbox", "new_session_local")}   (target <= 1.2 x)`,
        `new session local / its warm call:           ${ratio(figures, "new_session_local", "warm_call_local")}`,
        `cold ephemeral run, sandbox / local:         ${ratio(figures, "cold_run_sandbox", "cold_run_local")}   (no spare: bwrap's own set-up is paid)`,
        `cold sandbox - cold local vs bwrap /bin/true: ${
          (summarize(figures.sandbox_cli_cold_run_sandbox!.samples).p50 - summarize(figures.sandbox_cli_cold_run_local!.samples).p50).toFixed(1)
        } ms vs ${summarize(figures.sandbox_cli_floor_bwrap_true!.samples).p50.toFixed(1)} ms`,
      ].join("\n"),
    );
  }
}
