// Smoke test of scripts/bench/sandbox_cli.ts: it still runs end to end with tiny counts, reports every
// figure it promises, and leaves no supervisor or worker behind. No figure's size is asserted.
import { expect, test } from "bun:test";
import { requireBwrap } from "../../tests/harness/bwrap.ts";
import { awreplBinary } from "../../tests/harness/binary.ts";
import { benchSandboxCli } from "./sandbox_cli.ts";

test("sandbox_cli.ts --smoke reports the warm, new-session and cold figures with their floors", async () => {
  requireBwrap();
  await awreplBinary();
  const { figures, skipped } = await benchSandboxCli({ smoke: true });
  expect(skipped).toBeUndefined();
  for (const name of ["warm_call_local", "warm_call_sandbox", "new_session_local", "new_session_sandbox", "cold_run_local", "cold_run_sandbox", "floor_bwrap_true", "floor_python_pass"]) {
    expect(figures[`sandbox_cli_${name}`]?.samples.length).toBe(2);
  }
}, 120_000);
