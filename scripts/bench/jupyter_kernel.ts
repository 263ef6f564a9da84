// The awrepl Jupyter kernel beside a stock ipykernel (issue 27, "Performance"): scripts/bench/jupyter_kernel.py
// run under Debian's python3 (where ipykernel is), its figures printed as a table with the target.
//
//   bun scripts/bench/jupyter_kernel.ts [--smoke] [--json]     (--json: figures as one JSON line last)
import { existsSync } from "node:fs";
import { join } from "node:path";
import { AWREPL_BIN, type Figures, log, PYTHON, REPO, summarize, timeSpawn } from "./lib.ts";

type Report = { available: boolean; reason?: string; figures?: Figures; versions?: Record<string, string> };

/** The figures, or why there are none (no Debian python3, no ipykernel, no executable). */
export function jupyterKernelFigures(options: { smoke?: boolean } = {}): { figures: Figures; skipped?: string } {
  if (!existsSync(PYTHON)) return { figures: {}, skipped: `${PYTHON} does not exist` };
  log("jupyter_kernel: running scripts/bench/jupyter_kernel.py");
  const run = timeSpawn([PYTHON, join(REPO, "scripts/bench/jupyter_kernel.py"), ...(options.smoke ? ["--smoke"] : [])], {
    env: { ...process.env, AWREPL_BIN },
    cwd: REPO,
    timeoutMs: options.smoke ? 180_000 : 1_800_000,
    allowFailure: true,
  });
  process.stderr.write(run.stderr);
  if (run.exitCode !== 0) return { figures: {}, skipped: `jupyter_kernel.py exited with ${run.exitCode}` };
  const report = JSON.parse(run.stdout.trim().split("\n").pop() ?? "{}") as Report;
  if (!report.available) return { figures: {}, skipped: report.reason ?? "Jupyter is not available" };
  return { figures: report.figures ?? {} };
}

/** p50 and p90 of each kernel, the ratio, and the target (the awrepl kernel ≤ ipykernel). */
export function renderJupyterKernelTable(f: Figures): string {
  const stat = (name: string, q: number) => {
    const sorted = [...(f[name]?.samples ?? [])].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  };
  const lines = ['| execute("1+1") via jupyter_client | p50 ms | p90 ms | n |', "|---|---|---|---|"];
  for (const [label, name] of [["awrepl kernel", "kernel_round_trip"], ["stock ipykernel", "ipykernel_round_trip"]] as const) {
    lines.push(`| ${label} | ${stat(name, 0.5).toFixed(3)} | ${stat(name, 0.9).toFixed(3)} | ${summarize(f[name]?.samples ?? []).n} |`);
  }
  const ratio = stat("kernel_round_trip", 0.5) / stat("ipykernel_round_trip", 0.5);
  lines.push("", `awrepl kernel ÷ ipykernel, p50: ${ratio.toFixed(2)} × (target ≤ 1: ${ratio <= 1 ? "met" : "NOT met"})`);
  return lines.join("\n");
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const { figures, skipped } = jupyterKernelFigures({ smoke: args.includes("--smoke") });
  console.log(skipped ? `skipped: ${skipped}` : renderJupyterKernelTable(figures));
  if (args.includes("--json")) console.log(JSON.stringify(figures));
}
