// The state directory and where everything in it lives: socket, supervisor log, start-up lock, runtime
// cache, snapshots, history, display files.
// AWREPL_HOME overrides it; otherwise $XDG_STATE_HOME/awrepl or ~/.local/state/awrepl (LOCALAPPDATA on
// Windows). It is created 0700 because the socket inside it must not be reachable by other users.
// Every command resolves it, so no node: module is imported here (lib/core/fastio.ts says why);
// node:fs is loaded only where a directory is made.
import { AwreplError } from "../core/errors.ts";
import { builtin, homeDir, joinPath as join, resolvePath as resolve } from "../core/fastio.ts";

export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AWREPL_HOME) return env.AWREPL_HOME;
  if (process.platform === "win32") return join(env.LOCALAPPDATA ?? join(homeDir(), "AppData", "Local"), "awrepl");
  return join(env.XDG_STATE_HOME ?? join(homeDir(), ".local", "state"), "awrepl");
}

/**
 * Creates `dir` (and its parents) private (0700) if it does not exist, and returns it. An existing
 * directory is used if nobody else can change what is in it: a real directory (not a symbolic link),
 * owned by this user, that no group or other user can write (`mkdir -p` makes 0755: that is fine;
 * what awrepl puts inside is 0700/0600, and the socket is bound in a private directory of its own
 * before it is renamed into place, 0600). Anything else (AWREPL_HOME pointing at /tmp, at a directory
 * of another user's, at a link, at one others may write) is refused with a clear error and never
 * changed: awrepl does not chmod what it did not create.
 */
export function ensurePrivateDir(dir: string): string {
  const { mkdirSync } = builtin("node:fs");
  try {
    mkdirSync(dir, { mode: 0o700 });
    return dir;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      return dir;
    }
    if (code !== "EEXIST") throw err;
  }
  const problem = privateDirProblem(dir);
  if (problem) throw new AwreplError("usage", `Directory ${dir} ${problem}`);
  return dir;
}

/** Why an existing `dir` is not a private directory of this user's, or null when it is. */
export function privateDirProblem(dir: string): string | null {
  if (process.platform === "win32") return null;
  const st = builtin("node:fs").lstatSync(dir);
  if (st.isSymbolicLink()) return "is a symbolic link: awrepl keeps its socket and snapshots only in a real directory of its own (point AWREPL_HOME at one)";
  if (!st.isDirectory()) return "is not a directory";
  const uid = typeof process.getuid === "function" ? process.getuid() : st.uid;
  if (st.uid !== uid) return `belongs to uid ${st.uid}, not to you (uid ${uid}): awrepl does not use or change it (point AWREPL_HOME at a directory of your own)`;
  // Others may list it (0755), but never add, remove or rename what is in it.
  if ((st.mode & 0o022) !== 0) {
    const mode = (st.mode & 0o7777).toString(8).padStart(4, "0");
    return `can be written by other users (mode ${mode}): awrepl keeps its socket and snapshots there, so nobody else may change what is in it; run \`chmod go-w ${dir}\` (or \`chmod 700 ${dir}\`) or point AWREPL_HOME at a new directory`;
  }
  return null;
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
