// The `--sandbox` launch (Linux): the bubblewrap command line a sandboxed worker starts under, and the
// environment bwrap itself is spawned with. Loaded with `await import()` only for a sandboxed session.
// The rule it keeps and the kernel facts it relies on: docs/sandbox.md (each part's reason beside it below).
//
// The default profile: no network; new pid, ipc, uts, cgroup and user namespaces; no capabilities and
// no nested user namespaces; a new session; it dies with its parent. `/` read-only; a fresh /dev and
// /proc; private empty /tmp, /var/tmp, /run and $HOME; /root, /home and other secret directories
// empty and read-only; secret files (/etc/shadow, ssh host keys) unreadable. The interpreter's
// prefixes re-bound read-only when a hidden directory holds them (pyenv under ~); the runtime's cached
// bytecode bound read-only at /run/awrepl/. The cwd (and extra writable paths) writable, with the
// credential stores inside them hidden again and the files that run code later outside the sandbox
// (git hooks, shell rc files) kept read-only, each a mount point of its own (so it cannot be renamed
// or replaced) with its parents pinned; awrepl's state directory hidden wherever it is. The
// environment: an allowlist plus `env` opt-ins.
//
// Values of the environment are NEVER put on bwrap's command line (a command line is world-readable
// in `ps`, and /proc/1/cmdline inside): bwrap is spawned with exactly the sandbox's environment,
// because the sandbox can read /proc/1/environ, which is bwrap's own (its pid-1 reaper is forked
// before --clearenv would apply), so no --clearenv/--setenv at all.
//
// Other platforms are refused: macOS's sandbox-exec is deprecated and not supported yet.
import { accessSync, constants, existsSync, lstatSync, mkdirSync, readdirSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { basename, delimiter, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { AwreplError } from "../core/errors.ts";
import { readHead } from "../core/files.ts";
import type { SandboxProfile } from "../protocol/api.ts";
import type { NetAllowList } from "../protocol/limits.ts";
import { parseAllowList } from "./net_allow.ts";
import { PROXY_SOCKET_INSIDE, proxyEnv } from "./net_forwarder.ts";

/** The profile with the allow list of hosts reached through awrepl's proxy (`--sandbox-allow`; docs/limits.md). */
export type AllowingProfile = SandboxProfile & { allow?: NetAllowList };

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
  /**
   * What awrepl owns outside the sandbox (the state directory, the socket's directory): hidden inside
   * it wherever they are, even under a writable path.
   */
  hide?: string[];
  /** The proxy's Unix socket (net_proxy.ts), bound in when the profile has an allow list. */
  proxySocket?: string;
};

export type SandboxLaunch = {
  /** bwrap and its options, ending in `--`: the interpreter's argv follows. */
  prefix: string[];
  /** Where runtimeFile appears inside the sandbox. */
  runtimePath: string;
  /** The environment to spawn bwrap with, which is also the sandbox's. */
  env: Record<string, string>;
  /** The writable directories (real paths): what a cell may have written (lib/settings/sandbox_written.ts). */
  writable: string[];
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
/**
 * Inside a writable directory: what other tools run code from later, outside the sandbox, kept
 * read-only. `.git` whole (hooks, config, config.worktree, commondir, info: any of them steers git).
 */
const READ_ONLY_IN_WRITABLE = [
  ".git",
  ".gitmodules",
  ".gitconfig",
  ".bashrc",
  ".bash_profile",
  ".bash_login",
  ".profile",
  ".bash_logout",
  ".zshrc",
  ".zprofile",
  ".zshenv",
  ".zlogin",
  ".envrc",
  ".vscode",
  ".idea",
  ".claude",
  ".devcontainer",
  ".mcp.json",
  "awrepl.jsonc",
  ".python-version",
  ".tool-versions",
  "mise.toml",
  ".mise.toml",
];
/**
 * Of those, the directories a cell must not create where they are missing, because the tool that reads
 * them runs what they say without asking again in a folder already trusted (git's hooks and config,
 * VS Code's tasks, Claude Code's hooks; direnv and mise ask for each new file): an empty read-only one is
 * mounted in their place (bwrap makes the empty directory on the host; an empty directory is inert to
 * git, editors and agents alike). It stays after the session: a mount point removed from outside is
 * unmounted in every sandbox still using it (Linux >= 3.18), so removing it could never be safe.
 */
const PLACEHOLDER_DIRS = [".git", ".vscode", ".claude"];
/** With `git: true`: `.git` writable, but these inside it still read-only (and `hooks` made when missing). */
const READ_ONLY_IN_GIT = ["hooks", "config", "config.worktree", "commondir"];

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
export function checkProfile(profile: AllowingProfile): void {
  if (typeof profile !== "object" || profile === null || Array.isArray(profile)) throw new AwreplError("usage", `The sandbox profile must be an object, not ${JSON.stringify(profile)}`);
  for (const key of ["network", "git", "home"] as const) {
    if (profile[key] !== undefined && typeof profile[key] !== "boolean") throw new AwreplError("usage", `The sandbox's ${key} setting must be true or false, not ${JSON.stringify(profile[key])}`);
  }
  for (const key of ["writable", "env"] as const) {
    const list = profile[key];
    if (list !== undefined && (!Array.isArray(list) || list.some((v) => typeof v !== "string" || v === ""))) {
      throw new AwreplError("usage", `The sandbox's ${key} list must hold non-empty strings, not ${JSON.stringify(list)}`);
    }
  }
  for (const name of profile.env ?? []) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new AwreplError("usage", `--env takes an environment variable's name, not ${JSON.stringify(name)}`);
  }
  if (profile.allow !== undefined) {
    parseAllowList(profile.allow);
    if (profile.network && profile.allow.length) {
      throw new AwreplError("usage", "The sandbox's allow list (--sandbox-allow) and the whole network (--sandbox-net) exclude each other: the allow list only means something without the network");
    }
  }
}

/** The bwrap command line (ending in `--`) and environment for one sandboxed worker. */
export function sandboxLaunch(profile: AllowingProfile, ctx: SandboxContext): SandboxLaunch {
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
  // The allow list's proxy: its socket (outside, in the hidden socket directory) bound in; the
  // forwarder launch.ts puts in front of the runtime makes it 127.0.0.1:3128 on the sandbox's loopback.
  const proxied = Boolean(profile.allow?.length && ctx.proxySocket);
  if (proxied) a.push("--ro-bind", ctx.proxySocket as string, PROXY_SOCKET_INSIDE); // a socket on a read-only mount still connects
  // Writable: the cwd and the extra paths, bound after the tmpfs mounts (so even inside a hidden
  // directory); then, inside them, awrepl's own state hidden, credential stores hidden again and
  // code-running files read-only (writableView below).
  const writable = [cwd];
  for (const w of profile.writable ?? []) {
    const r = real(w);
    if (!r) throw new AwreplError("usage", `The sandbox's writable path ${w} does not exist`);
    if (r === "/") throw new AwreplError("usage", "The sandbox cannot make / writable");
    if (!writable.includes(r)) writable.push(r);
  }
  const owned = ownedPaths(ctx.hide ?? [], writable);
  checkWritable(writable, owned, home, profile);
  for (const w of writable) a.push("--bind", w, w);
  const view = writableView(writable, profile);
  // awrepl's state: hidden wherever it is visible (under a writable path, or on the read-only root);
  // under a hidden directory and no writable path it is out of sight already.
  for (const h of owned) {
    const root = writable.find((w) => under(h, w));
    if (!root && hidden.some((d) => under(h, d))) continue;
    if (root) view.pins.push(...ancestorsBetween(root, h));
    view.mounts.push(["--tmpfs", h]);
    readOnlyLater.push(h);
  }
  // Pins first, shallowest first: each is a bind of the host's directory, which would cover a mount
  // made below it earlier. A mount point cannot be renamed or removed (EBUSY), so a protected path's
  // parents, pinned, cannot be moved away with the protection and replaced by a planted copy.
  for (const p of [...new Set(view.pins)].sort((x, y) => x.split(sep).length - y.split(sep).length)) a.push("--bind", p, p);
  for (const m of view.mounts) a.push(...m);
  readOnlyLater.push(...view.readOnly);
  for (const d of readOnlyLater) a.push("--remount-ro", d);
  a.push("--chdir", cwd, "--");
  // What network the worker has, for its messages (the runtime's %pip says why a download failed; it takes the variable out of its environment).
  const network = profile.network ? "full" : proxied ? "allow" : "none";
  return { prefix: a, runtimePath, env: { ...sandboxEnv(ctx.env, profile.env), ...(proxied ? proxyEnv() : {}), AWREPL_SANDBOX_NETWORK: network }, writable };
}

/**
 * awrepl's own paths to hide, as real paths. One that does not exist needs no hiding where the sandbox
 * cannot write (bwrap could not even make its mount point there); under a writable path it is made
 * (0700) first, so that a cell cannot create it and plant a config or snapshots in it.
 */
function ownedPaths(hide: string[], writable: string[]): string[] {
  const out: string[] = [];
  for (const h of hide) {
    const abs = resolve(h);
    let r = real(abs);
    if (!r) {
      if (!writable.some((w) => under(abs, w))) continue;
      mkdirSync(abs, { recursive: true, mode: 0o700 });
      r = real(abs) ?? abs;
    }
    if (!out.includes(r)) out.push(r);
  }
  return out;
}

/**
 * Writable paths the sandbox refuses: one inside awrepl's own state; one that is a protected entry of
 * another (`--sandbox-write .git`: `git: true` is the way); the home directory or one holding it,
 * unless `home: true` (a home has more places that run code later than any list can name).
 */
function checkWritable(writable: string[], owned: string[], home: string | null, profile: SandboxProfile): void {
  for (const w of writable) {
    const inside = owned.find((o) => under(w, o));
    if (inside) throw new AwreplError("usage", `The sandbox cannot make ${w} writable: it is inside awrepl's own state (${inside})`);
    for (const root of writable) {
      if (root === w || !under(w, root)) continue;
      const names = [...READ_ONLY_IN_WRITABLE.filter((n) => n !== ".git" || !profile.git), ...SECRET_DIRS_IN_WRITABLE, ...SECRET_FILES_IN_WRITABLE];
      const taken = names.map((n) => join(root, n)).find((p) => under(w, p));
      if (taken) {
        const hint = taken === join(root, ".git") ? "; --sandbox-git makes .git writable" : "";
        throw new AwreplError("usage", `The sandbox cannot make ${w} writable: ${taken} is protected in the sandbox (code or credentials there are used outside it later)${hint}`);
      }
    }
    if (home && under(home, w) && !profile.home) {
      throw new AwreplError(
        "usage",
        `The sandbox will not make ${w} writable: it ${
          w === home ? "is" : "holds"
        } your home directory, where a file the code creates (a shell rc file, a program in ~/.local/bin, a config) may run later as you. Run the session in a project directory (--cwd, or cd there), or pass --sandbox-home to allow it`,
      );
    }
  }
}

type WritableView = { pins: string[]; mounts: string[][]; readOnly: string[] };

/** The mounts that protect what lies inside the writable paths, and the parents to pin for them. */
function writableView(writable: string[], profile: SandboxProfile): WritableView {
  const view: WritableView = { pins: [], mounts: [], readOnly: [] };
  for (const w of writable) {
    if (!isDir(w)) continue;
    for (const d of SECRET_DIRS_IN_WRITABLE) {
      const p = protectedEntry(w, d);
      if (p !== "dir") continue;
      view.pins.push(...ancestorsBetween(w, join(w, d)));
      view.mounts.push(["--tmpfs", join(w, d)]);
      view.readOnly.push(join(w, d));
    }
    for (const f of SECRET_FILES_IN_WRITABLE) {
      if (protectedEntry(w, f) !== null) view.mounts.push(["--ro-bind", "/dev/null", join(w, f)]);
    }
    for (const name of READ_ONLY_IN_WRITABLE) {
      const p = join(w, name);
      const entry = protectedEntry(w, name);
      if (name === ".git" && profile.git) {
        if (entry === "dir") gitWritable(p, view);
        else if (entry !== null) view.mounts.push(["--ro-bind", p, p]); // a gitfile: where the repository is
        continue;
      }
      if (entry === null) {
        if (PLACEHOLDER_DIRS.includes(name)) {
          view.mounts.push(["--tmpfs", p]);
          view.readOnly.push(p);
        }
        continue;
      }
      view.mounts.push(["--ro-bind", p, p]);
      if (name === ".git" && entry === "file") gitdirOfFile(p, writable, view);
    }
  }
  return view;
}

/** `git: true`: `.git` writable, pinned (so it cannot be renamed away), its hooks and config read-only. */
function gitWritable(git: string, view: WritableView): void {
  view.pins.push(git);
  for (const name of READ_ONLY_IN_GIT) {
    const p = join(git, name);
    const entry = entryAt(p);
    if (entry === "link") throw linkError(p);
    if (entry !== null) view.mounts.push(["--ro-bind", p, p]);
    else if (name === "hooks") {
      view.mounts.push(["--tmpfs", p]);
      view.readOnly.push(p);
    }
  }
}

/** A `.git` file (a worktree, a submodule) names the repository: read-only too when a writable path holds it. */
function gitdirOfFile(file: string, writable: string[], view: WritableView): void {
  // Unreadable or malformed: git cannot use it either.
  const m = /^gitdir:\s*(.+?)\s*$/m.exec(readHead(file) ?? "");
  const target = m?.[1] ? real(resolve(dirname(file), m[1])) : null;
  if (!target) return;
  protectRepository(target, writable, view);
  // A worktree's gitdir names the main repository in `commondir`: its config and hooks are the ones git runs.
  const common = /^(.+?)\s*$/.exec(readHead(join(target, "commondir")) ?? "")?.[1];
  if (common) {
    const r = real(resolve(target, common));
    if (r) protectRepository(r, writable, view);
  }
}

function protectRepository(gitdir: string, writable: string[], view: WritableView): void {
  const root = writable.find((w) => under(gitdir, w));
  if (!root || gitdir === root) return;
  view.pins.push(...ancestorsBetween(root, gitdir));
  view.mounts.push(["--ro-bind", gitdir, gitdir]);
}

/** The directories strictly between `root` and `path` (which lies under it). */
function ancestorsBetween(root: string, path: string): string[] {
  const out: string[] = [];
  for (let d = dirname(path); d !== root && under(d, root) && d !== dirname(d); d = dirname(d)) out.unshift(d);
  return out;
}

/**
 * What is at `root`/`rel` (a protected name), refusing a symbolic link on the way: a link in a
 * writable directory can be replaced by the cell, and a mount cannot be put on the link itself (it
 * would land on its target), so the name could not be protected.
 */
function protectedEntry(root: string, rel: string): "dir" | "file" | "other" | null {
  let p = root;
  for (const part of rel.split("/")) {
    p = join(p, part);
    const entry = entryAt(p);
    if (entry === "link") throw linkError(p);
    if (entry === null) return null;
    if (entry !== "dir" && p !== join(root, rel)) return null;
  }
  return entryAt(p) as "dir" | "file" | "other";
}

function linkError(p: string): AwreplError {
  let target = "?";
  try {
    target = readlinkSync(p);
  } catch {
    // gone meanwhile: the message still names the path
  }
  return new AwreplError(
    "usage",
    `The sandbox cannot protect ${p}: it is a symbolic link (to ${target}) in a writable directory, so the code could replace it with a file of its own that runs outside the sandbox later. Use a writable directory without it (another --cwd, or --sandbox-write a subdirectory), or replace the link with the file it points to`,
  );
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
