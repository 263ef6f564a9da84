// `awrepl kernel install` from the compiled binary (lib/cli/kernel_command.ts): with no awrepl package
// importable anywhere (no PYTHONPATH, nothing pip installed), the binary writes its own copy of the
// package into the state directory and registers a kernelspec that runs from it. jupyter_client's
// KernelManager then starts that kernel from a temporary JUPYTER_PATH, a cell runs there, and the CLI
// reads what it set: one session. A Python without ipykernel is refused, naming it. Installed by pip
// into a virtual environment (this version), the kernelspec runs that environment's module instead.
import { afterEach, beforeEach, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AWREPL_VERSION } from "../../lib/core/version.ts";
import { cleanupHome, makeHome, run, testEnv } from "../harness/binary.ts";
import { PYTHON, pythonHas, ROOT } from "../harness/common.ts";

/** Debian's python3 carries python3-ipykernel and python3-jupyter-client (.ci/run installs them). */
const JUPYTER = pythonHas("ipykernel") && pythonHas("jupyter_client");
/** A skipped test says why in its name: without Jupyter's packages there is no kernel to start. */
const needsJupyter = (name: string) => JUPYTER ? name : `${name} [skipped: ${PYTHON} cannot import ipykernel and jupyter_client; apt-get install python3-ipykernel python3-jupyter-client]`;
/** A Python without ipykernel: pyenv's 3.13. */
const BARE_PYTHON = join(process.env.HOME ?? "/root", ".pyenv/versions/3.13.0/bin/python3");
/** One kernel start and a cell, on a shared machine: generous, never a measured bound. */
const KERNEL_TIMEOUT_S = 90;
const TEST_TIMEOUT_MS = 240_000;

let home: string;
let work: string;
beforeEach(() => {
  home = makeHome();
  work = mkdtempSync(join(tmpdir(), "awrepl-kernel-install-"));
});
afterEach(async () => {
  await cleanupHome(home);
  rmSync(work, { recursive: true, force: true });
});

/**
 * No PYTHONPATH: the awrepl package is importable from nowhere but what `kernel install` sets up. Jupyter's
 * own directories (the user's kernelspecs, connection files) in this test's directory, never the real ones.
 */
const env = (extra: Record<string, string | undefined> = {}) => ({
  PYTHONPATH: undefined,
  JUPYTER_PATH: undefined,
  JUPYTER_DATA_DIR: join(work, "data"),
  JUPYTER_RUNTIME_DIR: join(work, "runtime"),
  JUPYTER_CONFIG_DIR: join(work, "config"),
  ...extra,
});

/**
 * Starts the kernelspec `name` with jupyter_client (JUPYTER_PATH: `prefix`/share/jupyter), runs `code`,
 * prints the reply's status, shuts the kernel down, and waits for its process to be gone.
 */
const DRIVER = `
import gc, sys
from jupyter_client.manager import KernelManager
name, code, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
km = KernelManager(kernel_name=name)
km.start_kernel()
kc = km.client()
try:
    kc.start_channels()
    kc.wait_for_ready(timeout=timeout)
    msg_id = kc.execute(code)
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    print("status:", reply["content"]["status"])
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=False)
print("kernel alive:", km.is_alive())
# Collected now: jupyter_client's client logs from __del__, which fails once logging is torn down at exit.
del kc
gc.collect()
`;

function driveKernel(prefix: string, name: string, code: string): { status: number | null; stdout: string; stderr: string } {
  const driverEnv = testEnv(home, env({ JUPYTER_PATH: join(prefix, "share", "jupyter") }));
  const r = spawnSync(PYTHON, ["-c", DRIVER, name, code, String(KERNEL_TIMEOUT_S)], { cwd: work, env: driverEnv, encoding: "utf8", timeout: (KERNEL_TIMEOUT_S * 3 + 30) * 1000 });
  return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
}

function kernelJson(prefix: string, name: string): { argv: string[]; env?: Record<string, string>; metadata: { awrepl: { session: string } } } {
  return JSON.parse(readFileSync(join(prefix, "share", "jupyter", "kernels", name, "kernel.json"), "utf8"));
}

test.skipIf(!JUPYTER)(
  needsJupyter("kernel install with no awrepl package anywhere: the kernelspec runs the binary's own copy, and its cell lands in the CLI's session"),
  async () => {
    const prefix = join(work, "prefix");
    // Nothing can import awrepl before the install (what makes the embedded copy necessary).
    expect(spawnSync(PYTHON, ["-c", "import awrepl"], { cwd: work, env: testEnv(home, env()), encoding: "utf8" }).status).not.toBe(0);
    // What only the package's installer checks comes back as a usage error under this command's name.
    const badName = await run(["kernel", "install", "--prefix", prefix, "--session", "s", "--name", "no spaces"], { home, cwd: work, env: env(), timeoutMs: 120_000 });
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain("awrepl kernel install: error: --name 'no spaces' is not a kernel name");
    expect(existsSync(prefix)).toBe(false);

    const installed = await run(["kernel", "install", "--prefix", prefix, "--session", "s"], { home, cwd: work, env: env(), timeoutMs: 120_000 });
    expect(installed.stderr).toBe("");
    expect(installed.code).toBe(0);
    expect(installed.stdout).toContain("Installed kernelspec awrepl-s");

    // The package, written once under its content hash, complete; the kernelspec puts that directory on sys.path.
    const dirs = readdirSync(join(home, "python"));
    expect(dirs.filter((d) => d.startsWith("."))).toEqual([]); // no temporary copy left
    expect(dirs).toHaveLength(1);
    const dir = join(home, "python", dirs[0] as string);
    expect(readFileSync(join(dir, "awrepl", "kernel", "_kernel.py"), "utf8")).toBe(readFileSync(join(ROOT, "python", "awrepl", "kernel", "_kernel.py"), "utf8"));
    const spec = kernelJson(prefix, "awrepl-s");
    expect(spec.argv[spec.argv.indexOf("-c") + 1]).toContain(`sys.path.insert(0, '${dir}')`);
    expect(spec.argv[spec.argv.indexOf("--session") + 1]).toBe("s");
    expect(spec.env?.AWREPL_HOME).toBe(home);
    expect(spec.env?.AWREPL_BIN).toBe(join(ROOT, "dist", "awrepl"));

    const cell = driveKernel(prefix, "awrepl-s", "x = 1");
    expect(cell.stderr).not.toContain("Traceback");
    expect(cell.status).toBe(0);
    expect(cell.stdout).toContain("status: ok");
    expect(cell.stdout).toContain("kernel alive: False");
    const read = await run(["-s", "s", "run", "x"], { home, cwd: work, env: env() });
    expect(read.stdout).toBe("1\n");
    expect(read.code).toBe(0);
    // The kernel's hello says who it is: the session's history names it beside the CLI.
    const history = await run(["-s", "s", "history", "--json"], { home, cwd: work, env: env() });
    expect(history.code).toBe(0);
    const cells = (JSON.parse(history.stdout) as { cells: { code: string; client: string }[] }).cells;
    expect(cells.map((c) => [c.code, c.client])).toEqual([["x = 1", "kernel"], ["x", "cli"]]);

    // Installing again reuses the directory: it is never rewritten while a kernelspec may use it.
    const again = await run(["kernel", "install", "--prefix", prefix, "--session", "s", "--name", "second"], { home, cwd: work, env: env(), timeoutMs: 120_000 });
    expect(again.code).toBe(0);
    expect(readdirSync(join(home, "python"))).toEqual(dirs);
    expect(kernelJson(prefix, "second").argv).toEqual(spec.argv);

    // `kernel list` finds both where Jupyter looks (JUPYTER_PATH here), with their session.
    const jupyterPath = { JUPYTER_PATH: join(prefix, "share", "jupyter") };
    const listed = await run(["kernel", "list", "--json"], { home, cwd: work, env: env(jupyterPath), timeoutMs: 120_000 });
    expect(listed.code).toBe(0);
    const rows = (JSON.parse(listed.stdout) as { name: string; session: string; path: string }[]).filter((r) => r.path.startsWith(prefix));
    expect(rows.map((r) => [r.name, r.session])).toEqual([["awrepl-s", "s"], ["second", "s"]]);
    const table = await run(["kernel", "list"], { home, cwd: work, env: env(jupyterPath), timeoutMs: 120_000 });
    expect(table.stdout).toMatch(/^NAME +SESSION +DIRECTORY\n/);
    expect(table.stdout).toMatch(new RegExp(`\\nawrepl-s +s +${join(prefix, "share", "jupyter", "kernels", "awrepl-s")}\\n`));

    // Without --prefix: the user's Jupyter data directory (JUPYTER_DATA_DIR puts it in this test's directory).
    const user = await run(["-s", "u", "kernel", "install"], { home, cwd: work, env: env(), timeoutMs: 120_000 });
    expect(user.code).toBe(0);
    expect(JSON.parse(readFileSync(join(work, "data", "kernels", "awrepl-u", "kernel.json"), "utf8")).metadata.awrepl.session).toBe("u");
  },
  TEST_TIMEOUT_MS,
);

test.skipIf(!existsSync(BARE_PYTHON) || pythonHas("ipykernel", BARE_PYTHON))(
  "kernel install --python naming a Python without ipykernel: a clear error naming it, exit 125, nothing written",
  async () => {
    const prefix = join(work, "prefix");
    const r = await run(["kernel", "install", "--prefix", prefix, "--session", "s", "--python", BARE_PYTHON], { home, cwd: work, env: env(), timeoutMs: 120_000 });
    expect(r.code).toBe(125);
    expect(r.stderr).toContain(BARE_PYTHON);
    expect(r.stderr).toContain("No module named 'ipykernel'");
    expect(r.stderr).toContain("pip install ipykernel");
    expect(r.stdout).toBe("");
    expect(existsSync(prefix)).toBe(false);
    expect(existsSync(join(home, "python"))).toBe(false);
  },
  TEST_TIMEOUT_MS,
);

test("kernel install refuses what it cannot use: no session, --prefix with --user, a bad --interrupt-mode, a missing --awrepl-bin", async () => {
  const prefix = join(work, "prefix");
  const noSession = await run(["kernel", "install", "--prefix", prefix], { home, cwd: work, env: env() });
  expect(noSession.code).toBe(2);
  expect(noSession.stderr).toContain("--session");
  const both = await run(["kernel", "install", "-s", "s", "--prefix", prefix, "--user"], { home, cwd: work, env: env() });
  expect(both.code).toBe(2);
  expect(both.stderr).toContain("--user");
  const mode = await run(["kernel", "install", "-s", "s", "--interrupt-mode", "sometimes"], { home, cwd: work, env: env() });
  expect(mode.code).toBe(2);
  expect(mode.stderr).toContain("sometimes");
  const bin = await run(["kernel", "install", "-s", "s", "--prefix", prefix, "--awrepl-bin", join(work, "nope")], { home, cwd: work, env: env(), timeoutMs: 120_000 });
  expect(bin.code).toBe(2);
  expect(bin.stderr).toContain(join(work, "nope"));
  expect(existsSync(prefix)).toBe(false);
});

test.skipIf(!JUPYTER)(
  needsJupyter("pip installed this version into the kernel's Python: the kernelspec runs its module (-m awrepl.kernel), no copy is written"),
  async () => {
    // A copy of the package's source, so that pip's build leaves nothing in the checkout; setup.py reads package.json beside it.
    const source = join(work, "checkout", "python");
    cpSync(join(ROOT, "python"), source, { recursive: true, filter: (p) => !/\/(tests|build|__pycache__)$|\.egg-info$/.test(p) });
    for (const name of ["package.json", "README.md"]) cpSync(join(ROOT, name), join(work, "checkout", name));
    const venv = join(work, "venv");
    const made = spawnSync(PYTHON, ["-m", "venv", "--system-site-packages", venv], { encoding: "utf8", timeout: 120_000 });
    expect(made.stderr).toBe("");
    const python = join(venv, "bin", "python");
    const pipEnv = testEnv(home, env());
    for (const key of Object.keys(pipEnv)) if (key.startsWith("PIP_")) delete pipEnv[key];
    const pip = spawnSync(python, ["-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "-q", source], { cwd: work, env: pipEnv, encoding: "utf8", timeout: 180_000 });
    expect(pip.status).toBe(0);
    const version = spawnSync(python, ["-c", "import awrepl; print(awrepl.__version__)"], { cwd: "/", env: pipEnv, encoding: "utf8" });
    expect(version.stdout.trim()).toBe(AWREPL_VERSION);

    const prefix = join(work, "prefix");
    const installed = await run(["kernel", "install", "--prefix", prefix, "--session", "v", "--python", python], { home, cwd: work, env: env(), timeoutMs: 120_000 });
    expect(installed.stderr).toBe("");
    expect(installed.code).toBe(0);
    const spec = kernelJson(prefix, "awrepl-v");
    expect(spec.argv[0]).toBe(python);
    expect(spec.argv[spec.argv.indexOf("-m") + 1]).toBe("awrepl.kernel");
    expect(existsSync(join(home, "python"))).toBe(false);
  },
  TEST_TIMEOUT_MS,
);
