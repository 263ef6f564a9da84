// Finding the supervisor, and starting it when nobody answers: the same executable re-executed
// detached with the hidden `__supervisor` subcommand. Many clients may start it at once; the
// supervisor's start-up lock lets exactly one survive, and every client polls until the socket answers.
// On the CLI's hot path (a warm call only connects): node:fs and the start-up lock load only where a
// supervisor is started.
import { SupervisorConnection } from "./connection.ts";
import { AwreplError } from "../core/errors.ts";
import { builtin, fileExists as existsSync } from "../core/fastio.ts";
import { ensurePrivateDir, type HomeLayout } from "../settings/home.ts";
import { processAlive } from "../core/process.ts";
import { isCompiled } from "../core/version.ts";

/** How long a client waits for a supervisor it started (or found starting) to answer. */
const START_TIMEOUT_MS = 15_000;
const LOG_ROTATE_BYTES = 1024 * 1024;

export const SUPERVISOR_SUBCOMMAND = "__supervisor";

export type ConnectOptions = {
  /** Start the supervisor if none answers (otherwise resolve null). */
  autostart: boolean;
  /** The environment to start it with. Default process.env. */
  env?: NodeJS.ProcessEnv;
};

/**
 * The hot path: a connection with hello written but not yet answered, so the caller's first request
 * goes out in the same breath. The caller must be ready for that request to fail with
 * version_mismatch, or with the connection closing before hello was answered (a supervisor that was
 * exiting); neither ran anything, so it can retry through connectSupervisor().
 */
export async function connectFast(layout: HomeLayout, env: NodeJS.ProcessEnv): Promise<SupervisorConnection> {
  return (await SupervisorConnection.connect(layout)) ?? (await connectSupervisor(layout, { autostart: true, env }) as SupervisorConnection);
}

/**
 * A connection whose hello said the versions match. A supervisor of another version is asked to
 * stop first and, with `autostart`, replaced by one of ours.
 */
export async function connectSupervisor(layout: HomeLayout, options: ConnectOptions): Promise<SupervisorConnection | null> {
  let lastError: Error | null = null;
  for (let attempt = 0; attempt < 4; attempt++) {
    let conn = await SupervisorConnection.connect(layout);
    if (!conn) {
      if (!options.autostart) return null;
      conn = await startAndConnect(layout, options.env ?? process.env);
    }
    let hello;
    try {
      hello = await conn.hello;
    } catch (err) {
      conn.close();
      if (conn.wedged) throw err; // wedged: waiting again would not help
      // Accepted and then closed: it was exiting (idle exit, stop). Try again from the start.
      lastError = err as Error;
      continue;
    }
    if (hello.ok) return conn;
    await stopAndWait(conn, hello.pid);
    if (!options.autostart) return null;
  }
  throw new AwreplError(
    "supervisor_unreachable",
    `Cannot reach the supervisor at ${layout.socket}: ${lastError?.message ?? "it keeps going away"} (its log: ${layout.log})`,
  );
}

/** Asks a supervisor to stop and waits until its process is gone. */
export async function stopAndWait(conn: SupervisorConnection, pid: number): Promise<void> {
  // `op` too: a supervisor of protocol 1 reads that (docs/supervisor-protocol.md, "Versions").
  conn.notify({ type: "stop", op: "stop" });
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline && processAlive(pid)) await sleep(10);
  conn.close();
}

/**
 * How many supervisors one client starts at most while it waits: one, and another each time the one
 * it started lost the race (exited 0) or the lock it waited on was given up, and nobody answers yet.
 */
const MAX_STARTS = 3;

/** A supervisor this client started: how it ended, if it did. */
type Started = { exited: number | null; spawnError: { command: string; error: Error } | null };

async function startAndConnect(layout: HomeLayout, env: NodeJS.ProcessEnv): Promise<SupervisorConnection> {
  ensurePrivateDir(layout.home);
  let starts = 0;
  const start = async (): Promise<Started> => {
    starts++;
    const started: Started = { exited: null, spawnError: null };
    const { child, command } = await spawnSupervisor(layout, env);
    child.once("exit", (code) => {
      started.exited = code ?? 1;
    });
    // An executable that cannot be run at all (AWREPL_BIN naming no file): said now, not after the timeout.
    child.once("error", (error) => {
      started.spawnError = { command, error };
    });
    return started;
  };
  let mine: Started | null = (await startInProgress(layout)) ? null : await start();
  const deadline = Date.now() + START_TIMEOUT_MS;
  let delay = 2;
  for (;;) {
    const conn = await SupervisorConnection.connect(layout);
    if (conn) return conn;
    if (mine?.spawnError) {
      const { command, error } = mine.spawnError;
      throw new AwreplError("supervisor_unreachable", `Cannot start the supervisor (${command}): ${error.message}`);
    }
    // A starter that failed (not one that lost the race and exited 0) will not come back.
    if (mine && mine.exited !== null && mine.exited !== 0) {
      throw new AwreplError("supervisor_unreachable", `The supervisor failed to start (exit ${mine.exited})${lastLogLine(layout.log)}; see its log: ${layout.log}`);
    }
    // Nobody of ours is starting (we left it to a live lock holder, or ours lost to one), and the
    // lock is free now: its holder finished, or its lock turned stale while we waited — a live pid
    // that never was a starter (a state directory kept across a container restart) holds it until
    // it is STALE_LOCK_MS old. Start one, which takes the stale lock over.
    if ((mine === null || mine.exited === 0) && starts < MAX_STARTS && !(await startInProgress(layout))) {
      // A holder that just finished is listening now.
      const late = await SupervisorConnection.connect(layout);
      if (late) return late;
      mine = await start();
    }
    if (Date.now() > deadline) {
      throw new AwreplError(
        "supervisor_unreachable",
        `The supervisor did not start within ${START_TIMEOUT_MS / 1000} s; see its log: ${layout.log}`,
      );
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 10);
  }
}

/** True when another client's supervisor is starting right now (a live starter holds the lock). */
async function startInProgress(layout: HomeLayout): Promise<boolean> {
  const { lockHolder } = await import("../supervisor/start_lock.ts");
  return lockHolder(layout.lock) !== null;
}

/** Starts the supervisor; node:child_process, node:url and node:module load only here, off the warm path. */
async function spawnSupervisor(layout: HomeLayout, env: NodeJS.ProcessEnv) {
  const [{ spawn }, { fileURLToPath }, { createRequire }, { closeSync }] = await Promise.all([
    import("node:child_process"),
    import("node:url"),
    import("node:module"),
    import("node:fs"),
  ]);
  rotateLog(layout.log);
  const require = createRequire(import.meta.url);
  const [cmd, ...args] = supervisorCommand(env, { fileURLToPath, resolvePackage: (specifier) => require.resolve(specifier) });
  const log = openLog(layout.log);
  try {
    const child = spawn(cmd as string, args, {
      detached: true,
      stdio: ["ignore", log, log],
      cwd: layout.home,
      env: { ...env, AWREPL_HOME: layout.home },
      windowsHide: true,
    });
    child.unref();
    return { child, command: [cmd, ...args].join(" ") };
  } finally {
    closeSync(log);
  }
}

/**
 * The supervisor's log, opened for it to append to, with a first line of ours: a state directory the
 * supervisor could not write (a full disk) is said here, clearly, and leaves no empty log behind,
 * rather than as a supervisor that exits without a word.
 */
function openLog(path: string): number {
  const { closeSync, openSync, rmSync, writeSync } = builtin("node:fs");
  const existed = existsSync(path);
  let fd: number | null = null;
  try {
    fd = openSync(path, "a", 0o600);
    writeSync(fd, `${new Date().toISOString()} [${process.pid}] client: starting the supervisor\n`);
    return fd;
  } catch (err) {
    if (fd !== null) closeSync(fd);
    if (!existed) rmSync(path, { force: true });
    throw new AwreplError("internal", `Cannot start the supervisor: its log ${path} cannot be written: ${(err as Error).message}`, { cause: err });
  }
}

/** ": <the log's last line>", what a supervisor that failed to start said last, or "" when it said nothing. */
function lastLogLine(path: string): string {
  try {
    const text = builtin("node:fs").readFileSync(path, "utf8");
    const line = text.trimEnd().split("\n").at(-1)?.trim() ?? "";
    return line && !line.includes("client: starting the supervisor") ? `: ${line.slice(0, 300)}` : "";
  } catch {
    return "";
  }
}

function rotateLog(log: string): void {
  const { renameSync, statSync } = builtin("node:fs");
  try {
    if (statSync(log).size > LOG_ROTATE_BYTES) renameSync(log, `${log}.1`);
  } catch {
    // no log yet
  }
}

/** The npm package that holds this platform's executable (an optional dependency of the `awrepl` package). */
export function platformPackage(): string {
  return `@awrepl/${process.platform}-${process.arch}`;
}

export type CommandLookup = {
  fileURLToPath: (url: InstanceType<typeof URL>) => string; // not `URL`: Deno's checker sees only the value there
  /** require.resolve relative to this module: finds the platform package wherever npm, Deno or Bun put it. */
  resolvePackage?: (specifier: string) => string;
};

/**
 * The command that runs this program's supervisor, the first found of: AWREPL_BIN; the compiled
 * executable itself; the executable in this platform's npm package (the library installed from npm,
 * under Node, Deno or Bun); in a checkout, `bun main.ts` under Bun, else the built dist/awrepl.
 */
export function supervisorCommand(env: NodeJS.ProcessEnv, lookup: CommandLookup): string[] {
  if (env.AWREPL_BIN) return [env.AWREPL_BIN, SUPERVISOR_SUBCOMMAND];
  if (isCompiled()) return [process.execPath, SUPERVISOR_SUBCOMMAND];
  const exe = process.platform === "win32" ? "awrepl.exe" : "awrepl";
  const packaged = packagedExecutable(exe, lookup.resolvePackage);
  if (packaged) return [packaged, SUPERVISOR_SUBCOMMAND];
  const here = import.meta.url;
  const main = lookup.fileURLToPath(new URL("../../main.ts", here));
  if (typeof Bun !== "undefined" && existsSync(main)) return [process.execPath, main, SUPERVISOR_SUBCOMMAND];
  const built = lookup.fileURLToPath(new URL(`../../dist/${exe}`, here));
  if (existsSync(built)) return [built, SUPERVISOR_SUBCOMMAND];
  throw new AwreplError(
    "supervisor_unreachable",
    `Cannot find the awrepl executable to start the supervisor: install ${platformPackage()} (npm installs it with awrepl ` +
      "unless optional dependencies are omitted), or set AWREPL_BIN to an awrepl executable",
  );
}

/** bin/awrepl of the platform package, when it is installed. */
function packagedExecutable(exe: string, resolvePackage: CommandLookup["resolvePackage"]): string | null {
  if (!resolvePackage) return null;
  let manifest: string;
  try {
    manifest = resolvePackage(`${platformPackage()}/package.json`);
  } catch {
    return null; // not installed: a checkout, or optional dependencies omitted
  }
  // The package's directory: its package.json's, whatever the path separator.
  const bin = `${manifest.slice(0, -"package.json".length)}bin/${exe}`;
  return existsSync(bin) ? bin : null;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
