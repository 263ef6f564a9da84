// Smoke test of the benchmarks: `all.ts --smoke` still runs end to end (tiny counts), prints its
// summary and raw tables with awrepl figures in them, reports Jupyter or why it was skipped, and
// leaves no supervisor or worker behind. No figure's size is asserted: timings belong to `npm run bench`.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { percentile, processesWithHome, REPO, summarize } from "./lib.ts";
import { renderRawTable, renderSummaryTable, SUMMARY_ROWS } from "./table.ts";
import { SUPERVISOR_PROTOCOL } from "../../lib/core/version.ts";

test("the 20-line floor client speaks the supervisor's protocol (another would wait for a result that never comes)", () => {
  const source = readFileSync(join(REPO, "scripts/bench/floor_client.ts"), "utf8");
  expect(/protocol: (\d+)/.exec(source)?.[1]).toBe(String(SUPERVISOR_PROTOCOL));
});

describe("statistics", () => {
  test("nearest-rank percentiles and min/median/max", () => {
    const samples = Array.from({ length: 100 }, (_, i) => 100 - i); // 100 … 1, unsorted
    const s = summarize(samples);
    expect([s.n, s.min, s.p50, s.p99, s.max]).toEqual([100, 1, 50, 99, 100]);
    expect(percentile([], 50)).toBeNaN();
    expect(summarize([7]).p99).toBe(7);
  });

  test("the summary table converts units, divides by the baseline and judges the target", () => {
    const awrepl = {
      baseline_python_c_pass: { unit: "ms", samples: [20, 20, 20] },
      library_round_trip: { unit: "us", samples: [50, 60, 70] },
      library_new_session_to_result: { unit: "ms", samples: [40, 40, 40] },
    };
    const jupyter = { baseline_python_c_pass: { unit: "ms", samples: [20] }, execute_round_trip: { unit: "ms", samples: [10] } };
    const lines = renderSummaryTable(SUMMARY_ROWS, awrepl, jupyter).split("\n");
    const p50 = lines.find((l) => l.includes('library execute("1+1") p50'))!;
    expect(p50).toContain("60.0 (50.0–70.0)"); // µs, median (min–max)
    expect(p50).toContain("10000"); // Jupyter's 10 ms shown in µs
    expect(p50).toMatch(/\| yes +\|$/);
    const start = lines.find((l) => l.includes("new session to first result (library)"))!;
    expect(start).toContain("2.00 ×"); // 40 ms ÷ 20 ms
    expect(start).toMatch(/\| NO +\|$/);
    expect(renderRawTable({ x: { unit: "ms", samples: [1, 2, 3], note: "n" } })).toContain("| x ");
  });
});

describe("all.ts --smoke", () => {
  const tmp = mkdtempSync(join(tmpdir(), "awrepl-bench-smoke-"));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  test(
    "runs every script, prints both tables, and leaves no process behind",
    () => {
      // Every AWREPL_HOME the run creates lives under tmp (TMPDIR), and the library's own workers
      // inherit AWREPL_HOME=tmp/outer, so a leftover process is found by its environment.
      const env = { ...process.env, TMPDIR: tmp, AWREPL_HOME: join(tmp, "outer") };
      const run = Bun.spawnSync([process.execPath, join(REPO, "scripts/bench/all.ts"), "--smoke"], {
        cwd: REPO,
        env,
        stdout: "pipe",
        stderr: "pipe",
        timeout: 170_000,
      });
      const out = run.stdout.toString();
      const err = run.stderr.toString();
      if (run.exitCode !== 0) console.error(err.slice(-4000));
      expect(run.exitedDueToTimeout).toBeFalsy();
      expect(run.exitCode).toBe(0);
      expect(out).toContain("| figure");
      expect(out).toContain("| raw figure");
      expect(out).toMatch(/^machine: \d+ × .+ \(nproc \d+\).* load [\d.]+ [\d.]+ [\d.]+$/m);
      // Issue 14's table: each figure beside its floor from the same run, as a difference or a ratio.
      expect(out).toMatch(/\| warm `awrepl -s s run "1\+1"` +\| ms +\| [\d.]+ +\| [\d.]+ +\| [+-][\d.]+ ms .*\| [+-][\d.]+ ms +\| [+-][\d.]+ +\| ≤ floor \+ 4 ms/);
      expect(out).toMatch(/\| `awrepl --version` +\| ms +\| [\d.]+ +\| [\d.]+ +\| [+-][\d.]+ ms/);
      expect(out).toMatch(/\| library `execute\("1\+1"\)` p50 +\| us +\| [\d.]+ +\| [\d.]+ +\| [\d.]+ ×/);
      expect(out).toMatch(/\| new named session → first result \(spare ready\) +\| ms +\| [\d.]+ +\| [\d.]+ +\| [+-][\d.]+ ms/);
      expect(out).toMatch(/\| 100 MB cell through the CLI, --max-output 4096 \(floor: a buffered Python\) +\| MB\/s +\| [\d.]+ +\| [\d.]+ +\| [\d.]+ ×/);
      expect(out).toMatch(/\| \+ lib\/session \(ReplSession\.execute\) +\| [\d.]+ /);
      // The awrepl side measured something real: the library round trip has a number, not "–".
      expect(out).toMatch(/\| awrepl\.library_round_trip +\| us +\| \d+ +\| \d/);
      expect(out).toMatch(/\| awrepl\.worker_idle_rss_mib +\| MiB +\| \d+ +\| \d/);
      expect(out).toMatch(/\| awrepl\.mcp_tools_call +\| ms +\| \d+ +\| \d/);
      expect(out).toMatch(/\| awrepl\.mcp_ping +\| ms +\| \d+ +\| \d/);
      // workers.ts: streamed snapshots beside path mode; sandbox and ssh figures where the parts exist.
      expect(out).toMatch(/\| awrepl\.snapshot_stream_mb_per_s +\| MB\/s +\| \d+ +\| \d/);
      expect(out).toMatch(/\| awrepl\.snapshot_path_mb_per_s +\| MB\/s +\| \d+ +\| \d/);
      // Jupyter either ran or was skipped with its reason printed.
      expect(out.includes("| jupyter.execute_round_trip") || /skipped jupyter: \S/.test(out)).toBe(true);
      expect(processesWithHome(tmp, { under: true })).toEqual([]);
    },
    { timeout: 180_000 },
  );
});
