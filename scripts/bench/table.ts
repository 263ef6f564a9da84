// The tables all.ts prints: one row per target (docs/architecture.md, "Benchmarks") (awrepl, Jupyter, ratios, met or not), then
// every raw figure with min/p50/p99/max so nothing measured is hidden.
import { type Figure, type Figures, summarize, type Summary } from "./lib.ts";

type Stat = "p50" | "p99";

export type Row = {
  label: string;
  /** Unit the row is shown in; figures in another time unit are converted. */
  unit: "ms" | "us" | "MB/s" | "MiB" | "calls/s";
  stat: Stat;
  /** Candidate awrepl figure names, first present wins (other scripts may name theirs differently). */
  awrepl: string[];
  jupyter?: string;
  /** Show value ÷ baseline (`python3 -c pass` median from the same run). */
  ratio?: boolean;
  /** A baseline figure measured alongside this one (interleaved), preferred over the run's global one. */
  baseline?: string;
  /** The physical floor (floors.ts) this figure cannot beat: the same work with no awrepl code. */
  floor?: string;
  target: string;
  /** Whether the awrepl value meets the target; ratio is value ÷ baseline. */
  met?: (value: number, ratio: number) => boolean;
};

export const SUMMARY_ROWS: Row[] = [
  {
    label: 'warm `awrepl -s s run "1+1"`',
    unit: "ms",
    stat: "p50",
    awrepl: ["warm_shell_call", "shell_call_warm", "shell_call"],
    jupyter: "shell_call",
    ratio: true,
    baseline: "shell_baseline_python_c_pass",
    floor: "floor_bun_empty_binary",
    target: "≤ floor + 4 ms: the floor table",
  },
  {
    label: "warm shell call: CPU time of the client process",
    unit: "ms",
    stat: "p50",
    awrepl: ["warm_shell_call_cpu"],
    ratio: true,
    baseline: "baseline_python_c_pass_cpu",
    target: "(CPU time ÷ python3 -c pass's)",
  },
  {
    label: 'library execute("1+1") p50',
    unit: "us",
    stat: "p50",
    awrepl: ["library_round_trip"],
    jupyter: "execute_round_trip",
    floor: "rt_echo_us",
    target: "≤ 100 µs (and 1.5 × echo: floor table)",
    met: (v) => v <= 100,
  },
  { label: 'library execute("1+1") p99', unit: "us", stat: "p99", awrepl: ["library_round_trip"], jupyter: "execute_round_trip", floor: "rt_echo_us", target: "≤ 500 µs", met: (v) => v <= 500 },
  { label: 'attach() execute("1+1") p50', unit: "us", stat: "p50", awrepl: ["attach_round_trip"], target: "(no target)" },
  {
    label: "new session to first result (library)",
    unit: "ms",
    stat: "p50",
    awrepl: ["library_new_session_to_result"],
    jupyter: "kernel_start_to_result",
    floor: "floor_spawn_python_S",
    ratio: true,
    baseline: "library_baseline_python_c_pass",
    target: "≤ 1.5 × python3 -c pass",
    met: (_v, r) => r <= 1.5,
  },
  {
    label: "new session to first result (library, spare ready)",
    unit: "ms",
    stat: "p50",
    awrepl: ["library_new_session_with_spare"],
    ratio: true,
    baseline: "library_baseline_python_c_pass",
    target: "≤ 1.5 × python3 -c pass",
    met: (_v, r) => r <= 1.5,
  },
  {
    label: "new session to first result (shell, warm supervisor)",
    unit: "ms",
    stat: "p50",
    awrepl: ["new_session_shell_call", "shell_new_session"],
    floor: "new_session_warm_beside",
    ratio: true,
    baseline: "shell_baseline_python_c_pass",
    target: "≤ the warm call + 5 ms: the floor table",
  },
  {
    label: "cell printing 100 MB, to an attach() client",
    unit: "MB/s",
    stat: "p50",
    awrepl: ["attach_big_output_mb_per_s"],
    jupyter: "big_output_mb_per_s",
    floor: "floor_cell_to_pipe",
    target: "≥ 200 MB/s",
    met: (v) => v >= 200,
  },
  {
    label: "cell printing 100 MB, whole CLI call (--max-output 4096)",
    unit: "MB/s",
    stat: "p50",
    awrepl: ["cli_big_output_mb_per_s"],
    floor: "cli_big_output_floor_mb_per_s",
    target: "≥ 0.8 × floor: the floor table",
  },
  {
    label: "100 MB cell: peak RSS of the client",
    unit: "MiB",
    stat: "p50",
    awrepl: ["cli_big_output_client_peak_rss_mib"],
    jupyter: "big_output_client_peak_rss_mib",
    target: "bounded by the output limit",
  },
  {
    label: "100 MB cell: supervisor peak RSS growth, attach()",
    unit: "MiB",
    stat: "p50",
    awrepl: ["attach_big_output_supervisor_growth_mib"],
    jupyter: "big_output_kernel_peak_rss_mib",
    target: "bounded: ≤ 64 MiB (Jupyter: kernel peak)",
    met: (v) => v <= 64,
  },
  {
    label: "100 MB cell: supervisor peak RSS growth, CLI",
    unit: "MiB",
    stat: "p50",
    awrepl: ["cli_big_output_supervisor_growth_mib"],
    target: "bounded: ≤ 64 MiB",
    met: (v) => v <= 64,
  },
  {
    label: "600 MB CLI cell after a 300 MB one: extra supervisor peak",
    unit: "MiB",
    stat: "p50",
    awrepl: ["cli_600mb_supervisor_extra_peak_mib"],
    target: "≤ 16 MiB (does not scale with output)",
    met: (v) => v <= 16,
  },
  {
    label: "interrupt `while True: pass`",
    unit: "ms",
    stat: "p50",
    awrepl: ["library_interrupt_busy_loop"],
    jupyter: "interrupt_busy_loop",
    floor: "floor_sigint_busy_loop",
    target: "≤ 10 ms",
    met: (v) => v <= 10,
  },
  { label: "interrupt a time.sleep loop", unit: "ms", stat: "p50", awrepl: ["library_interrupt_sleep_loop"], jupyter: "interrupt_sleep_loop", target: "≤ 10 ms", met: (v) => v <= 10 },
  { label: "interrupt `await asyncio.sleep(1e9)`", unit: "ms", stat: "p50", awrepl: ["library_interrupt_asyncio_sleep"], jupyter: "interrupt_asyncio_sleep", target: "≤ 10 ms", met: (v) => v <= 10 },
  { label: "idle worker RSS", unit: "MiB", stat: "p50", awrepl: ["worker_idle_rss_mib"], jupyter: "kernel_idle_rss_mib", target: "≤ 15 MiB", met: (v) => v <= 15 },
  { label: "idle supervisor RSS (one session)", unit: "MiB", stat: "p50", awrepl: ["supervisor_idle_rss_mib"], target: "≤ 64 MiB", met: (v) => v <= 64 },
  { label: "supervisor RSS per extra idle session", unit: "MiB", stat: "p50", awrepl: ["supervisor_rss_per_extra_session_mib"], target: "≤ 1 MiB", met: (v) => v <= 1 },
  {
    label: 'MCP `tools/call` of `run` "1+1" (÷ the warm CLI call)',
    unit: "ms",
    stat: "p50",
    awrepl: ["mcp_tools_call"],
    ratio: true,
    baseline: "mcp_warm_shell_call",
    floor: "mcp_ping",
    target: "≤ 1 × the warm CLI call",
    met: (_v, r) => r <= 1,
  },
  { label: "`awrepl mcp` start to its initialize reply", unit: "ms", stat: "p50", awrepl: ["mcp_cold_initialize"], floor: "mcp_floor_version", target: "(no target)" },
  {
    label: "sandboxed worker start to first result (cold)",
    unit: "ms",
    stat: "p50",
    awrepl: ["sandbox_cold_start_ms"],
    floor: "sandbox_bwrap_true_ms",
    ratio: true,
    baseline: "sandbox_local_cold_start_ms",
    target: "(bwrap's own start is the floor; ÷ the local start)",
  },
  {
    label: "new sandboxed session to first result (spare ready)",
    unit: "ms",
    stat: "p50",
    awrepl: ["sandbox_session_with_spare_ms"],
    ratio: true,
    baseline: "sandbox_local_session_with_spare_ms",
    target: "≤ 1.2 × the same without sandbox",
    met: (_v, r) => r <= 1.2,
  },
  { label: "100 MB snapshot streamed to the host", unit: "MB/s", stat: "p50", awrepl: ["snapshot_stream_mb_per_s"], floor: "snapshot_path_mb_per_s", target: "(floor: path mode)" },
  { label: "100 MB restore streamed from the host", unit: "MB/s", stat: "p50", awrepl: ["restore_stream_mb_per_s"], floor: "restore_path_mb_per_s", target: "(floor: path mode)" },
  { label: "snapshot streaming: host RSS growth", unit: "MiB", stat: "p50", awrepl: ["snapshot_stream_host_rss_growth_mib"], target: "bounded (not the payload's size)", met: (v) => v <= 64 },
  {
    label: "ssh: far side gone after kill() in a C loop",
    unit: "ms",
    stat: "p50",
    awrepl: ["workers_kill_ssh_far_gone_ms"],
    floor: "workers_kill_local_gone_ms",
    target: "≤ 5 s (issue 11)",
    met: (v) => v <= 5000,
  },
  { label: "ssh: far side gone after close()", unit: "ms", stat: "p50", awrepl: ["workers_close_ssh_far_gone_ms"], floor: "workers_kill_local_gone_ms", target: "≤ 5 s", met: (v) => v <= 5000 },
  {
    label: "ssh partition: far side ends itself",
    unit: "ms",
    stat: "p50",
    awrepl: ["workers_partition_far_gone_ms"],
    floor: "workers_heartbeat_timeout_ms",
    target: "within a few s of the heartbeat timeout",
    met: (v) => v <= 10_000,
  },
  {
    label: "ssh partition: host declares the worker lost",
    unit: "ms",
    stat: "p50",
    awrepl: ["workers_partition_host_declares_lost_ms"],
    floor: "workers_heartbeat_timeout_ms",
    target: "within a few s of the heartbeat timeout",
    met: (v) => v <= 10_000,
  },
  { label: "64 parallel clients over 8 sessions", unit: "calls/s", stat: "p50", awrepl: ["parallel_clients_calls_per_s", "parallel_64_calls_per_s"], target: "(no target)" },
];

const TIME_SCALE: Record<string, number> = { s: 1e6, ms: 1e3, us: 1, µs: 1 };

/** A figure's samples in the row's unit (time units convert; other units must match). */
function inUnit(fig: Figure, unit: Row["unit"]): number[] | null {
  if (fig.unit === unit) return fig.samples;
  const from = TIME_SCALE[fig.unit];
  const to = TIME_SCALE[unit];
  if (from === undefined || to === undefined) return null;
  return fig.samples.map((x) => (x * from) / to);
}

function fmt(x: number): string {
  if (!Number.isFinite(x)) return "–";
  const abs = Math.abs(x);
  if (abs >= 100) return x.toFixed(0);
  if (abs >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

function cell(samples: number[] | null, stat: Stat, note?: string): { text: string; value: number } {
  // A figure with no samples but a "no reply" note is an interrupt that never landed.
  if (!samples || samples.length === 0) return { text: note?.includes("no reply") ? "never" : "–", value: Number.NaN };
  const s = summarize(samples);
  const value = s[stat];
  if (stat === "p99" || s.n === 1) return { text: fmt(value), value };
  return { text: `${fmt(value)} (${fmt(s.min)}–${fmt(s.max)})`, value };
}

function markdown(header: string[], body: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [line(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...body.map(line)].join("\n");
}

export function renderSummaryTable(rows: Row[], awrepl: Figures, jupyter: Figures): string {
  const globalBase = summarize(awrepl.baseline_python_c_pass?.samples ?? []).p50;
  const jupyterBase = summarize(jupyter.baseline_python_c_pass?.samples ?? []).p50;
  const body = rows.map((row) => {
    const key = row.awrepl.find((k) => awrepl[k]);
    const ours = cell(key ? inUnit(awrepl[key]!, row.unit) : null, row.stat);
    const theirFigure = row.jupyter ? jupyter[row.jupyter] : undefined;
    const theirs = cell(theirFigure ? inUnit(theirFigure, row.unit) : null, row.stat, theirFigure?.note);
    const local = row.baseline ? awrepl[row.baseline] : undefined;
    const base = local && local.samples.length ? summarize(local.samples).p50 : globalBase;
    const ratio = row.ratio ? ours.value / base : Number.NaN;
    const theirRatio = row.ratio ? theirs.value / jupyterBase : Number.NaN;
    const floor = cell(row.floor && awrepl[row.floor] ? inUnit(awrepl[row.floor]!, row.unit) : null, row.stat).text;
    const met = !row.met || Number.isNaN(ours.value) ? "" : row.met(ours.value, ratio) ? "yes" : "NO";
    return [
      row.label,
      row.unit,
      ours.text,
      row.ratio ? `${fmt(ratio)} ×` : "",
      floor === "–" ? "" : floor,
      theirs.text,
      row.ratio && !Number.isNaN(theirRatio) ? `${fmt(theirRatio)} ×` : "",
      row.target,
      met,
    ];
  });
  return markdown(["figure", "unit", "awrepl median (min–max)", "÷ baseline", "floor", "Jupyter", "÷ baseline", "target", "met"], body);
}

export function renderRawTable(figures: Figures): string {
  const body = Object.entries(figures).map(([name, fig]) => {
    const s: Summary = summarize(fig.samples);
    return [name, fig.unit, String(s.n), fmt(s.min), fmt(s.p50), fmt(s.p99), fmt(s.max), fig.note ?? ""];
  });
  return markdown(["raw figure", "unit", "n", "min", "p50", "p99", "max", "note"], body);
}

// ---------------------------------------------------------------------------------------------
// Issue 14's table: each figure against its floor measured in the same run (startup.ts, round_trip.ts,
// shell_call.ts, library.ts), as a difference (start-up) or a ratio (round trip, throughput).
// ---------------------------------------------------------------------------------------------

export type FloorRow = {
  label: string;
  unit: "ms" | "us" | "MB/s" | "MiB";
  /** The floor's figure and awrepl's (medians, or p99 with `stat`). */
  floor?: string;
  /** awrepl's figure; a list: the first present (a figure named after the machine's mechanism, say). */
  awrepl: string | string[];
  stat?: Stat;
  /** A per-round (or per-pair) difference or ratio figure; its median and range are shown. */
  vs?: { figure: string; kind: "diff" | "ratio" };
  /** Start-up rows: per-round CPU-time and page-fault differences to the floor. */
  cpu?: string;
  faults?: string;
  target: string;
  /**
   * Judged on the median of `vs` (the ratio for MB/s rows; else awrepl's value), with awrepl's own
   * value beside it; a string says which part of a two-part target failed.
   */
  met?: (value: number, awrepl: number, floor: number) => boolean | string;
  /** Judged on the median of `cpu`, shown beside (the wall time of a loaded machine carries the load). */
  metCpu?: (value: number) => boolean;
};

const startupRow = (label: string, name: string, limit: number | null): FloorRow => ({
  label,
  unit: "ms",
  floor: "startup_floor_wall",
  awrepl: `startup_${name}_wall`,
  vs: { figure: `startup_${name}_delta_wall`, kind: "diff" },
  cpu: `startup_${name}_delta_cpu`,
  faults: `startup_${name}_delta_faults`,
  target: limit === null ? "(reference)" : `≤ floor + ${limit} ms`,
  met: limit === null ? undefined : (v) => v <= limit,
  metCpu: limit === null ? undefined : (v) => v <= limit,
});

/** placement.ts: a server's p50 against the echo's with both on the same vCPU; limit null: a reference row. */
const placementRow = (label: string, server: string, placement: "same" | "other", limit: number | null): FloorRow => ({
  label,
  unit: "us",
  floor: `placement_echo_${placement}_us`,
  awrepl: `placement_${server}_${placement}_us`,
  vs: { figure: `placement_${server}_${placement}_to_echo_ratio`, kind: "ratio" },
  target: limit === null ? "(reference: the floor of any runtime)" : `≤ ${limit} × (the issue's, for the library)`,
  met: limit === null ? undefined : (ratio) => ratio <= limit,
});

export const FLOOR_ROWS: FloorRow[] = [
  startupRow('warm `awrepl -s s run "1+1"`', "run", 4),
  startupRow("warm `awrepl -s s vars`", "vars", 4),
  startupRow("`awrepl sessions`", "sessions", 4),
  startupRow("`awrepl --version`", "version", 2),
  startupRow("`awrepl --help`", "help", 2),
  startupRow("the issue's 20-line client (Bun.connect + Bun.write)", "client20", null),
  startupRow("`python3 -c pass`", "python", null),
  {
    label: 'library `execute("1+1")` p50',
    unit: "us",
    floor: "rt_echo_us",
    awrepl: "rt_session_us",
    vs: { figure: "rt_session_to_echo_p50_ratio", kind: "ratio" },
    target: "≤ 100 µs and ≤ 1.5 × echo (per block: a draw of two placements, see the rows below)",
    met: (ratio, p50) => (p50 <= 100 && ratio <= 1.5) || `≤ 100 µs: ${p50 <= 100 ? "yes" : "NO"}, ≤ 1.5 ×: ${ratio <= 1.5 ? "yes" : "NO"}`,
  },
  { label: 'library `execute("1+1")` p99', unit: "us", floor: "rt_echo_us", awrepl: "rt_session_us", stat: "p99", target: "≤ 500 µs", met: (v) => v <= 500 },
  {
    label: 'a minimal Python REPL server\'s `execute("1+1")` p50 (JSON, compile, eval, repr: the floor of any runtime)',
    unit: "us",
    floor: "rt_echo_us",
    awrepl: "rt_minimal_us",
    vs: { figure: "rt_minimal_to_echo_p50_ratio", kind: "ratio" },
    target: "(reference)",
  },
  placementRow("`runtime.py`'s p50 ÷ the echo's, both on Bun's vCPU (placement.ts: placement held equal)", "runtime", "same", 1.5),
  placementRow("the same, both on the other vCPU", "runtime", "other", 1.5),
  placementRow("a minimal Python REPL server's p50 ÷ the echo's, both on Bun's vCPU", "minimal", "same", null),
  {
    label: 'library `execute("1+1")` p50 against that minimal server',
    unit: "us",
    floor: "rt_minimal_us",
    awrepl: "rt_session_us",
    vs: { figure: "rt_session_to_minimal_p50_ratio", kind: "ratio" },
    target: "(reference)",
  },
  {
    label: "new named session → first result (spare ready)",
    unit: "ms",
    floor: "new_session_warm_beside",
    awrepl: "new_session_shell_call",
    vs: { figure: "new_session_minus_warm", kind: "diff" },
    target: "≤ the warm call + 5 ms",
    met: (v) => v <= 5,
  },
  {
    label: "100 MB cell through the CLI, --max-output 4096 (floor: a buffered Python)",
    unit: "MB/s",
    floor: "cli_big_output_floor_mb_per_s",
    awrepl: "cli_big_output_mb_per_s",
    target: "≥ 0.8 × the floor",
    met: (ratio) => ratio >= 0.8,
  },
  {
    label: "the same (floor: Python with this environment's PYTHONUNBUFFERED)",
    unit: "MB/s",
    floor: "cli_big_output_env_floor_mb_per_s",
    awrepl: "cli_big_output_mb_per_s",
    target: "≥ 0.8 × the floor",
    met: (ratio) => ratio >= 0.8,
  },
  // limits.ts (issue 24): a limited worker's start beside the same start without limits, and the
  // allow list's proxy beside a direct request, each measured in the same rounds.
  {
    label: "worker start with memory, procs (cgroup) and file size limits",
    unit: "ms",
    floor: "worker start, no limits",
    awrepl: ["worker start, limits (cgroup v2: memory, procs; file size)", "worker start, limits (cgroup v1: memory, procs; file size)"],
    target: "≤ floor + 5 ms",
    met: (_v, ours, floor) => ours - floor <= 5,
  },
  {
    label: "worker start with rlimits only (memory, file size)",
    unit: "ms",
    floor: "worker start, no limits",
    awrepl: "worker start, rlimits (memory, file size)",
    target: "≤ floor + 5 ms",
    met: (_v, ours, floor) => ours - floor <= 5,
  },
  {
    label: "HTTP request to 127.0.0.1 through the allow list's proxy (host process)",
    unit: "ms",
    floor: "request direct (this process)",
    awrepl: "request through the proxy (this process)",
    target: "≤ floor + 1 ms",
    met: (_v, ours, floor) => ours - floor <= 1,
  },
  {
    label: "the same from a sandboxed cell (urllib, forwarder and proxy)",
    unit: "ms",
    floor: "urllib request direct (cell, no sandbox)",
    awrepl: "urllib request via forwarder + proxy (sandboxed cell)",
    target: "≤ floor + 1 ms",
    met: (_v, ours, floor) => ours - floor <= 1,
  },
  { label: "idle worker RSS", unit: "MiB", awrepl: "worker_idle_rss_mib", target: "≤ 11.7 MiB (no worse than before)", met: (v) => v <= 11.7 },
  { label: "idle supervisor RSS (one session)", unit: "MiB", awrepl: "supervisor_idle_rss_mib", target: "≤ 50 MiB (no worse than before)", met: (v) => v <= 50 },
  { label: "the same, anonymous memory only (RssAnon)", unit: "MiB", awrepl: "supervisor_idle_rss_anon_mib", target: "(VmRSS − the executable's pages)" },
];

function median(fig: Figure | undefined, stat: Stat = "p50"): number {
  return fig && fig.samples.length ? summarize(fig.samples)[stat] : Number.NaN;
}

function spread(fig: Figure | undefined, unit: string, kind: "diff" | "ratio"): string {
  if (!fig || fig.samples.length === 0) return "–";
  const s = summarize(fig.samples);
  const f = (x: number) => (kind === "diff" ? `${x >= 0 ? "+" : ""}${fmt(x)}` : `${fmt(x)} ×`);
  const u = kind === "diff" ? ` ${unit === "us" ? "µs" : unit}` : "";
  return s.n === 1 ? `${f(s.p50)}${u}` : `${f(s.p50)}${u} (${f(s.min)} to ${f(s.max)})`;
}

export function renderFloorTable(rows: FloorRow[], figures: Figures): string {
  const body = rows.map((row) => {
    const stat = row.stat ?? "p50";
    const floor = row.floor ? median(figures[row.floor], stat) : Number.NaN;
    const name = typeof row.awrepl === "string" ? row.awrepl : (row.awrepl.find((k) => figures[k]) ?? "");
    const ours = median(figures[name], stat);
    let vs = "";
    let judged = ours;
    if (row.vs) {
      vs = spread(figures[row.vs.figure], row.unit, row.vs.kind);
      judged = median(figures[row.vs.figure]);
    } else if (row.floor && row.unit === "MB/s") {
      judged = ours / floor;
      vs = Number.isFinite(judged) ? `${fmt(judged)} ×` : "–";
    }
    const cpu = row.cpu ? spread(figures[row.cpu], "ms", "diff") : "";
    const faults = row.faults ? spread(figures[row.faults], "", "diff").replace(/ \(/, " (") : "";
    const verdict = (ok: ((v: number, a: number, f: number) => boolean | string) | undefined, v: number) => {
      if (!ok || Number.isNaN(v)) return "";
      const r = ok(v, ours, floor);
      return r === true ? "yes" : r === false ? "NO" : r;
    };
    let met = verdict(row.met, judged);
    if (row.metCpu && row.cpu) met = `${met} (CPU: ${verdict(row.metCpu, median(figures[row.cpu]))})`;
    return [row.label, row.unit, row.floor ? fmt(floor) : "", fmt(ours), vs, cpu, faults, row.target, met];
  });
  return markdown(["figure", "unit", "floor", "awrepl", "awrepl vs floor (rounds: min to max)", "CPU time vs floor", "page faults vs floor", "target", "met"], body);
}

/** With AWREPL_BENCH_BEFORE (startup.ts): an older binary's start-up beside this one's, from the same rounds. */
export function renderBeforeAfterTable(figures: Figures): string | null {
  const names = ["run", "vars", "sessions", "version", "help"].filter((n) => figures[`startup_before_${n}_delta_cpu`]);
  if (names.length === 0) return null;
  const cell = (name: string) => spread(figures[name], name.endsWith("faults") ? "" : "ms", "diff");
  const body = names.map((n) => [
    n,
    cell(`startup_before_${n}_delta_wall`),
    cell(`startup_${n}_delta_wall`),
    cell(`startup_before_${n}_delta_cpu`),
    cell(`startup_${n}_delta_cpu`),
    cell(`startup_before_${n}_delta_faults`),
    cell(`startup_${n}_delta_faults`),
  ]);
  return markdown(["command (vs the floor, same rounds)", "wall before", "wall now", "CPU before", "CPU now", "faults before", "faults now"], body);
}

/** placement.ts: each server's p50 (and Python CPU per call) by where its process runs; null without those figures. */
export function renderPlacementTable(figures: Figures): string | null {
  const servers: [string, string][] = [
    ["echo", "Python echo (the floor)"],
    ["minimal", "a minimal Python REPL server"],
    ["runtime", "runtime.py"],
    ["runtime_before", "AWREPL_BENCH_BEFORE_RUNTIME"],
  ];
  const body = servers
    .filter(([key]) => figures[`placement_${key}_same_us`])
    .map(([key, label]) => [
      label,
      ...["same", "other", "free"].map((p) => `${fmt(median(figures[`placement_${key}_${p}_us`]))} (${fmt(median(figures[`placement_${key}_${p}_py_cpu_us`]))})`),
    ]);
  if (body.length === 0) return null;
  return markdown(['execute("1+1") p50 µs (Python CPU µs/call), fresh processes', "server on Bun's vCPU", "on the other vCPU", "placed by the kernel"], body);
}

/** Where the library's round trip goes: each layer's p50, p99 and CPU per call on both sides (round_trip.ts). */
export function renderRoundTripTable(figures: Figures): string {
  const layers: [string, string][] = [
    ["echo", "Python echo over pipes (the floor)"],
    ["minimal", "a minimal Python REPL server (JSON, compile, eval, repr)"],
    ["runtime", "runtime.py over raw pipes"],
    ...(figures.rt_runtime_before_us ? [["runtime_before", "(AWREPL_BENCH_BEFORE_RUNTIME over raw pipes, not a layer)"] as [string, string]] : []),
    ["worker", "+ lib/worker (Worker.request)"],
    ["session", "+ lib/session (ReplSession.execute)"],
  ];
  let previous = Number.NaN;
  const body = layers.map(([key, label]) => {
    const lat = figures[`rt_${key}_us`];
    const p50 = median(lat);
    const step = Number.isNaN(previous) ? "" : `${p50 >= previous ? "+" : ""}${fmt(p50 - previous)}`;
    if (key !== "runtime_before") previous = p50; // its step is against the runtime row above it
    return [label, fmt(p50), step, fmt(median(lat, "p99")), fmt(median(figures[`rt_${key}_bun_cpu_us`])), fmt(median(figures[`rt_${key}_py_cpu_us`]))];
  });
  return markdown(['execute("1+1") round trip, layer by layer', "p50 µs", "p50 step µs", "p99 µs", "Bun CPU µs/call", "Python CPU µs/call"], body);
}
