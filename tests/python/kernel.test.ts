// The Jupyter kernel (python/awrepl/kernel) end to end: python/tests/test_kernel.py run under Debian's
// python3, where python3-ipykernel, python3-jupyter-client, python3-nbclient and python3-nbformat live,
// against the compiled binary, with a state directory of its own. The module installs the kernelspec
// into a temporary prefix, drives the kernel with jupyter_client and executes a notebook with nbclient;
// without those packages it skips, and this test says so.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { awreplBinary } from "../harness/binary.ts";
import { ROOT } from "../harness/common.ts";

const PYTHON = "/usr/bin/python3";
const TESTS = join(ROOT, "python", "tests");
/** The whole module: three kernel starts, a restart, a notebook; generous, the machine is shared. */
const MODULE_TIMEOUT_MS = 300_000;

function pythonEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHONPATH: join(ROOT, "python"), AWREPL_BIN: join(ROOT, "dist", "awrepl"), AWREPL_HOME: home, PYTHONDONTWRITEBYTECODE: "1" };
  delete env.AWREPL_SESSION;
  delete env.AWREPL_PYTHON;
  delete env.JUPYTER_PATH;
  return env;
}

test.skipIf(!existsSync(PYTHON))(
  "the kernel, driven by jupyter_client and nbclient (python/tests/test_kernel.py)",
  async () => {
    await awreplBinary();
    // The test class makes its own AWREPL_HOME; this one is a fallback nothing should write to.
    const home = mkdtempSync(join(tmpdir(), "awrepl-kernel-"));
    try {
      const run = spawnSync(PYTHON, ["-m", "unittest", "-v", "test_kernel"], { cwd: TESTS, env: pythonEnv(home), encoding: "utf8", timeout: MODULE_TIMEOUT_MS });
      if (run.status !== 0) console.error(`${PYTHON} -m unittest test_kernel:\n${run.stdout}\n${run.stderr}`);
      if (/skipped '.*cannot import/.test(run.stderr)) console.warn(`tests/python/kernel.test.ts: ${PYTHON} lacks Jupyter's packages; the kernel tests were skipped`);
      expect(run.error).toBeUndefined();
      expect(run.status).toBe(0);
      expect(run.stderr).toMatch(/\nOK( \(skipped=\d+\))?\n?$/);
    } finally {
      spawnSync(join(ROOT, "dist", "awrepl"), ["daemon", "stop"], { env: pythonEnv(home), timeout: 30_000 });
      rmSync(home, { recursive: true, force: true });
    }
  },
  MODULE_TIMEOUT_MS + 30_000,
);
