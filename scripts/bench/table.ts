// The tables all.ts prints: one row per DESIGN.md target (awrepl, Jupyter, ratios, met or not), then
// every raw figure with min/p50/p99/max so nothing measured is hidden.
import { type Figure, type Figures, type Summary, summarize } from "./lib.ts";

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
    target: "≤ 0.5 × python3 -c pass",
    met: (_v, r) => r <= 0.5,
  },
  {
    label: "warm shell call: CPU time of the client process",
    unit: "ms",
    stat: "p50",
    awrepl: ["warm_shell_call_cpu"],
    ratio: true,
    baseline: "baseline_python_c_pass_cpu",
    target: "≤ 0.5 × python3 -c pass (its CPU time)",
    met: (_v, r) => r <= 0.5,
  },
  { label: 'library execute("1+1") p50', unit: "us", stat: "p50", awrepl: ["library_round_trip"], jupyter: "execute_round_trip", floor: "floor_pipe_ping_pong", target: "≤ 100 µs", met: (v) => v <= 100 },
  { label: 'library execute("1+1") p99', unit: "us", stat: "p99", awrepl: ["library_round_trip"], jupyter: "execute_round_trip", floor: "floor_pipe_ping_pong", target: "≤ 1 ms", met: (v) => v <= 1000 },
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
    floor: "floor_spawn_python_S",
    ratio: true,
    baseline: "shell_baseline_python_c_pass",
    target: "≤ 1.5 × python3 -c pass",
    met: (_v, r) => r <= 1.5,
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
  { label: "cell printing 100 MB, whole CLI call", unit: "MB/s", stat: "p50", awrepl: ["cli_big_output_mb_per_s"], floor: "floor_cell_to_pipe", target: "≥ 200 MB/s", met: (v) => v >= 200 },
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
  { label: "interrupt `while True: pass`", unit: "ms", stat: "p50", awrepl: ["library_interrupt_busy_loop"], jupyter: "interrupt_busy_loop", floor: "floor_sigint_busy_loop", target: "≤ 10 ms", met: (v) => v <= 10 },
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
  { label: "ssh: far side gone after kill() in a C loop", unit: "ms", stat: "p50", awrepl: ["workers_kill_ssh_far_gone_ms"], floor: "workers_kill_local_gone_ms", target: "≤ 5 s (issue 11)", met: (v) => v <= 5000 },
  { label: "ssh: far side gone after close()", unit: "ms", stat: "p50", awrepl: ["workers_close_ssh_far_gone_ms"], floor: "workers_kill_local_gone_ms", target: "≤ 5 s", met: (v) => v <= 5000 },
  { label: "ssh partition: far side ends itself", unit: "ms", stat: "p50", awrepl: ["workers_partition_far_gone_ms"], floor: "workers_heartbeat_timeout_ms", target: "within a few s of the heartbeat timeout", met: (v) => v <= 10_000 },
  { label: "ssh partition: host declares the worker lost", unit: "ms", stat: "p50", awrepl: ["workers_partition_host_declares_lost_ms"], floor: "workers_heartbeat_timeout_ms", target: "within a few s of the heartbeat timeout", met: (v) => v <= 10_000 },
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
