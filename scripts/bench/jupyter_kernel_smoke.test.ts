// Smoke test of scripts/bench/jupyter_kernel.ts: with tiny counts it still runs both kernels end to end
// and reports both figures with the ratio, or says why Jupyter is missing. No figure's size is asserted.
import { expect, test } from "bun:test";
import { awreplBinary } from "../../tests/harness/binary.ts";
import { jupyterKernelFigures, renderJupyterKernelTable } from "./jupyter_kernel.ts";

test("jupyter_kernel.ts --smoke reports the awrepl kernel beside ipykernel", async () => {
  await awreplBinary();
  const { figures, skipped } = jupyterKernelFigures({ smoke: true });
  if (skipped) {
    console.warn(`jupyter_kernel_smoke.test.ts: skipped: ${skipped}`);
    expect(skipped).toMatch(/\S/);
    return;
  }
  for (const name of ["kernel_round_trip", "ipykernel_round_trip"]) expect(figures[name]?.samples.length).toBeGreaterThan(0);
  const table = renderJupyterKernelTable(figures);
  expect(table).toMatch(/\| awrepl kernel \| [\d.]+ \| [\d.]+ \| \d+ \|/);
  expect(table).toMatch(/awrepl kernel ÷ ipykernel, p50: [\d.]+ × \(target ≤ 1: (met|NOT met)\)/);
}, 240_000);
