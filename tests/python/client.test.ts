// The Python client package (python/awrepl) end to end: its unittest suites (python/tests/test_*.py)
// run under Debian's python3 and the oldest and newest supported Pythons from pyenv, one bun test per
// (interpreter, module), against the compiled binary, each with a state directory of its own; plus a
// check that `import awrepl` stays cheap beside `python3 -c pass`. A missing interpreter is skipped,
// and said.
import { describe, expect, test } from "bun:test";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { awreplBinary } from "../harness/binary.ts";
import { ROOT } from "../harness/common.ts";
import { deadline } from "../../lib/core/deadline.ts";
import { killPids, waitForNone, withEnv } from "../harness/procs.ts";

const PYENV = process.env.PYENV_ROOT || join(homedir(), ".pyenv");
const INTERPRETERS: [string, string][] = [
  ["debian", "/usr/bin/python3"],
  ["3.9", join(PYENV, "versions/3.9.18/bin/python3")],
  ["3.13", join(PYENV, "versions/3.13.0/bin/python3")],
];
const TESTS = join(ROOT, "python", "tests");
const MODULES = readdirSync(TESTS)
  // test_kernel.py needs the Jupyter stack: tests/python/kernel.test.ts runs it, on Debian's python3.
  .filter((f) => /^test_\w+\.py$/.test(f) && f !== "test_kernel.py")
  .map((f) => f.slice(0, -3))
  .sort();
/** One module's whole run; generous, the machine is shared. */
const MODULE_TIMEOUT_MS = 240_000;

function pythonEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHONPATH: join(ROOT, "python"), AWREPL_BIN: join(ROOT, "dist", "awrepl"), AWREPL_HOME: home, PYTHONDONTWRITEBYTECODE: "1" };
  delete env.AWREPL_SESSION;
  delete env.AWREPL_PYTHON;
  return env;
}

test("the test modules are found", () => {
  expect(MODULES).toContain("test_session");
  expect(MODULES.length).toBeGreaterThanOrEqual(5);
});

/** How many unittest runs go at once: they spend most of their time waiting on the supervisor and workers. */
const CONCURRENCY = 3;
type Outcome = { status: number | null; stdout: string; stderr: string; error?: Error; leftBehind: number[] };
const outcomes = new Map<string, Promise<Outcome>>();

/** Runs `python -m unittest -v module` with a state directory of its own, then stops its supervisor. */
async function runModule(python: string, module: string): Promise<Outcome> {
  await awreplBinary();
  // Each test class makes its own AWREPL_HOME; this one is a fallback nothing should write to.
  const home = mkdtempSync(join(tmpdir(), "awrepl-pyclient-"));
  try {
    // AWREPL_E2E_HOME marks every supervisor this run starts (they inherit the client's environment),
    // whatever state directory its tests make: what is still alive after the run was left behind.
    const env = { ...pythonEnv(home), AWREPL_E2E_HOME: home };
    const child = spawn(python, ["-m", "unittest", "-v", module], { cwd: TESTS, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (t: string) => (stdout += t));
    child.stderr.setEncoding("utf8").on("data", (t: string) => (stderr += t));
    const exited = new Promise<number | null>((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (code) => resolve(code));
    });
    let status: number | null = null;
    let error: Error | undefined;
    try {
      status = await deadline(exited, MODULE_TIMEOUT_MS, `${python} -m unittest ${module}`);
    } catch (err) {
      child.kill("SIGKILL");
      error = err as Error;
    }
    const leftBehind = (await waitForNone(() => withEnv("AWREPL_E2E_HOME", home), 5_000)).map((p) => p.pid);
    killPids(leftBehind);
    return { status, stdout, stderr, error, leftBehind };
  } finally {
    spawnSync(join(ROOT, "dist", "awrepl"), ["daemon", "stop"], { env: pythonEnv(home), timeout: 30_000 });
    rmSync(home, { recursive: true, force: true });
  }
}

/** The outcome of one (interpreter, module) run; the first call starts them all, CONCURRENCY at a time. */
function outcome(python: string, module: string): Promise<Outcome> {
  if (outcomes.size === 0) {
    const queue: [string, string][] = [];
    for (const [, py] of INTERPRETERS) if (existsSync(py)) { for (const m of MODULES) queue.push([py, m]); }
    const settle = new Map(queue.map(([py, m]) => [`${py} ${m}`, Promise.withResolvers<Outcome>()]));
    for (const [key, { promise }] of settle) outcomes.set(key, promise);
    const worker = async () => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        const [py, m] = next;
        settle.get(`${py} ${m}`)!.resolve(await runModule(py, m));
      }
    };
    for (let i = 0; i < CONCURRENCY; i++) void worker();
  }
  return outcomes.get(`${python} ${module}`)!;
}

// The import cost first, while nothing else runs; then the suites, several at once.
for (const [label, python] of INTERPRETERS) {
  if (!existsSync(python)) continue;
  test(`import awrepl costs little beside python3 -c pass (${label})`, () => {
    // Best of several of each, alternating: the machine is shared, so the bound is generous.
    const env = pythonEnv(tmpdir());
    const time = (args: string[]) => {
      const start = performance.now();
      const r = spawnSync(python, args, { env, timeout: 30_000 });
      expect(r.status).toBe(0);
      return performance.now() - start;
    };
    const bare: number[] = [];
    const withImport: number[] = [];
    for (let i = 0; i < 7; i++) {
      bare.push(time(["-c", "pass"]));
      withImport.push(time(["-c", "import awrepl"]));
    }
    const over = Math.min(...withImport) - Math.min(...bare);
    expect(over).toBeLessThan(60);
    // And by the interpreter's own account: awrepl's import itself, in microseconds.
    const r = spawnSync(python, ["-X", "importtime", "-c", "import awrepl"], { env, encoding: "utf8", timeout: 30_000 });
    const line = r.stderr.split("\n").find((l) => /\|\s*awrepl$/.test(l));
    expect(line).toBeDefined();
    const cumulativeUs = Number(line!.split("|")[1]!.trim());
    expect(cumulativeUs).toBeLessThan(20_000);
  });
}

for (const [label, python] of INTERPRETERS) {
  describe(`python client on ${label} (${python})`, () => {
    if (!existsSync(python)) {
      test.skip(`${python} is missing: skipped`, () => {});
      console.warn(`tests/python/client.test.ts: ${python} is missing; its runs are skipped`);
      return;
    }
    for (const module of MODULES) {
      test(
        module,
        async () => {
          const run = await outcome(python, module);
          if (run.status !== 0) console.error(`${python} -m unittest ${module}:\n${run.stdout}\n${run.stderr}`);
          expect(run.error).toBeUndefined();
          expect(run.leftBehind).toEqual([]);
          expect(run.status).toBe(0);
          expect(run.stderr).toMatch(/\nOK( \(skipped=\d+\))?\n?$/);
        },
        // Its wait includes the runs queued before it.
        MODULE_TIMEOUT_MS * 2,
      );
    }
  });
}
