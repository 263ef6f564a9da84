// Which Python a worker runs, in the README's order (docs/architecture.md, "Where each rule lives"): --python CMD, AWREPL_PYTHON, the config file,
// $VIRTUAL_ENV/bin/python, ./.venv/bin/python, python3, python. A local interpreter is resolved to its
// real executable once (a pyenv shim is a shell script costing ~160 ms per spawn): the interpreter is
// asked for sys.executable and the answer is cached in the state directory, keyed by the command's
// file, its mtime and size (and, for a shim script, the directory and PYENV_VERSION it resolves in).
// Any other command line (`ssh host python3`, `docker exec -i box python3`) is remote: the runtime's
// source goes over its stdin.
import { execFile } from "node:child_process";
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from "node:fs";
import { readHead, writeFileAtomic } from "../core/files.ts";
import { basename, delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { AwreplError } from "../core/errors.ts";
import { ensurePrivateDir } from "../settings/home.ts";
import { passedOver, sandboxWrittenRoot } from "../settings/sandbox_written.ts";

export type Interpreter = {
  /** The command line as given (or as found). */
  command: string;
  /** The command line split into words. */
  argv: string[];
  /** True when argv[0] is a Python interpreter on this machine; false for ssh/docker/kubectl wrappers. */
  local: boolean;
  /** Local only: the real interpreter (sys.executable), the version and the bytecode tag. */
  executable?: string;
  version?: string;
  cacheTag?: string;
  /** Local only: the directories it needs (prefixes, site dirs): bound into a sandbox that hides their parents. */
  paths?: string[];
  /** Where the command came from: "option", "AWREPL_PYTHON", "config", "VIRTUAL_ENV", ".venv", "PATH". */
  source: string;
  /** What was passed over on the way and why (a candidate a sandbox could have planted): for the user. */
  notices?: string[];
};

export type ResolveOptions = {
  /** --python / SessionOptions.python. */
  python?: string;
  /** The config file's `python`. */
  configPython?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** State directory for the resolution cache; without it nothing is cached on disk. */
  home?: string;
};

/**
 * Splits a command line into words with simple POSIX-like rules: whitespace separates, '...' is
 * literal, "..." allows \" \\ \$ \` escapes, a backslash outside quotes escapes the next character.
 */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let i = 0;
  while (i < line.length) {
    const c = line[i] as string;
    if (c === " " || c === "\t" || c === "\n") {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      i++;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new AwreplError("usage", `Unterminated single quote in Python command ${JSON.stringify(line)}`);
      word += line.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      i++;
      for (;;) {
        if (i >= line.length) throw new AwreplError("usage", `Unterminated double quote in Python command ${JSON.stringify(line)}`);
        const d = line[i] as string;
        if (d === '"') break;
        if (d === "\\" && i + 1 < line.length && '"\\$`'.includes(line[i + 1] as string)) {
          word += line[i + 1];
          i += 2;
        } else {
          word += d;
          i++;
        }
      }
      inWord = true;
      i++;
    } else if (c === "\\" && i + 1 < line.length) {
      word += line[i + 1];
      inWord = true;
      i += 2;
    } else {
      word += c;
      inWord = true;
      i++;
    }
  }
  if (inWord) words.push(word);
  if (words.length === 0) throw new AwreplError("usage", "The Python command is empty");
  return words;
}

/** Quotes one word for a POSIX shell (used for commands like ssh that join their arguments). */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_\/.,:=@%+-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** `python`, `python3`, `python3.12`, `pypy3`, `python.exe`: names that are an interpreter themselves. */
export function looksLikePython(word: string): boolean {
  return /^(python|pypy)[0-9.]*(\.exe)?$/i.test(basename(word));
}

/** The file `name` runs as: a path (relative to cwd) when it has a slash, else the first match on PATH. */
export function findExecutable(name: string, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string | null {
  if (name.includes("/") || (process.platform === "win32" && name.includes("\\"))) {
    const path = isAbsolute(name) ? name : resolve(cwd, name);
    return isExecutableFile(path) ? path : null;
  }
  for (const path of executablesOnPath(name, env, cwd)) return path;
  return null;
}

/** Every match for `name` on PATH, in PATH's order. */
function* executablesOnPath(name: string, env: NodeJS.ProcessEnv, cwd: string): Generator<string> {
  const exts = process.platform === "win32" ? ["", ".exe", ".cmd", ".bat"] : [""];
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const path = join(isAbsolute(dir) ? dir : resolve(cwd, dir), name + ext);
      if (isExecutableFile(path)) yield path;
    }
  }
}

function isExecutableFile(path: string): boolean {
  try {
    const st = statSync(path);
    return st.isFile() && (process.platform === "win32" || (st.mode & 0o111) !== 0);
  } catch {
    return false;
  }
}

/**
 * The words of a command line; a value that names an existing executable file as a whole is one
 * path, spaces and all (`--python "/Users/First Last/.venv/bin/python"`).
 */
export function commandArgv(command: string, cwd: string = process.cwd()): string[] {
  const whole = command.trim();
  if (/[\\/]/.test(whole) && isExecutableFile(isAbsolute(whole) ? whole : resolve(cwd, whole))) return [whole];
  return splitCommandLine(command);
}

/**
 * The command line to use, in that order, with where it came from. A `$VIRTUAL_ENV`, a
 * `./.venv` or a PATH entry that lies where a sandboxed session could write (with `home`: the state
 * directory's record, lib/settings/sandbox_written.ts) is passed over, and `notices` says so: it may
 * have been planted, and the interpreter's own probe would run it outside any sandbox.
 */
export function chooseCommand(options: ResolveOptions = {}): { command: string; source: string; notices?: string[] } {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  if (options.python?.trim()) return { command: options.python, source: "option" };
  if (env.AWREPL_PYTHON?.trim()) return { command: env.AWREPL_PYTHON, source: "AWREPL_PYTHON" };
  if (options.configPython?.trim()) return { command: options.configPython, source: "config" };
  const notices: string[] = [];
  const chosen = (command: string, source: string) => (notices.length ? { command, source, notices } : { command, source });
  const planted = (what: string, path: string): boolean => {
    const root = options.home ? sandboxWrittenRoot(options.home, path) : null;
    if (root) notices.push(passedOver(what, root, "name it with --python (or AWREPL_PYTHON) if you trust it"));
    return root !== null;
  };
  const bin = process.platform === "win32" ? join("Scripts", "python.exe") : join("bin", "python");
  if (env.VIRTUAL_ENV) {
    const path = join(env.VIRTUAL_ENV, bin);
    if (isExecutableFile(path) && !planted(`$VIRTUAL_ENV's ${path}`, path)) return chosen(shellQuote(path), "VIRTUAL_ENV");
  }
  // Found paths are quoted: a project in "My Project" must not be split into a command line.
  const venv = resolve(cwd, ".venv", bin);
  if (isExecutableFile(venv) && !planted(venv, venv)) return chosen(shellQuote(venv), ".venv");
  for (const name of ["python3", "python"]) {
    for (const path of executablesOnPath(name, env, cwd)) {
      if (planted(path, path)) continue;
      // A shim (pyenv, asdf) picks its interpreter by the nearest version file: one planted chooses.
      const selector = isScript(path) ? nearestVersionSelector(cwd) : null;
      if (selector && planted(`${path} (it would follow ${selector})`, selector)) continue;
      return chosen(shellQuote(path), "PATH");
    }
  }
  throw new AwreplError(
    "no_interpreter",
    `No Python interpreter found: tried --python, AWREPL_PYTHON, the config file, $VIRTUAL_ENV, ./.venv, python3 and python on PATH${notices.length ? ` (${notices.join("; ")})` : ""}`,
  );
}

type Facts = { executable: string; version: string; cacheTag: string; paths: string[] };
const memo = new Map<string, Facts>();

/** Drops this process's memory of resolved interpreters (the file cache stays). For tests. */
export function forgetResolvedInterpreters(): void {
  memo.clear();
}

/** One run answers all: the real executable, the version, the bytecode tag, and the directories the
 * interpreter reads (prefixes, site dirs, the user site when enabled) for the sandbox's binds. */
// The cwd ('' on sys.path for -c) is dropped first: a planted ./json.py must not run in the probe.
const PROBE = "import sys;sys.path=[p for p in sys.path if p];import json,site;u=getattr(site,'getusersitepackages',lambda:None)();" +
  "p={sys.prefix,sys.base_prefix,sys.exec_prefix,getattr(sys,'base_exec_prefix',sys.exec_prefix)}|set(getattr(site,'getsitepackages',lambda:[])())|({u} if u and site.ENABLE_USER_SITE else set());" +
  "print(json.dumps({'executable':sys.executable,'version':'%d.%d.%d'%sys.version_info[:3],'cacheTag':sys.implementation.cache_tag,'paths':sorted(x for x in p if x)}))";

/** A cached answer of this build's probe (older caches lack `paths`: probed again once). */
function complete(facts: Facts | undefined): facts is Facts {
  return facts !== undefined && Array.isArray(facts.paths) && existsSync(facts.executable);
}

/** Resolves the interpreter: chooses the command, and for a local one finds its real executable (cached). */
export async function resolveInterpreter(options: ResolveOptions = {}): Promise<Interpreter> {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const { command, source, notices } = chooseCommand(options);
  const argv = commandArgv(command, cwd);
  const first = argv[0] as string;
  if (!looksLikePython(first)) return { command, argv, local: false, source, ...(notices ? { notices } : {}) };
  const file = findExecutable(first, env, cwd);
  if (!file) {
    throw new AwreplError("no_interpreter", `Python command ${JSON.stringify(first)} was not found (not an executable file, not on PATH)`);
  }
  const facts = await interpreterFacts(file, argv.slice(1), env, cwd, options.home);
  return { command, argv: [facts.executable, ...argv.slice(1)], local: true, ...facts, source, ...(notices ? { notices } : {}) };
}

/** How long creating a virtual environment may take (it copies pip in with ensurepip). */
const VENV_CREATE_TIMEOUT_MS = 120_000;

/**
 * The python of the virtual environment `dir` (absolute), as a command line: the directory is created
 * first when it holds no venv yet (`python -m venv dir`, run by the interpreter `creator` resolves to,
 * which must be local). A directory that exists and is something else is a usage error, never reused.
 */
export async function venvPython(dir: string, creator: ResolveOptions): Promise<string> {
  const bin = join(dir, process.platform === "win32" ? join("Scripts", "python.exe") : join("bin", "python"));
  if (isExecutableFile(bin)) return shellQuote(bin);
  if (existsSync(dir) && (!statSync(dir).isDirectory() || readdirSync(dir).length > 0)) {
    throw new AwreplError("usage", `--venv ${dir} exists and is not a virtual environment (no ${bin}); give an empty or new directory, or a venv`);
  }
  const base = await resolveInterpreter(creator);
  if (!base.local) throw new AwreplError("usage", `--venv ${dir} needs a local interpreter to create it with, not ${JSON.stringify(base.command)}`);
  const [file, ...flags] = base.argv as [string, ...string[]];
  await new Promise<void>((resolvePromise, reject) => {
    execFile(file, [...flags, "-m", "venv", dir], { env: creator.env ?? process.env, cwd: creator.cwd, timeout: VENV_CREATE_TIMEOUT_MS, encoding: "utf8" }, (err, _stdout, stderr) => {
      if (!err) return resolvePromise();
      const detail = (stderr || err.message).trim().split("\n").slice(-3).join(" ");
      reject(new AwreplError("no_interpreter", `Cannot create the virtual environment ${dir} with ${base.executable ?? file} -m venv: ${detail}`, { cause: err }));
    });
  });
  if (!isExecutableFile(bin)) throw new AwreplError("no_interpreter", `${base.executable ?? file} -m venv ${dir} made no ${bin}`);
  return shellQuote(bin);
}

async function interpreterFacts(file: string, flags: string[], env: NodeJS.ProcessEnv, cwd: string, home?: string): Promise<Facts> {
  const st = statSync(file);
  let key = `${file}\0${Math.trunc(st.mtimeMs)}\0${st.size}\0${flags.join(" ")}`;
  // A script (a pyenv shim) may pick a different interpreter per directory, per PYENV_VERSION, or
  // per the version files pyenv/asdf/mise read: all of them are part of the key.
  if (isScript(file)) key += `\0${cwd}\0${env.PYENV_VERSION ?? ""}\0${versionSelectors(file, cwd, env)}`;
  const hit = memo.get(key);
  if (complete(hit)) return hit;
  const cacheFile = home ? join(home, "runtime", "interpreters.json") : null;
  const cache = cacheFile ? readCache(cacheFile) : {};
  const cached = cache[key];
  if (complete(cached)) {
    memo.set(key, cached);
    return cached;
  }
  const facts = await probe(file, flags, env, cwd);
  memo.set(key, facts);
  if (cacheFile && home) {
    ensurePrivateDir(join(home, "runtime"));
    const fresh = readCache(cacheFile);
    fresh[key] = facts;
    writeFileAtomic(cacheFile, JSON.stringify(fresh));
  }
  return facts;
}

/**
 * What a version manager's shim reads to choose an interpreter: the nearest `.python-version` or
 * `.tool-versions` from cwd upwards, and pyenv's global `version` file. Their contents go into the
 * cache key, so `pyenv local 3.9` in a project is seen at once.
 */
export function versionSelectors(shim: string, cwd: string, env: NodeJS.ProcessEnv): string {
  const parts: string[] = [];
  const nearest = nearestVersionSelector(cwd);
  if (nearest) {
    const dir = dirname(nearest);
    parts.push(dir, ...[".python-version", ".tool-versions"].map((f) => readHead(join(dir, f))).filter((t) => t !== null));
  }
  const pyenvRoot = env.PYENV_ROOT ?? (basename(dirname(shim)) === "shims" ? dirname(dirname(shim)) : undefined);
  if (pyenvRoot) parts.push(readHead(join(pyenvRoot, "version")) ?? "");
  return parts.join("\0");
}

/** The nearest `.python-version` or `.tool-versions` from `cwd` upwards (the first of the two in the nearest directory), or null. */
function nearestVersionSelector(cwd: string): string | null {
  for (let dir = resolve(cwd);; dir = dirname(dir)) {
    for (const f of [".python-version", ".tool-versions"]) if (readHead(join(dir, f)) !== null) return join(dir, f);
    if (dirname(dir) === dir) return null;
  }
}

function isScript(file: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(file, "r");
    const head = Buffer.alloc(2);
    return readSync(fd, head, 0, 2, 0) === 2 && head.toString("latin1") === "#!";
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function readCache(path: string): Record<string, Facts> {
  try {
    const value = JSON.parse(readFileSync(path, "utf8"));
    return typeof value === "object" && value !== null ? value : {};
  } catch {
    return {};
  }
}

function probe(file: string, flags: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Facts> {
  return new Promise((resolvePromise, reject) => {
    execFile(file, [...flags, "-c", PROBE], { env, cwd, timeout: 30_000, encoding: "utf8" }, (err, stdout, stderr) => {
      if (err) {
        const detail = (stderr || err.message).trim().split("\n").slice(-3).join(" ");
        reject(new AwreplError("no_interpreter", `Python command ${JSON.stringify(file)} could not run: ${detail}`, { cause: err }));
        return;
      }
      try {
        const facts = JSON.parse(stdout.trim().split("\n").pop() ?? "") as Facts;
        if (typeof facts.executable !== "string" || !facts.executable) facts.executable = file;
        if (!Array.isArray(facts.paths)) facts.paths = [];
        resolvePromise(facts);
      } catch (cause) {
        reject(new AwreplError("no_interpreter", `Python command ${JSON.stringify(file)} did not answer like Python: ${stdout.slice(0, 200)}`, { cause }));
      }
    });
  });
}
