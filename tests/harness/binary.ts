// The end-to-end harness: the compiled binary (built once per test process when missing or older than
// its sources), run with a private temporary AWREPL_HOME, a timeout on every wait, and a cleanup that
// stops the supervisor and proves no process of that home is left behind.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { BINARY, buildBinary } from "../../scripts/build.ts";
import { PYTHON, ROOT, tempHome } from "./common.ts";
import { withAnyEnv } from "./procs.ts";
import { deadline, DeadlineError } from "../../lib/core/deadline.ts";

/** Upper bound for one awrepl command in a test; generous because the machine is shared. */
export const COMMAND_TIMEOUT_MS = 30_000;

let built: Promise<string> | null = null;

/** The path of dist/awrepl, compiled first if it is missing or older than any source file. */
export function awreplBinary(): Promise<string> {
  built ??= (async () => {
    if (!existsSync(BINARY) || statSync(BINARY).mtimeMs < newestSourceMtime()) {
      const r = buildBinary();
      if (!r.ok) throw new Error(`Building dist/awrepl failed:\n${r.output}`);
    }
    return BINARY;
  })();
  return built;
}

function newestSourceMtime(): number {
  let newest = 0;
  const visit = (path: string) => {
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) {
      for (const name of readdirSync(path)) if (!name.startsWith(".")) visit(join(path, name));
    } else if (/\.(ts|py|json)$/.test(path) && !path.endsWith(".test.ts")) newest = Math.max(newest, st.mtimeMs);
  };
  for (const p of ["main.ts", "lib", "runtime.py", "python/awrepl", "package.json"]) visit(join(ROOT, p));
  return newest;
}

/** A private state directory; remove it with cleanupHome() (which also checks for leftover processes). */
export function makeHome(): string {
  return tempHome("awrepl-e2e-").home;
}

export type RunResult = {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Wall time of the command. */
  ms: number;
  timedOut: boolean;
};

export type RunOptions = {
  home: string;
  /** Written to stdin, then stdin is closed; without it stdin is /dev/null (never a terminal). */
  input?: string;
  env?: Record<string, string | undefined>;
  cwd?: string;
  timeoutMs?: number;
  /** Run this command line instead of the binary (e.g. a pseudo-terminal wrapper that runs it). */
  wrap?: string[];
};

/** The environment a test's awrepl runs in: its own home, the test interpreter, no colour, no session. */
export function testEnv(home: string, extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  // AWREPL_E2E_HOME marks every process of this test, also those a command moves to another home
  // (the self-test uses a private one).
  const env: NodeJS.ProcessEnv = { ...process.env, AWREPL_HOME: home, AWREPL_E2E_HOME: home, AWREPL_PYTHON: PYTHON, NO_COLOR: "1" };
  delete env.AWREPL_SESSION;
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export type Running = {
  child: ChildProcess;
  /** Resolves once `text` has appeared on stdout (rejects after `timeoutMs`). */
  waitForStdout(text: string, timeoutMs?: number): Promise<void>;
  result: Promise<RunResult>;
};

/** Starts awrepl with `args`; the returned handle streams its output and resolves with the result. */
export async function start(args: string[], options: RunOptions): Promise<Running> {
  const binary = await awreplBinary();
  const began = performance.now();
  const [command, ...argv] = options.wrap ?? [binary, ...args];
  const child = spawn(command as string, argv, {
    cwd: options.cwd ?? options.home,
    env: testEnv(options.home, options.env),
    stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const waiters: { text: string; resolve: () => void }[] = [];
  child.stdout?.setEncoding("utf8").on("data", (s: string) => {
    stdout += s;
    for (const w of waiters.filter((w) => stdout.includes(w.text))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  child.stderr?.setEncoding("utf8").on("data", (s: string) => {
    stderr += s;
  });
  if (options.input !== undefined) child.stdin?.end(options.input);
  let timedOut = false;
  const limit = options.timeoutMs ?? COMMAND_TIMEOUT_MS;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, limit);
  const result = new Promise<RunResult>((resolvePromise, reject) => {
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr, ms: performance.now() - began, timedOut });
    });
  });
  const waitForStdout = async (text: string, timeoutMs = COMMAND_TIMEOUT_MS): Promise<void> => {
    if (stdout.includes(text)) return;
    const waiter = { text, resolve: () => {} };
    const seen = new Promise<void>((resolveWait, reject) => {
      waiter.resolve = resolveWait;
      waiters.push(waiter);
      void result.then(() => {
        if (!stdout.includes(text)) reject(new Error(`awrepl exited before printing ${JSON.stringify(text)}; stdout: ${JSON.stringify(stdout)}, stderr: ${JSON.stringify(stderr)}`));
      });
    });
    try {
      await deadline(seen, timeoutMs, `${JSON.stringify(text)} on stdout`);
    } catch (err) {
      if (!(err instanceof DeadlineError)) throw err;
      if (waiters.includes(waiter)) waiters.splice(waiters.indexOf(waiter), 1);
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${JSON.stringify(text)}; stdout so far: ${JSON.stringify(stdout)}, stderr: ${JSON.stringify(stderr)}`);
    }
  };
  return { child, waitForStdout, result };
}

/** Runs awrepl with `args` to completion. */
export async function run(args: string[], options: RunOptions): Promise<RunResult> {
  const r = await (await start(args, options)).result;
  if (r.timedOut) throw new Error(`awrepl ${args.join(" ")} did not finish within ${options.timeoutMs ?? COMMAND_TIMEOUT_MS} ms; stderr: ${r.stderr}`);
  return r;
}

/**
 * The pids of every live process started for `home`: awrepl, the supervisor and workers all carry
 * AWREPL_HOME=<home> or AWREPL_E2E_HOME=<home> in their environment (a sandboxed worker only when the
 * test passes AWREPL_E2E_HOME through its `env` list). Linux only (reads /proc); elsewhere [].
 */
export function processesOf(home: string): number[] {
  return withAnyEnv([
    ["AWREPL_HOME", home],
    ["AWREPL_E2E_HOME", home],
  ]).map((p) => p.pid);
}

/** Waits until no process of `home` is alive; returns the ones still alive after `timeoutMs`. */
export async function waitForNoProcesses(home: string, timeoutMs = 5_000): Promise<number[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const left = processesOf(home);
    if (left.length === 0 || Date.now() >= until) return left;
    await Bun.sleep(50);
  }
}

/**
 * Stops the supervisor of `home` (if one was started), waits for every process of that home to end,
 * kills any survivor, removes the directory, and throws if something had been left behind.
 */
export async function cleanupHome(home: string): Promise<void> {
  if (processesOf(home).length > 0) {
    try {
      await run(["daemon", "stop"], { home, timeoutMs: 15_000 });
    } catch {
      // Reported below through the processes that remain.
    }
  }
  const left = await waitForNoProcesses(home, 5_000);
  for (const pid of left) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  rmSync(home, { recursive: true, force: true });
  if (left.length) throw new Error(`Processes left behind for ${home}: ${left.join(", ")}`);
}

/** Runs `fn` with a fresh home, then cleans it up (stopping the supervisor, checking for leftovers). */
export async function withHome<T>(fn: (home: string) => Promise<T>): Promise<T> {
  const home = makeHome();
  let failed = false;
  try {
    return await fn(home);
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    // A leftover process is a failure of its own, but never hides the test's own error.
    await cleanupHome(home).catch((err) => {
      if (!failed) throw err;
    });
  }
}
