// Smoke test of scripts/bench/python_client.ts: it still runs end to end with tiny counts, reports each
// figure beside its floor, and leaves no supervisor or worker behind. No figure's size is asserted.
import { expect, test } from "bun:test";
import { awreplBinary } from "../../tests/harness/binary.ts";
import { pythonClientFigures, renderPythonClientTable } from "./python_client.ts";

test("python_client.ts --smoke reports every figure beside its floor", async () => {
  await awreplBinary();
  const figures = await pythonClientFigures({ smoke: true });
  for (const name of ["attach_round_trip", "floor_ts_attach_round_trip", "new_session_to_result", "floor_cli_new_session", "import", "floor_c_pass"]) {
    expect(figures[`python_${name}`]?.samples.length).toBeGreaterThan(0);
  }
  const table = renderPythonClientTable(figures);
  expect(table).toMatch(/\| Python `attach\(\.\.\.\)\.execute\("1\+1"\)` p50 \| us \| [\d.]+ \| [\d.]+ \| [+-][\d.]+ \| [\d.]+ × \| .* \| (yes|NO) \|/);
  expect(table.split("\n").length).toBe(5);
}, 180_000);
