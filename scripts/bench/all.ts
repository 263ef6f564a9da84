// `npm run bench`: every benchmark in one run, then the tables: issue 14's (every figure against its
// floor measured in the same run: start-up against an empty program built with scripts/build.ts's
// flags, the round trip against a pipe echo, ...), the round trip layer by layer, the targets (docs/architecture.md, "Benchmarks")
// with Jupyter beside, and every raw figure. The machine's CPU model and load are printed with it, and
// the load before and after each section (a load above the core count marks wall times to re-take;
// CPU times and page faults move far less with it).
//
//   bun scripts/bench/all.ts [--smoke] [--json FILE] [--skip-jupyter]
//
// --smoke runs every script with tiny counts (the test suite uses it); --json writes every raw sample.
// The machine is shared: read ratios, not absolute times, and rerun when the min and max disagree.
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cpus, loadavg, totalmem } from "node:os";
import { AWREPL_BIN, type Figure, type Figures, log, measureBaseline, PYTHON, REPO, summarize, timeSpawn } from "./lib.ts";
import { floorFigures } from "./floors.ts";
import { libraryFigures } from "./library.ts";
import { benchLimits } from "./limits.ts";
import { memoryFigures } from "./memory.ts";
import { benchPersistence } from "./persistence.ts";
import { startupFigures } from "./startup.ts";
import { FLOOR_ROWS, renderBeforeAfterTable, renderFloorTable, renderPlacementTable, renderRawTable, renderRoundTripTable, renderSummaryTable, SUMMARY_ROWS } from "./table.ts";
import { benchWorkers } from "./workers.ts";

/** One script's figures; `text` is a script's own table when it cannot report figures as JSON. */
type Section = { figures: Figures; skipped?: string; text?: string };

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const jsonIndex = args.indexOf("--json");
const jsonOut = jsonIndex >= 0 ? args[jsonIndex + 1] : undefined;
const BUN = process.execPath;

function ensureBinary(): void {
  if (existsSync(AWREPL_BIN) && smoke) return;
  log("building dist/awrepl");
  timeSpawn([BUN, join(REPO, "scripts/build.ts")], { cwd: REPO, timeoutMs: 300_000 });
}

/** jupyter.py's figures, or why there are none (no /usr/bin/python3, no ipykernel). */
function jupyterSection(): Section {
  if (args.includes("--skip-jupyter")) return { figures: {}, skipped: "--skip-jupyter given" };
  if (!existsSync(PYTHON)) return { figures: {}, skipped: `${PYTHON} does not exist` };
  log("jupyter: running scripts/bench/jupyter.py");
  const run = timeSpawn([PYTHON, join(REPO, "scripts/bench/jupyter.py"), ...(smoke ? ["--smoke"] : [])], {
    timeoutMs: smoke ? 120_000 : 1_800_000,
    allowFailure: true,
  });
  process.stderr.write(run.stderr);
  if (run.exitCode !== 0) return { figures: {}, skipped: `jupyter.py exited with ${run.exitCode}` };
  const report = JSON.parse(run.stdout) as { available: boolean; reason?: string; figures?: Figures; versions?: Record<string, string> };
  if (!report.available) return { figures: {}, skipped: report.reason ?? "Jupyter is not available" };
  return { figures: report.figures ?? {}, skipped: undefined };
}

/**
 * A bench script owned by another module (runtime.ts, shell_call.ts). It is run as a subprocess so its
 * state cannot leak into ours; with --json it prints its figures as one JSON object on its last stdout
 * line. A script that does not take --json yet is run again without it and its own text is shown.
 */
function externalSection(script: string): Section {
  const path = join(REPO, "scripts/bench", script);
  if (!existsSync(path)) return { figures: {}, skipped: `${script} does not exist yet` };
  log(`running ${script}`);
  const run = (extra: string[]) => timeSpawn([BUN, path, ...extra, ...(smoke ? ["--smoke"] : [])], { cwd: REPO, timeoutMs: smoke ? 120_000 : 1_800_000, allowFailure: true });
  const json = run(["--json"]);
  const last = json.stdout.trim().split("\n").pop() ?? "";
  if (json.exitCode === 0 && last.startsWith("{")) {
    process.stderr.write(json.stderr);
    return { figures: JSON.parse(last) as Figures };
  }
  log(`${script} --json gave no JSON line (exit ${json.exitCode}); running it without --json`);
  const text = run([]);
  process.stderr.write(text.stderr);
  if (text.exitCode !== 0) return { figures: {}, skipped: `${script} exited with ${text.exitCode}` };
  return { figures: {}, text: text.stdout.trimEnd() };
}

/** The 1-minute load average now. */
function load(): string {
  return (loadavg()[0] as number).toFixed(2);
}

/** Each section's load before and after, printed with the tables. */
const loads: string[] = [];

async function guarded(name: string, measure: () => Promise<Figures>): Promise<Section> {
  const before = load();
  try {
    return { figures: await measure() };
  } catch (err) {
    log(`${name} failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    return { figures: {}, skipped: `${name} failed: ${err instanceof Error ? err.message : String(err)}` };
  } finally {
    loads.push(`${name} ${before} → ${load()}`);
  }
}

/** A section run as a subprocess, with its load before and after. */
function external(name: string, run: () => Section = () => externalSection(name)): Section {
  const before = load();
  try {
    return run();
  } finally {
    loads.push(`${name} ${before} → ${load()}`);
  }
}

function machine(): string {
  const python = timeSpawn([PYTHON, "-c", "import sys; print(sys.version.split()[0])"]).stdout.trim();
  return [
    `${cpus().length} × ${cpus()[0]?.model ?? "unknown CPU"} (nproc ${cpus().length})`,
    `${(totalmem() / 2 ** 30).toFixed(0)} GiB`,
    `Python ${python} (${PYTHON})`,
    `Bun ${Bun.version}`,
    `load ${loadavg().map((x) => x.toFixed(2)).join(" ")}`,
  ].join(", ");
}

ensureBinary();
const baselineRuns = smoke ? 3 : 21;
log("baseline: /usr/bin/python3 -c pass");
const before = measureBaseline(baselineRuns);
log(`machine: ${machine()}`);
const sections: Record<string, Section> = {
  startup: await guarded("startup.ts", () => startupFigures({ smoke })),
  jupyter: external("jupyter.py", jupyterSection),
  library: await guarded("library.ts", () => libraryFigures({ smoke })),
  memory: await guarded("memory.ts", () => memoryFigures({ smoke })),
  floors: await guarded("floors.ts", () => floorFigures({ smoke })),
  persistence: await guarded("persistence.ts", () => benchPersistence({ smoke })),
  big_output: await guarded("big_output.ts", async () => (await import("./big_output.ts")).benchBigOutput({ smoke })),
  workers: await guarded("workers.ts", () => benchWorkers({ smoke })),
  limits: await guarded("limits.ts", () => benchLimits({ smoke })),
  runtime: external("runtime.ts"),
  shell: external("shell_call.ts"),
  mcp: external("mcp.ts"),
  python_client: external("python_client.ts"),
};
log("baseline again");
const after = measureBaseline(baselineRuns);
const baseline: Figure = { unit: "ms", samples: [...before.samples, ...after.samples], note: "before and after the run" };

const awrepl: Figures = { baseline_python_c_pass: baseline };
for (const [name, section] of Object.entries(sections)) {
  if (name === "jupyter") continue;
  Object.assign(awrepl, section.figures);
}
const jupyter = sections.jupyter!.figures;

console.log(`awrepl benchmarks${smoke ? " (smoke: tiny counts, figures not meaningful)" : ""}`);
console.log(`machine: ${machine()}`);
console.log(`baseline /usr/bin/python3 -c pass: median ${summarize(baseline.samples).p50.toFixed(1)} ms (n=${baseline.samples.length})`);
for (const [name, section] of Object.entries(sections)) {
  if (section.skipped) console.log(`skipped ${name}: ${section.skipped}`);
}
console.log(`load (1 min) before → after each section: ${loads.join("; ")}`);
console.log();
console.log("Each figure against its floor, from this run (start-up: medians of all rounds; vs floor: per round)");
console.log();
console.log(renderFloorTable(FLOOR_ROWS, awrepl));
console.log();
const beforeAfter = renderBeforeAfterTable(awrepl);
if (beforeAfter) {
  console.log(`Start-up before (${process.env.AWREPL_BENCH_BEFORE}) and now, interleaved in the same rounds`);
  console.log();
  console.log(beforeAfter);
  console.log();
}
console.log(renderRoundTripTable(awrepl));
console.log();
const placement = renderPlacementTable(awrepl);
if (placement) {
  console.log(placement);
  console.log();
}
console.log(renderSummaryTable(SUMMARY_ROWS, awrepl, jupyter));
console.log();
console.log(renderRawTable({ ...prefixed("awrepl", awrepl), ...prefixed("jupyter", jupyter) }));
for (const [name, section] of Object.entries(sections)) {
  if (section.text) console.log(`\n${name} (its own output):\n${section.text}`);
}

if (jsonOut) {
  writeFileSync(jsonOut, JSON.stringify({ machine: machine(), smoke, awrepl, jupyter, skipped: Object.fromEntries(Object.entries(sections).map(([k, v]) => [k, v.skipped ?? null])) }, null, 1));
  log(`raw samples written to ${jsonOut}`);
}

function prefixed(prefix: string, figures: Figures): Figures {
  return Object.fromEntries(Object.entries(figures).map(([k, v]) => [`${prefix}.${k}`, v]));
}
