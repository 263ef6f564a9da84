// The `--sandbox` launch (Linux): the bubblewrap command line a sandboxed worker starts under, and the
// environment bwrap itself is spawned with. Loaded with `await import()` only for a sandboxed session.
// Measured reasons for every part: /work/notes/sandbox-remote.md §2 (summarised beside each part below).
//
// The default profile: no network; new pid, ipc, uts, cgroup and user namespaces; no capabilities and
// no nested user namespaces; a new session; it dies with its parent. `/` read-only; a fresh /dev and
// /proc; private empty /tmp, /var/tmp, /run and $HOME; /root, /home and other secret directories
// empty and read-only; secret files (/etc/shadow, ssh host keys) unreadable. The interpreter's
// prefixes re-bound read-only when a hidden directory holds them (pyenv under ~); the runtime's cached
// bytecode bound read-only at /run/awrepl/. The cwd (and extra writable paths) writable, with the
// credential stores inside them hidden again and the files that run code later outside the sandbox
// (git hooks, shell rc files) kept read-only. The environment: an allowlist plus `env` opt-ins.
//
// Values of the environment are NEVER put on bwrap's command line (a command line is world-readable
// in `ps`, and /proc/1/cmdline inside): bwrap is spawned with exactly the sandbox's environment,
// because the sandbox can read /proc/1/environ, which is bwrap's own (its pid-1 reaper is forked
// before --clearenv would apply), so no --clearenv/--setenv at all.
//
// Other platforms are refused: macOS's sandbox-exec is deprecated and not supported yet.
import { accessSync, constants, existsSync, lstatSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, delimiter, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { AwreplError } from "../core/errors.ts";
import type { SandboxProfile } from "../protocol/api.ts";

export type SandboxContext = {
  /** The session's working directory (made writable). */
  cwd: string;
  /** The caller's environment: the sandbox's is taken from it. */
  env: NodeJS.ProcessEnv;
  /** Directories the interpreter needs (its prefixes and site dirs: interpreter.ts's probe). */
  interpreterPaths: string[];
  /** The runtime file to bind read-only (the cached .pyc, or the .py). */
  runtimeFile: string;
  /** Where bwrap is (default: found on PATH). */
  bwrap?: string;
};

export type SandboxLaunch = {
  /** bwrap and its options, ending in `--`: the interpreter's argv follows. */
  prefix: string[];
  /** Where runtimeFile appears inside the sandbox. */
  runtimePath: string;
  /** The environment to spawn bwrap with, which is also the sandbox's. */
  env: Record<string, string>;
};

/** Names passed when set: none of them carries a credential. */
const ENV_ALLOW = ["PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "NO_COLOR", "VIRTUAL_ENV"];
const ENV_ALLOW_PREFIX = ["LC_", "PYTHON"];

/** Shown empty (a private tmpfs each): where credentials, sockets and other users' files live. */
const HIDDEN_DIRS = ["/root", "/home", "/run", "/tmp", "/var/tmp", "/etc/ssl/private", "/var/lib/sss/db", "/var/spool/cron", "/var/mail", "/var/lib/docker", "/var/lib/containers"];
/** These stay writable (private, gone with the sandbox: tools write caches and temp files there). */
const WRITABLE_HIDDEN = ["/tmp", "/var/tmp", "/run"];
/** Unreadable (/dev/null bound over them; binds are nodev, so they read as EACCES). `*` only in the last part. */
const HIDDEN_FILES = ["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd", "/etc/ssh/ssh_host_*_key"];
/** Inside a writable directory (the cwd may be $HOME): credential stores hidden again. */
const SECRET_DIRS_IN_WRITABLE = [".ssh", ".aws", ".azure", ".config", ".gnupg", ".docker", ".kube", ".gcloud", ".password-store", ".local/share/keyrings", ".terraform.d"];
const SECRET_FILES_IN_WRITABLE = [".netrc", ".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".terraformrc", ".bash_history", ".zsh_history", ".python_history", ".Xauthority"];
/** Inside a writable directory: files that run code later, outside the sandbox, kept read-only. */
const READ_ONLY_IN_WRITABLE = [".git/hooks", ".git/config", ".gitmodules", ".gitconfig", ".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zprofile", ".zshenv", ".envrc", ".vscode", ".idea", ".mcp.json", "awrepl.jsonc", ".python-version", ".tool-versions"];

/** Where the runtime file is bound inside (/run is a private tmpfs there: the mount point costs nothing). */
export const RUNTIME_DIR_INSIDE = "/run/awrepl";

const INSTALL_HINT = "install it with your package manager (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap)";

/** The bwrap to use, or an error that says how to get one (and that only Linux is supported). */
export function findBwrap(env: NodeJS.ProcessEnv = process.env): string {
  if (bwrapMemo && bwrapMemo.path === env.PATH && isExecutable(bwrapMemo.bwrap)) return bwrapMemo.bwrap;
  const bwrap = lookUpBwrap(env);
  bwrapMemo = { path: env.PATH, bwrap };
  return bwrap;
}

let bwrapMemo: { path: string | undefined; bwrap: string } | null = null;

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function lookUpBwrap(env: NodeJS.ProcessEnv): string {
  if (process.platform !== "linux") {
    throw new AwreplError("usage", `The sandbox needs Linux and bubblewrap; it is not available on ${process.platform} (macOS sandbox-exec is not supported)`);
  }
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const path = join(dir, "bwrap");
    if (isExecutable(path)) return path;
  }
  throw new AwreplError("no_interpreter", `The sandbox needs bubblewrap, and bwrap is not on PATH: ${INSTALL_HINT}`);
}

/** The sandbox's environment: the allowlist, the opt-ins, and TMPDIR=/tmp (the private one). */
export function sandboxEnv(env: NodeJS.ProcessEnv, optIn: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (ENV_ALLOW.includes(name) || ENV_ALLOW_PREFIX.some((p) => name.startsWith(p)) || optIn.includes(name)) out[name] = value;
  }
  out.TMPDIR = "/tmp";
  return out;
}

/** Checks a profile's shape (it may come from a config file or another process): a clear error naming the bad value. */
export function checkProfile(profile: SandboxProfile): void {
  if (typeof profile !== "object" || profile === null || Array.isArray(profile)) throw new AwreplError("usage", `The sandbox profile must be an object, not ${JSON.stringify(profile)}`);
  if (profile.network !== undefined && typeof profile.network !== "boolean") throw new AwreplError("usage", `The sandbox's network setting must be true or false, not ${JSON.stringify(profile.network)}`);
  for (const key of ["writable", "env"] as const) {
    const list = profile[key];
    if (list !== undefined && (!Array.isArray(list) || list.some((v) => typeof v !== "string" || v === ""))) {
      throw new AwreplError("usage", `The sandbox's ${key} list must hold non-empty strings, not ${JSON.stringify(list)}`);
    }
  }
  for (const name of profile.env ?? []) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new AwreplError("usage", `--env takes an environment variable's name, not ${JSON.stringify(name)}`);
  }
}

/** The bwrap command line (ending in `--`) and environment for one sandboxed worker. */
export function sandboxLaunch(profile: SandboxProfile, ctx: SandboxContext): SandboxLaunch {
  checkProfile(profile);
  const bwrap = ctx.bwrap ?? findBwrap(ctx.env);
  // realpath first: a symlinked cwd would otherwise bind its target under the link's name.
  const cwd = real(ctx.cwd);
  if (!cwd || !isDir(cwd)) throw new AwreplError("usage", `The sandbox's working directory ${ctx.cwd} does not exist`);
  if (cwd === "/") throw new AwreplError("usage", "The sandbox's working directory cannot be / (it would make the whole filesystem writable)");
  const home = ctx.env.HOME && isAbsolute(ctx.env.HOME) ? (real(ctx.env.HOME) ?? ctx.env.HOME) : null;
  const a: string[] = [bwrap];
  // Namespaces: net, pid, ipc, uts, cgroup and user in one flag (--share-net after it keeps the
  // network). --unshare-user also for root: a root caller's sandbox is otherwise real root
  // (measured: CapEff 1fffeffffff). --disable-userns: no nested user namespace inside, so no second
  // chance at capabilities over the mounts (bwrap >= 0.8).
  a.push("--unshare-all", ...(profile.network ? ["--share-net"] : []), "--unshare-user", "--disable-userns");
  // No capabilities (bwrap keeps them all for a root caller); a new session (no TIOCSTI into the
  // caller's terminal; it also makes the runtime no group leader: it calls setpgid itself); dies with
  // the supervisor, and its death ends pid 1 of the namespace, hence everything in it.
  a.push("--cap-drop", "ALL", "--new-session", "--die-with-parent");
  // Read-only root (writes fail with EROFS); a fresh /dev (with a writable /dev/shm: multiprocessing
  // works) and the new pid namespace's /proc (the sandbox sees its own processes only).
  a.push("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc");
  // Hidden directories: an empty private tmpfs each. /run, /tmp, /var/tmp must be hidden, not only
  // read-only: a unix socket on a read-only mount still accepts connections (docker.sock, dbus,
  // ssh-agent). /tmp, /var/tmp, /run and $HOME stay writable (private, gone with the sandbox); the
  // others are made read-only at the end, once the mount points of the binds below them exist
  // (--remount-ro is not recursive).
  const hidden: string[] = [];
  const readOnlyLater: string[] = [];
  const system = systemPaths();
  for (const dir of system.hiddenDirs) {
    if (hidden.some((h) => under(dir, h))) continue;
    a.push("--tmpfs", dir);
    hidden.push(dir);
    if (!WRITABLE_HIDDEN.includes(dir) && dir !== home) readOnlyLater.push(dir);
  }
  if (home && home !== "/" && !hidden.includes(home)) {
    a.push("--tmpfs", home); // /home/alice under the read-only /home, or a home elsewhere
    hidden.push(home);
  }
  // Secret files root could read otherwise (uid 0 inside is uid 0 to file permissions).
  for (const file of system.hiddenFiles) a.push("--ro-bind", "/dev/null", file);
  // DNS with the network: /etc/resolv.conf may point into the hidden /run (systemd-resolved).
  if (profile.network) {
    const resolvConf = system.resolvConf;
    if (resolvConf && hidden.some((h) => under(resolvConf, h))) a.push("--ro-bind", resolvConf, resolvConf);
  }
  // The interpreter, when a hidden directory holds it (pyenv under /root, a venv under /home).
  const exposed: string[] = [];
  for (const path of ctx.interpreterPaths) {
    const r = real(path);
    if (!r || !hidden.some((h) => under(r, h)) || under(r, cwd) || exposed.some((e) => under(r, e))) continue;
    exposed.push(r);
    a.push("--ro-bind", r, r);
    const given = resolve(path);
    if (given !== r && hidden.some((h) => under(given, h))) a.push("--symlink", r, given);
  }
  // The runtime's bytecode, compiled outside with the same interpreter: sending the source over
  // stdin instead costs a compile (+20-40 ms) on every start. One file, not its directory (which holds
  // the interpreter cache) nor the state directory (other sessions' snapshots).
  const runtimePath = `${RUNTIME_DIR_INSIDE}/${basename(ctx.runtimeFile)}`;
  a.push("--ro-bind", ctx.runtimeFile, runtimePath);
  // Writable: the cwd and the extra paths, bound after the tmpfs mounts (so even inside a hidden
  // directory); then, inside them, credential stores hidden again and code-running files read-only.
  // Existing ones only: bwrap creates missing mount points, which would leave empty files behind.
  const writable = [cwd];
  for (const w of profile.writable ?? []) {
    const r = real(w);
    if (!r) throw new AwreplError("usage", `The sandbox's writable path ${w} does not exist`);
    if (r === "/") throw new AwreplError("usage", "The sandbox cannot make / writable");
    if (!writable.includes(r)) writable.push(r);
  }
  for (const w of writable) a.push("--bind", w, w);
  for (const w of writable) {
    if (!isDir(w)) continue;
    for (const d of SECRET_DIRS_IN_WRITABLE) {
      const p = join(w, d);
      if (entryAt(p) === "dir") {
        a.push("--tmpfs", p);
        readOnlyLater.push(p);
      }
    }
    for (const f of SECRET_FILES_IN_WRITABLE) {
      const p = join(w, f);
      if (entryAt(p) === "file") a.push("--ro-bind", "/dev/null", p);
    }
    for (const f of READ_ONLY_IN_WRITABLE) {
      const p = join(w, f);
      const entry = entryAt(p);
      if (entry !== null && entry !== "link") a.push("--ro-bind", p, p);
    }
  }
  for (const d of readOnlyLater) a.push("--remount-ro", d);
  a.push("--chdir", cwd, "--");
  return { prefix: a, runtimePath, env: sandboxEnv(ctx.env, profile.env) };
}

/**
 * What exists of the system-wide hidden paths. They change about never (a new ssh host key), yet a
 * sandboxed session's start looks them up to compare its spare's command line: a few seconds' memory
 * saves most of that start's file system calls (the cwd's own secrets are always looked up afresh).
 */
const SYSTEM_PATHS_TTL_MS = 5_000;
let systemMemo: { at: number; hiddenDirs: string[]; hiddenFiles: string[]; resolvConf: string | null } | null = null;

function systemPaths(): NonNullable<typeof systemMemo> {
  const now = Date.now();
  if (systemMemo && now - systemMemo.at < SYSTEM_PATHS_TTL_MS) return systemMemo;
  systemMemo = { at: now, hiddenDirs: HIDDEN_DIRS.filter((d) => existsSync(d)), hiddenFiles: HIDDEN_FILES.flatMap(expandGlob), resolvConf: real("/etc/resolv.conf") };
  return systemMemo;
}

function under(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);
}

function real(path: string): string | null {
  try {
    return lstatSync(path, { throwIfNoEntry: false }) ? realpathSync(path) : null; // a missing path: no exception
  } catch {
    return null;
  }
}

function expandGlob(pattern: string): string[] {
  if (!pattern.includes("*")) return existsSync(pattern) ? [pattern] : [];
  const dir = dirname(pattern);
  const re = new RegExp(`^${basename(pattern).split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join("[^/]*")}$`);
  try {
    return readdirSync(dir).filter((n) => re.test(n)).map((n) => join(dir, n));
  } catch {
    return [];
  }
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** What is at `p` itself (a link is not followed), or null when nothing is. */
function entryAt(p: string): "dir" | "file" | "link" | "other" | null {
  try {
    // No exception for a missing path: most of the ~40 looked up per start are missing.
    const st = lstatSync(p, { throwIfNoEntry: false });
    if (!st) return null;
    return st.isSymbolicLink() ? "link" : st.isDirectory() ? "dir" : st.isFile() ? "file" : "other";
  } catch {
    return null; // not a directory on the way (ENOTDIR), no permission
  }
}
