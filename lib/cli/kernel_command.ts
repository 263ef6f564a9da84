// `awrepl kernel install`: registers a Jupyter kernelspec whose kernel is a client of one named session
// (docs/jupyter.md). The kernel is Python (python/awrepl/kernel, on ipykernel), so this command's work is
// choosing a Python that can run it and finding the awrepl package for it: the one pip installed into
// that Python when it is this version, else the copy embedded in this executable, written to the state
// directory (lib/runtime/python_package.ts). The kernelspec itself is written by the package's own
// installer (python/awrepl/kernel/_install.py), which this command runs with every option resolved.
import type { Command } from "commander";
import { AwreplError, ExitCode, usageError } from "../core/errors.ts";
import type { CliContext } from "./context.ts";
import { countOption } from "./options.ts";

/** The interpreters tried, in order, when --python names none (python3 on PATH may lack Jupyter; Debian's has python3-ipykernel). */
export const KERNEL_PYTHONS = ["python3", "/usr/bin/python3"] as const;
/** How long one probe of an interpreter may take: importing ipykernel is slow on a cold cache. */
const PROBE_TIMEOUT_MS = 60_000;
/** How long the installer may take: it probes the kernel's command once more, then writes one file. */
const INSTALL_TIMEOUT_MS = 180_000;
/** What the usage line of the Python installer's own errors calls it. */
const PROG = "awrepl kernel install";

/**
 * One probe per interpreter: can it run the kernel (ipykernel and jupyter_client), which executable it
 * really is (a pyenv shim resolves to the interpreter it chose), and which awrepl, if any, it imports
 * by itself. The last line is JSON.
 */
const PROBE = [
  "import json, sys",
  "import ipykernel, jupyter_client",
  "try:",
  "    import awrepl, awrepl.kernel",
  "    version = awrepl.__version__",
  "except ImportError:",
  "    version = None",
  "print(json.dumps({'executable': sys.executable, 'awrepl': version}))",
].join("\n");

type Probe = { executable: string; awrepl: string | null };

type InstallFlags = {
  user?: boolean;
  prefix?: string;
  system?: boolean;
  name?: string;
  displayName?: string;
  interruptMode?: string;
  timeoutMs?: number;
  awreplBin?: string;
  home?: string;
};

/** The kernelspecs jupyter_client finds whose metadata names an awrepl session (what `kernel list` prints), as one JSON line. */
const LIST = [
  "import json",
  "from jupyter_client.kernelspec import KernelSpecManager",
  "rows = []",
  "for name, found in sorted(KernelSpecManager().get_all_specs().items()):",
  "    meta = (found.get('spec') or {}).get('metadata') or {}",
  "    mine = meta.get('awrepl')",
  "    if isinstance(mine, dict):",
  "        rows.append({'name': name, 'session': mine.get('session'), 'home': mine.get('home'), 'path': found.get('resource_dir')})",
  "print(json.dumps(rows))",
].join("\n");

type KernelRow = { name: string; session: string | null; home: string | null; path: string };

/** Declares `kernel`, `kernel install` and `kernel list`. */
export function registerKernelCommand(program: Command, ctx: CliContext, setExit: (code: number) => void, pythonFlag: () => string | undefined): void {
  const kernel = program
    .command("kernel")
    .description("the live session as a Jupyter kernel: install | list")
    .action(() => {
      throw usageError("kernel needs a subcommand: install or list");
    });
  const install = kernel.command("install");
  const option = (flags: string, description: string) => install.createOption(flags, description);
  install
    .description("register a Jupyter kernelspec whose kernel is a client of the session (-s NAME, else $AWREPL_SESSION): JupyterLab, VS Code, jupyter console run cells in it")
    .addOption(option("--user", "into the user's Jupyter data directory (the default)").conflicts(["prefix", "system"]))
    .addOption(option("--prefix <dir>", "into DIR/share/jupyter/kernels (a virtual environment, a conda prefix)").conflicts(["user", "system"]))
    .addOption(option("--system", "into the system-wide Jupyter directory").conflicts(["user", "prefix"]))
    .option("--name <kernel-name>", "the kernel's name (default awrepl-SESSION, lower-cased)")
    .option("--display-name <text>", "what frontends show (default 'awrepl: SESSION')")
    .addOption(option("--interrupt-mode <mode>", "how Jupyter interrupts: an interrupt_request message or SIGINT; both interrupt the kernel's call (default message)").choices(["message", "signal"]))
    .option("--timeout-ms <time>", "each cell's timeout (30s, 2m; a bare number is ms; default 0: none, as in Jupyter)", (v) => countOption("--timeout-ms", "timeoutMs", v))
    .option("--awrepl-bin <path>", "the awrepl executable the kernel runs (default: this one)")
    .option("--home <dir>", "the state directory the kernel uses (default: $AWREPL_HOME when set, else awrepl's default)")
    .addHelpText(
      "after",
      [
        "",
        "--python PATH: the Python that runs the kernel; it must import ipykernel and jupyter_client (default: the",
        `first of ${KERNEL_PYTHONS.join(" and ")} that does). The session's own interpreter needs nothing of Jupyter.`,
        "The awrepl package comes from that Python when pip installed this version there, else from this executable.",
        "Remove a kernelspec with `jupyter kernelspec remove NAME`. See docs/jupyter.md.",
      ].join("\n"),
    )
    .action(async (flags: InstallFlags) => {
      setExit(await kernelInstall(ctx, flags, pythonFlag()));
    });
  kernel
    .command("list")
    .description("the awrepl kernelspecs Jupyter finds (as `jupyter kernelspec list` does, with JUPYTER_PATH): name, session, directory")
    .option("--json", "print one JSON array: [{name, session, home, path}]")
    .action(async (flags: { json?: boolean }) => {
      setExit(await kernelList(ctx, flags, pythonFlag()));
    });
}

async function kernelList(ctx: CliContext, flags: { json?: boolean }, python: string | undefined): Promise<number> {
  const [{ writeStream }, { execFile }] = await Promise.all([import("./stdio.ts"), import("node:child_process")]);
  const env = withoutPythonPath(ctx.env);
  const probe = await kernelPython(python, env, ctx.cwd);
  const rows = await new Promise<KernelRow[]>((resolvePromise, reject) => {
    execFile(probe.executable, ["-c", LIST], { env, cwd: "/", timeout: PROBE_TIMEOUT_MS, encoding: "utf8" }, (err, stdout, stderr) => {
      if (err) return reject(new AwreplError("internal", `${probe.executable} could not list the kernelspecs: ${(stderr.trim().split("\n").pop() ?? "") || err.message}`));
      try {
        resolvePromise(JSON.parse(stdout.trim().split("\n").pop() ?? "") as KernelRow[]);
      } catch {
        reject(new AwreplError("internal", `${probe.executable} listed the kernelspecs as something that is not JSON: ${JSON.stringify(stdout.slice(0, 200))}`));
      }
    });
  });
  if (flags.json) {
    await writeStream("stdout", `${JSON.stringify(rows)}\n`);
  } else if (rows.length === 0) {
    await writeStream("stderr", "No awrepl kernelspecs found: awrepl kernel install --session NAME makes one\n");
  } else {
    const table = [["NAME", "SESSION", "DIRECTORY"], ...rows.map((r) => [r.name, r.session ?? "?", r.path])];
    const widths = [0, 1].map((i) => Math.max(...table.map((row) => (row[i] as string).length)));
    await writeStream("stdout", `${table.map((row) => row.map((cell, i) => (i < 2 ? cell.padEnd(widths[i] as number) : cell)).join("  ")).join("\n")}\n`);
  }
  return ExitCode.ok;
}

async function kernelInstall(ctx: CliContext, flags: InstallFlags, python: string | undefined): Promise<number> {
  const session = ctx.session();
  if (session === undefined) throw usageError("kernel install needs a session: awrepl kernel install --session NAME (or set AWREPL_SESSION)");
  const [{ resolve }, { isCompiled, AWREPL_VERSION }, { writeStream }] = await Promise.all([import("node:path"), import("../core/version.ts"), import("./stdio.ts")]);
  const env = withoutPythonPath(ctx.env);
  const probe = await kernelPython(python, env, ctx.cwd);
  const absolute = (path: string) => resolve(ctx.cwd, path);
  const awreplBin = flags.awreplBin !== undefined ? absolute(flags.awreplBin) : isCompiled() ? process.execPath : undefined;
  if (awreplBin !== undefined) await checkExecutable(awreplBin);
  // The state directory the kernel reaches: --home, else the one this command resolved when AWREPL_HOME
  // chose it (the default needs no pinning: the kernel resolves the same one).
  const home = flags.home !== undefined ? absolute(flags.home) : ctx.env.AWREPL_HOME ? ctx.layout.home : undefined;

  const args = ["install", "--prog", PROG, "--session", session, "--python", probe.executable];
  if (flags.user) args.push("--user");
  if (flags.system) args.push("--system");
  if (flags.prefix !== undefined) args.push("--prefix", absolute(flags.prefix));
  if (flags.name !== undefined) args.push("--name", flags.name);
  if (flags.displayName !== undefined) args.push("--display-name", flags.displayName);
  if (flags.interruptMode !== undefined) args.push("--interrupt-mode", flags.interruptMode);
  if (flags.timeoutMs !== undefined) args.push("--timeout-ms", String(flags.timeoutMs));
  if (awreplBin !== undefined) args.push("--awrepl-bin", awreplBin);
  if (home !== undefined) args.push("--home", home);

  let argv: string[];
  if (probe.awrepl === AWREPL_VERSION) {
    // pip installed this version into that Python: the kernelspec runs its module (`-m awrepl.kernel`).
    argv = [probe.executable, "-m", "awrepl.kernel", ...args];
  } else {
    if (probe.awrepl !== null) {
      await writeStream("stderr", `awrepl: ${probe.executable} has awrepl ${probe.awrepl} installed; this is awrepl ${AWREPL_VERSION}, so the kernel uses this executable's own copy of the package\n`);
    }
    const { kernelBootLine, pythonPackageDir } = await import("../runtime/python_package.ts");
    argv = [probe.executable, "-c", kernelBootLine(pythonPackageDir(ctx.layout.home)), ...args];
  }
  return await runInstaller(argv, env);
}

/** The caller's environment without PYTHONPATH: what the kernel's Python sees when Jupyter starts it, so what is found now is found then. */
function withoutPythonPath(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const copy = { ...env };
  delete copy.PYTHONPATH;
  return copy;
}

/** The first interpreter that can run the kernel: --python, else KERNEL_PYTHONS in order. None: an error naming each one tried and why. */
async function kernelPython(given: string | undefined, env: NodeJS.ProcessEnv, cwd: string): Promise<Probe> {
  const { findExecutable } = await import("../worker/interpreter.ts");
  const names = given !== undefined ? [given] : [...KERNEL_PYTHONS];
  const tried: string[] = [];
  const seen = new Set<string>();
  for (const name of names) {
    const file = findExecutable(name, env, cwd);
    if (file === null) {
      tried.push(`${name} (${name.includes("/") ? "no such executable file" : "not on PATH"})`);
      continue;
    }
    if (seen.has(file)) continue;
    seen.add(file);
    const got = await probePython(file, env);
    if ("executable" in got) return got;
    tried.push(`${file} (${got.problem})`);
  }
  const which = given !== undefined ? `--python ${tried.join("")} cannot run the awrepl kernel` : `No Python here can run the awrepl kernel: tried ${tried.join(", ")}`;
  throw new AwreplError(
    "no_interpreter",
    `${which}. The kernel's Python needs ipykernel and jupyter_client: install them (Debian: apt install python3-ipykernel; else pip install ipykernel), ` +
      `or name ${given !== undefined ? "another" : "a"} Python that has them with --python PATH`,
  );
}

function probePython(file: string, env: NodeJS.ProcessEnv): Promise<Probe | { problem: string }> {
  return import("node:child_process").then(({ execFile }) =>
    new Promise((resolvePromise) => {
      // cwd "/": a directory named awrepl or ipykernel where the command runs must not count.
      execFile(file, ["-c", PROBE], { env, cwd: "/", timeout: PROBE_TIMEOUT_MS, encoding: "utf8" }, (err, stdout, stderr) => {
        if (err) {
          const why = err.killed ? `no answer within ${PROBE_TIMEOUT_MS / 1000} s` : (stderr.trim().split("\n").pop() ?? "") || err.message;
          return resolvePromise({ problem: why });
        }
        try {
          const got = JSON.parse(stdout.trim().split("\n").pop() ?? "") as Probe;
          if (typeof got.executable !== "string" || !got.executable) got.executable = file;
          if (typeof got.awrepl !== "string") got.awrepl = null;
          resolvePromise(got);
        } catch {
          resolvePromise({ problem: `it did not answer like Python: ${JSON.stringify(stdout.slice(0, 200))}` });
        }
      });
    })
  );
}

async function checkExecutable(path: string): Promise<void> {
  const { accessSync, constants, statSync } = await import("node:fs");
  try {
    if (!statSync(path).isFile()) throw new Error("not a file");
    accessSync(path, constants.X_OK);
  } catch {
    throw usageError(`--awrepl-bin ${JSON.stringify(path)} is not an executable file`);
  }
}

/** Runs the installer with this command's stdout and stderr; its exit status as awrepl's (2 a usage error, anything else that failed 125). */
async function runInstaller(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { spawn } = await import("node:child_process");
  const [file, ...rest] = argv as [string, ...string[]];
  const code = await new Promise<number | null>((resolvePromise, reject) => {
    const child = spawn(file, rest, { env, cwd: "/", stdio: ["ignore", "inherit", "inherit"], timeout: INSTALL_TIMEOUT_MS });
    child.on("error", (err) => reject(new AwreplError("no_interpreter", `Cannot run ${file}: ${err.message}`, { cause: err })));
    child.on("close", (status, signal) => {
      if (signal !== null && child.killed) return reject(new AwreplError("internal", `The kernel installer (${file}) did not finish within ${INSTALL_TIMEOUT_MS / 1000} s`));
      resolvePromise(status);
    });
  });
  return code === 0 ? ExitCode.ok : code === ExitCode.usage ? ExitCode.usage : ExitCode.internal;
}
