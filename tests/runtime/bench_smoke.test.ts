// The runtime benchmark still runs end to end (`--smoke`: tiny counts) and reports every figure.
// No figure's size is asserted: timings belong to `npm run bench`.
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { PYTHON } from "../harness/mod.ts";

const SCRIPT = fileURLToPath(new URL("../../scripts/bench/runtime.ts", import.meta.url));

describe("scripts/bench/runtime.ts --smoke", () => {
  test("prints its table and, with --json, every figure with samples", () => {
    const run = spawnSync(process.execPath, [SCRIPT, "--smoke", "--json", "--python", PYTHON], { encoding: "utf8", timeout: 60_000 });
    expect(run.status).toBe(0);
    expect(run.stderr).toContain("start to ready (cached .pyc)");
    const figures = JSON.parse(run.stdout.trim().split("\n").pop()!) as Record<string, { unit: string; samples: number[] }>;
    for (
      const name of [
        "runtime_baseline_python_c_pass",
        "runtime_start_to_ready",
        "runtime_start_to_first_result",
        "runtime_round_trip",
        "runtime_print_mb_per_s",
        "runtime_interrupt_busy_loop",
        "runtime_interrupt_sleep_loop",
        "runtime_interrupt_asyncio_sleep",
      ]
    ) {
      expect(figures[name]?.samples.length ?? 0).toBeGreaterThan(0);
      for (const x of figures[name]!.samples) expect(Number.isFinite(x) && x > 0).toBe(true);
    }
  }, 70_000);
});
