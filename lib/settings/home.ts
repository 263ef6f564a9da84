// The state directory and where everything in it lives: socket, supervisor log, start-up lock, runtime
// cache, snapshots, history, display files.
// AWREPL_HOME overrides it; otherwise $XDG_STATE_HOME/awrepl or ~/.local/state/awrepl (LOCALAPPDATA on
// Windows). It is created 0700 because the socket inside it must not be reachable by other users.
import { chmodSync, mkdirSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AWREPL_HOME) return env.AWREPL_HOME;
  if (process.platform === "win32") return join(env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local"), "awrepl");
  return join(env.XDG_STATE_HOME ?? join(homedir(), ".local", "state"), "awrepl");
}

/** Creates `dir` (and parents) if needed and makes sure it is private (0700). Returns `dir`. */
export function ensurePrivateDir(dir: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (process.platform !== "win32" && (statSync(dir).mode & 0o077) !== 0) chmodSync(dir, 0o700);
  return dir;
}

/** The state directory, created and private. */
export function ensureStateDir(env: NodeJS.ProcessEnv = process.env): string {
  return ensurePrivateDir(stateDir(env));
}

/** Longest Unix socket path we bind (sun_path is 104 bytes on macOS, 108 on Linux, including the NUL). */
const MAX_SOCKET_PATH = 100;

/** A 64-bit FNV-1a hash in hex: identical in every process, no crypto module to load on the hot path. */
export function shortHash(text: string): string {
  let h = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(text)) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, "0");
}

/**
 * The socket for a state directory: `<home>/supervisor.sock`, or when that is too long for the
 * platform a short path under /tmp/awrepl-<uid>/ derived from the home, so client and supervisor
 * agree without talking. On Windows, a named pipe named after the home.
 */
export function socketPath(home: string): string {
  if (process.platform === "win32") return `\\\\.\\pipe\\awrepl-${shortHash(home.toLowerCase())}`;
  const preferred = join(home, "supervisor.sock");
  if (Buffer.byteLength(preferred) <= MAX_SOCKET_PATH) return preferred;
  return join(shortSocketDir(), `${shortHash(home)}.sock`);
}

/** The directory for fallback socket paths (created 0700 by the supervisor before binding). */
export function shortSocketDir(): string {
  const uid = typeof process.getuid === "function" ? process.getuid() : 0;
  return `/tmp/awrepl-${uid}`;
}

/** Where everything in a state directory lives; resolved once per command and passed down. */
export type HomeLayout = {
  home: string;
  socket: string;
  log: string;
  lock: string;
};

export function homeLayout(home: string): HomeLayout {
  return {
    home,
    socket: socketPath(home),
    log: join(home, "supervisor.log"),
    lock: join(home, "supervisor.lock"),
  };
}

/** Options every client call takes: which state directory (tests point at their own). */
export type ClientOptions = {
  /** Environment to resolve AWREPL_HOME from and to start the supervisor with. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** State directory; overrides `env`. */
  home?: string;
  /** The state directory's layout, already resolved (a command resolves it once); overrides both. */
  layout?: HomeLayout;
};

/** Absolute: the supervisor runs in another directory, so a relative AWREPL_HOME must not reach it. */
export function resolveHome(options: ClientOptions = {}): string {
  return options.layout?.home ?? resolve(options.home ?? stateDir(options.env ?? process.env));
}

/** The layout `options` name: the one given, or the one of the state directory they resolve to. */
export function layoutOf(options: ClientOptions = {}): HomeLayout {
  return options.layout ?? homeLayout(resolveHome(options));
}
