// The 100 MB output cell through the CLI, beside its floor in alternating rounds: `awrepl run -f
// cell.py --max-output 4096` (ephemeral: the worker is this call's own) and `awrepl -s big run -f
// cell.py --max-output 4096` (a named session: the supervisor forwards the live output), each round
// followed by the same cell in a bare, buffered Python whose stdout a Bun process drains (floors.ts
// cellThroughput). The ratio to the floor is the figure (issue 28's target: ≥ 0.8); the CLI's output
// is checked to be the bounded head and tail, not the 100 MB. AWREPL_BENCH_BEFORE=old/awrepl adds an
// older build's two calls to the same rounds (its supervisor in a state directory of its own).
//
//   bun scripts/bench/big_output.ts [--smoke]      prints its figures as JSON and a short table
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { cellThroughput } from "./floors.ts";
import { AWREPL_BIN, type BenchOptions, bigOutputCell, figure, type Figures, log, summarize, tempHome, timeSpawn } from "./lib.ts";

export async function benchBigOutput(options: BenchOptions = {}): Promise<Figures> {
  const bytes = options.smoke ? 1_000_000 : 100_000_000;
  const rounds = options.smoke ? 1 : 5;
  const { home, remove } = tempHome("awrepl-bench-output-");
  const cell = join(home, "cell.py");
  writeFileSync(cell, bigOutputCell(bytes));
  const builds: [string, string][] = [["", AWREPL_BIN]];
  if (process.env.AWREPL_BENCH_BEFORE) builds.push([" (before)", process.env.AWREPL_BENCH_BEFORE]);
  const calls: Record<string, { argv: string[]; env: NodeJS.ProcessEnv }> = {};
  const speeds: Record<string, number[]> = { floor: [] };
  for (const [suffix, bin] of builds) {
    const env = { ...process.env, AWREPL_HOME: join(home, `state${suffix ? "-before" : ""}`) };
    calls[`ephemeral${suffix}`] = { argv: [bin, "run", "-f", cell, "--max-output", "4096"], env };
    calls[`named${suffix}`] = { argv: [bin, "-s", "big", "run", "-f", cell, "--max-output", "4096"], env };
  }
  for (const kind of Object.keys(calls)) speeds[kind] = [];
  try {
    for (const { argv, env } of Object.values(calls)) if (argv.includes("-s")) timeSpawn([argv[0]!, "-s", "big", "run", "1"], { env, timeoutMs: 60_000 }); // the supervisor and session up
    for (let i = 0; i < rounds; i++) {
      for (const [kind, { argv, env }] of Object.entries(calls)) {
        log(`big output: ${kind} \`awrepl run\` of a ${bytes / 1e6} MB cell, then the bare-Python floor`);
        const run = timeSpawn(argv, { env, timeoutMs: 600_000 });
        // Bounded head + tail on the terminal, never the whole output.
        if (run.stdout.length > 64 * 1024) throw new Error(`${kind}: the CLI printed ${run.stdout.length} bytes for --max-output 4096`);
        speeds[kind]!.push(bytes / 1e6 / (run.ms / 1000));
        speeds.floor!.push(...cellThroughput(bytes, true, 1));
      }
    }
  } finally {
    for (const { argv, env } of Object.values(calls)) if (argv.includes("-s")) timeSpawn([argv[0]!, "daemon", "stop"], { env, timeoutMs: 60_000, allowFailure: true });
    remove();
  }
  const floor = summarize(speeds.floor!).p50;
  const figures: Figures = {
    big_output_floor_mb_per_s: figure("MB/s", speeds.floor!, `the ${bytes / 1e6} MB cell in a bare, buffered Python, stdout drained by Bun; after each CLI call`),
  };
  for (const kind of Object.keys(calls)) {
    const p50 = summarize(speeds[kind]!).p50;
    const name = `big_output_cli_${kind.replace(" (before)", "_before")}_mb_per_s`;
    figures[name] = figure(
      "MB/s",
      speeds[kind]!,
      `\`awrepl ${kind.startsWith("named") ? "-s big " : ""}run -f cell.py --max-output 4096\`${kind.endsWith("(before)") ? " of the before build" : ""}: ${
        (p50 / floor).toFixed(2)
      } × the floor (p50s)`,
    );
  }
  return figures;
}

if (import.meta.main) {
  const figures = await benchBigOutput({ smoke: process.argv.includes("--smoke") });
  for (const [name, f] of Object.entries(figures)) {
    const s = summarize(f.samples);
    log(`${name.padEnd(36)} p50 ${s.p50.toFixed(1)} ${f.unit}   min ${s.min.toFixed(1)}   max ${s.max.toFixed(1)}   (n=${s.n})  ${f.note ?? ""}`);
  }
  console.log(JSON.stringify(figures));
}
