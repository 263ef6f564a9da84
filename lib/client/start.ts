// Finding the supervisor, and starting it when nobody answers: the same executable re-executed
// detached with the hidden `__supervisor` subcommand. Many clients may start it at once; the
// supervisor's start-up lock lets exactly one survive, and every client polls until the socket answers.
import { closeSync, existsSync, openSync, renameSync, statSync } from "node:fs";
import { SupervisorConnection } from "./connection.ts";
import { AwreplError } from "../core/errors.ts";
import { ensurePrivateDir, type HomeLayout } from "../settings/home.ts";
import { lockHolder } from "../supervisor/start_lock.ts";
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

async function startAndConnect(layout: HomeLayout, env: NodeJS.ProcessEnv): Promise<SupervisorConnection> {
  ensurePrivateDir(layout.home);
  let exited: number | null = null;
  if (!startInProgress(layout)) {
    const child = await spawnSupervisor(layout, env);
    child.once("exit", (code) => {
      exited = code ?? 1;
    });
  }
  const deadline = Date.now() + START_TIMEOUT_MS;
  let delay = 2;
  for (;;) {
    const conn = await SupervisorConnection.connect(layout);
    if (conn) return conn;
    // A starter that failed (not one that lost the race and exited 0) will not come back.
    if (exited !== null && exited !== 0) {
      throw new AwreplError("supervisor_unreachable", `The supervisor failed to start (exit ${exited}); see its log: ${layout.log}`);
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
function startInProgress(layout: HomeLayout): boolean {
  return lockHolder(layout.lock) !== null;
}

/** Starts the supervisor; node:child_process and node:url load only here, off the warm path. */
async function spawnSupervisor(layout: HomeLayout, env: NodeJS.ProcessEnv) {
  const [{ spawn }, { fileURLToPath }] = await Promise.all([import("node:child_process"), import("node:url")]);
  rotateLog(layout.log);
  const [cmd, ...args] = supervisorCommand(env, fileURLToPath);
  const log = openSync(layout.log, "a", 0o600);
  try {
    const child = spawn(cmd as string, args, {
      detached: true,
      stdio: ["ignore", log, log],
      cwd: layout.home,
      env: { ...env, AWREPL_HOME: layout.home },
      windowsHide: true,
    });
    child.on("error", () => {}); // reported through the poll's timeout, naming the log
    child.unref();
    return child;
  } finally {
    closeSync(log);
  }
}

function rotateLog(log: string): void {
  try {
    if (statSync(log).size > LOG_ROTATE_BYTES) renameSync(log, `${log}.1`);
  } catch {
    // no log yet
  }
}

/**
 * The command that runs this program's supervisor: the compiled executable itself, or under Bun
 * from source `bun main.ts`, or under Node the built binary next to the sources. AWREPL_BIN
 * overrides it (a library user under Node pointing at an installed awrepl).
 */
export function supervisorCommand(env: NodeJS.ProcessEnv, fileURLToPath: (url: URL) => string): string[] {
  if (env.AWREPL_BIN) return [env.AWREPL_BIN, SUPERVISOR_SUBCOMMAND];
  const here = import.meta.url;
  if (isCompiled()) return [process.execPath, SUPERVISOR_SUBCOMMAND];
  if (typeof Bun !== "undefined") return [process.execPath, fileURLToPath(new URL("../../main.ts", here)), SUPERVISOR_SUBCOMMAND];
  const built = fileURLToPath(new URL("../../dist/awrepl", here));
  if (existsSync(built)) return [built, SUPERVISOR_SUBCOMMAND];
  throw new AwreplError("supervisor_unreachable", "Cannot find the awrepl executable to start the supervisor; set AWREPL_BIN");
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
