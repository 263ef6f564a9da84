// Defaults from JSON-with-comments files, in the order docs/architecture.md ("Where each rule lives") and the README fix:
// flags > environment > ./awrepl.jsonc (project) > $AWREPL_HOME/config.jsonc (user) > built-ins.
// This module reads the two files and the environment; flags are laid on top by the caller.
// Every command loads it, and most find no config file: node:fs, the JSONC parser and the trust
// records are loaded only when a file exists (each costs start-up time: lib/core/fastio.ts).
import type { ParseError } from "jsonc-parser";
import { AwreplError } from "../core/errors.ts";
import { builtin, fileExists, joinPath as join, resolvePath as resolve } from "../core/fastio.ts";
import { DEFAULTS, FIGURE_FORMATS, type FigureFormat, limitProblem, NUMBER_KEYS, parseCount } from "../core/limits.ts";
import { ENV_VAR_NAME } from "../core/names.ts";
import type { SandboxProfile } from "../protocol/api.ts";
import type { ResourceLimits } from "../protocol/limits.ts";
import { parseSize } from "../core/units.ts";
import { stateDir } from "./home.ts";

export type Config = {
  /** Per-cell timeout in ms; 0 = none. */
  timeoutMs: number;
  /** Output cap per cell (stdout+stderr, UTF-8 bytes). */
  maxOutputBytes: number;
  /** Grace period between the deadline's interrupt and the kill. */
  graceMs: number;
  /** Interpreter command line; undefined = resolve in the interpreter order (lib/worker/interpreter.ts). */
  python?: string;
  /** A virtual environment new sessions run in (created on first use); a relative one is the config file's directory's. */
  venv?: string;
  /** The supervisor exits after this long with no sessions; 0 = never. */
  idleExitMs: number;
  /** A session with no call for this long is snapshotted and closed; 0 = never. */
  sessionIdleMs: number;
  /** Snapshot after every cell that changed the namespace. */
  autosave: boolean;
  /** Snapshot size caps. */
  snapshotMaxBytes: number;
  snapshotMaxVariableBytes: number;
  /** Display files per session folder (count, bytes; the oldest go first), entries per cell; 0 = no limit. */
  displayMaxFiles: number;
  displayMaxBytes: number;
  displayMaxEntries: number;
  /** One display payload's cap in bytes (an image over it is left out, said); 0 = no limit. */
  displayMaxPayloadBytes: number;
  /** How matplotlib figures are rendered: "png" or "svg". */
  figureFormat: FigureFormat;
  /** A session's history: cells and (about) bytes kept, the oldest dropped first; 0 = no limit (docs/history.md). */
  historyMaxCells: number;
  historyMaxBytes: number;
  /**
   * New sessions run in a sandbox with this profile (`true` in a file: the default profile); false or
   * absent: none. `--sandbox`/`--no-sandbox` and the other sandbox flags beat it.
   */
  sandbox?: SandboxProfile | false;
  /**
   * Resource limits of new sessions (`"limits": {"memory": "512M", "maxProcs": 64, "cpu": 50,
   * "maxFileSize": "1G", "bestEffort": false}`); `--memory` and the other limit flags beat each its own.
   */
  limits?: ResourceLimits;
  /** What loading left out and the user should hear about (an untrusted project interpreter). */
  notices?: string[];
};

/** The built-ins (lib/core/limits.ts), as a Config. */
export const builtinConfig: Config = { ...DEFAULTS };

/** Environment variables that set a config key (AWREPL_PYTHON is read by the interpreter resolver too). */
const envKeys: Record<string, keyof Config> = {
  AWREPL_TIMEOUT_MS: "timeoutMs",
  AWREPL_MAX_OUTPUT: "maxOutputBytes",
  AWREPL_PYTHON: "python",
  AWREPL_VENV: "venv",
  AWREPL_IDLE_EXIT_MS: "idleExitMs",
  AWREPL_AUTOSAVE: "autosave",
  AWREPL_SANDBOX: "sandbox",
};

export type LoadConfigOptions = { cwd?: string; env?: NodeJS.ProcessEnv; /** The state directory, when already resolved. */ home?: string };

/** Both files and the environment. Async: what a file needs (node:fs, the JSONC parser) loads only when there is one. */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<Config> {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const home = options.home ?? stateDir(env);
  const projectFile = resolve(cwd, "awrepl.jsonc");
  let project = await readProjectFile(projectFile, home);
  const notices: string[] = [];
  // A project file may set limits (and switch the default sandbox on) freely, but an interpreter
  // command line, or a sandbox setting that loosens it (off, network, env, writable paths), only
  // once trusted: a checkout you did not write must not choose what runs, or where it may reach.
  // In a directory a sandboxed session could write, every setting needs trust: a planted
  // `{"timeoutMs": 1}` or `{"maxOutputBytes": 0}` would steer every later call (sandbox_written.ts).
  const written = project ? await sandboxWrittenRoot(home, projectFile) : null;
  if (project && written) {
    const { trustState } = await import("./trust.ts");
    const state = trustState(home, projectFile, project.text);
    if (state !== "trusted") {
      const { passedOver } = await import("./sandbox_written.ts");
      notices.push(passedOver(projectFile, written, `if you checked it, run \`awrepl trust ${projectFile}\` to use it`));
      project = null;
    }
  }
  // A venv chooses the interpreter as much as `python` does.
  const needsTrust = (["python", "venv", "sandbox"] as const).filter((k) => project?.config[k] !== undefined && (k !== "sandbox" || loosens(project.config.sandbox)));
  if (project && needsTrust.length > 0) {
    const { trustState } = await import("./trust.ts");
    const state = trustState(home, projectFile, project.text);
    if (state !== "trusted") {
      for (const key of needsTrust) delete project.config[key];
      const why = state === "changed" ? "it changed since you trusted it" : "it is not trusted";
      notices.push(`ignoring ${needsTrust.map((k) => `"${k}"`).join(" and ")} in ${projectFile}: ${why}; if you wrote it, run \`awrepl trust\` to allow it`);
    }
  }
  const user = await readConfigFile(join(home, "config.jsonc"));
  const config: Config = {
    ...builtinConfig,
    ...user?.config,
    ...project?.config,
    ...configFromEnv(env),
  };
  if (notices.length > 0) config.notices = notices;
  return config;
}

/** Where a project file's directory was written by a sandbox (lazy: most commands find no project file). */
async function sandboxWrittenRoot(home: string, file: string): Promise<string | null> {
  const { sandboxWrittenRoot: root } = await import("./sandbox_written.ts");
  return root(home, file);
}

/**
 * The project file, as readConfigFile reads it; but in a directory a sandbox could write, one that
 * cannot be read or parsed (a planted empty file, a directory in its place) is passed over with the
 * rest of an untrusted file instead of failing every command there.
 */
async function readProjectFile(path: string, home: string): Promise<{ config: Partial<Config>; text: string } | null> {
  try {
    return await readConfigFile(path);
  } catch (err) {
    if (!fileExists(path) || !(await sandboxWrittenRoot(home, path))) throw err;
    return { config: {}, text: "" }; // untrusted (no content was trusted), so loadConfig passes it over
  }
}

/**
 * One config file's settings and its text (what trust is recorded for); null when there is no file.
 * A file that cannot be read or is malformed is a clear error.
 */
export async function readConfigFile(path: string): Promise<{ config: Partial<Config>; text: string } | null> {
  if (!fileExists(path)) return null;
  const { readFileSync } = await import("node:fs");
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new AwreplError("usage", `Cannot read config file ${path}: ${(err as Error).message}`);
  }
  // "#jsonc-parse" (package.json "imports"): under Bun (the executable, the sources) jsonc-parser's parser
  // module alone, which spares the package entry's formatter and editor; elsewhere the package entry
  // (Node's and Deno's loaders refuse that module: it imports './scanner' without an extension).
  const { parse, visit } = await import("#jsonc-parse");
  const errors: ParseError[] = [];
  const value: unknown = parse(text, errors, { allowTrailingComma: true });
  const first = errors[0];
  if (first) {
    const before = text.slice(0, first.offset).split("\n");
    const where = `line ${before.length}, column ${(before.at(-1)?.length ?? 0) + 1}`;
    const found = JSON.stringify(text.slice(first.offset, first.offset + Math.max(1, Math.min(first.length, 20))));
    throw new AwreplError("usage", `Config file ${path} is not valid JSONC: unexpected ${found} at ${where}`);
  }
  // The parser builds objects by assignment, so a "__proto__" key sets a prototype instead of making
  // a key, and would be neither applied nor reported: look for it in the text.
  let proto: string | null = null;
  visit(text, { onObjectProperty: (name, _offset, _length, _line, _column, pathOf) => void (name === "__proto__" && (proto ??= [...pathOf(), name].join("."))) }, { allowTrailingComma: true });
  if (proto) throw new AwreplError("usage", `Unknown config key "${proto}" in ${path}`);
  return { config: validateConfig(value, path), text };
}

export function validateConfig(value: unknown, where: string): Partial<Config> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new AwreplError("usage", `Config in ${where} must be a JSON object`);
  }
  const out: Partial<Config> = {};
  for (const [key, v] of Object.entries(value)) {
    if ((NUMBER_KEYS as readonly string[]).includes(key)) {
      // A number, or text with a unit ("30s", "64K"): the one parser every option uses.
      const parsed = typeof v === "string" ? parseCount(v, key) : null;
      if (parsed && "problem" in parsed) throw new AwreplError("usage", `Config key "${key}" in ${where} ${parsed.problem}`);
      const value = parsed ? parsed.value : v;
      const problem = limitProblem(key, value);
      if (problem) throw new AwreplError("usage", `Config key "${key}" in ${where} ${problem}`);
      (out as Record<string, unknown>)[key] = value;
    } else if (key === "python") {
      if (typeof v !== "string" || v.trim() === "") {
        throw new AwreplError("usage", `Config key "python" in ${where} must be a non-empty string`);
      }
      out.python = v;
    } else if (key === "venv") {
      if (typeof v !== "string" || v.trim() === "") throw new AwreplError("usage", `Config key "venv" in ${where} must be a directory (a non-empty string), not ${JSON.stringify(v ?? null)}`);
      out.venv = resolve(where.endsWith(".jsonc") ? builtin("node:path").dirname(where) : process.cwd(), v);
    } else if (key === "figureFormat") {
      if (!FIGURE_FORMATS.includes(v as FigureFormat)) {
        throw new AwreplError("usage", `Config key "figureFormat" in ${where} must be ${FIGURE_FORMATS.map((f) => JSON.stringify(f)).join(" or ")}, not ${JSON.stringify(v ?? null)}`);
      }
      out.figureFormat = v as FigureFormat;
    } else if (key === "autosave") {
      if (typeof v !== "boolean") throw new AwreplError("usage", `Config key "autosave" in ${where} must be true or false`);
      out.autosave = v;
    } else if (key === "sandbox") {
      out.sandbox = validateSandbox(v, where);
    } else if (key === "limits") {
      out.limits = validateLimits(v, where);
    } else {
      throw new AwreplError("usage", `Unknown config key "${key}" in ${where}`);
    }
  }
  return out;
}

/**
 * A sandbox setting: true (the default profile), false (none), or an object of `network` (bool),
 * `env` (variable names) and `writable` (paths; relative ones are the config file's directory's).
 */
export function validateSandbox(v: unknown, where: string): SandboxProfile | false {
  const bad = (what: string) => new AwreplError("usage", `Config key "sandbox" in ${where} ${what}`);
  if (v === false) return false;
  if (v === true) return {};
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw bad(`must be true, false or an object ({"network", "env", "writable", "git", "home", "allow"}), not ${JSON.stringify(v)}`);
  const base = where.endsWith(".jsonc") ? builtin("node:path").dirname(where) : process.cwd();
  const out: SandboxProfile = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === "network") {
      if (typeof x !== "boolean") throw bad(`has "network" ${JSON.stringify(x)}: it must be true or false`);
      out.network = x;
    } else if (k === "git" || k === "home") {
      if (typeof x !== "boolean") throw bad(`has "${k}" ${JSON.stringify(x)}: it must be true or false`);
      if (x) out[k] = true;
    } else if (k === "env") {
      if (!Array.isArray(x) || x.some((n) => typeof n !== "string" || !ENV_VAR_NAME.test(n))) throw bad(`has "env" ${JSON.stringify(x)}: it must be a list of environment variable names`);
      out.env = x as string[];
    } else if (k === "writable") {
      if (!Array.isArray(x) || x.some((p) => typeof p !== "string" || p === "")) throw bad(`has "writable" ${JSON.stringify(x)}: it must be a list of paths`);
      out.writable = (x as string[]).map((p) => resolve(base, p));
      if (out.writable.includes("/")) throw bad(`has "writable" "/": that would make the whole filesystem writable`);
    } else if (k === "allow") {
      // The entries themselves are checked where the sandbox is built (lib/worker/net_allow.ts), which names a bad one.
      if (!Array.isArray(x) || x.some((h) => typeof h !== "string" || h === "")) throw bad(`has "allow" ${JSON.stringify(x)}: it must be a list of host[:port] strings`);
      if (x.length) out.allow = x as string[];
    } else {
      throw bad(`has an unknown field "${k}" (known: network, env, writable, git, home, allow)`);
    }
  }
  if (out.network && out.allow) throw bad(`has both "network" and "allow": the allow list only means something without the network`);
  return out;
}

/** The config's `limits`: camelCase keys, sizes as numbers of bytes or text with a unit ("512M"), as the flags take them. */
export function validateLimits(v: unknown, where: string): ResourceLimits {
  const bad = (what: string) => new AwreplError("usage", `Config key "limits" in ${where} ${what}`);
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw bad(`must be an object ({"memory", "maxProcs", "cpu", "maxFileSize", "bestEffort"}), not ${JSON.stringify(v)}`);
  const out: ResourceLimits = {};
  const size = (k: string, x: unknown): number => {
    const parsed = typeof x === "string" ? parseSize(x) : typeof x === "number" && Number.isSafeInteger(x) ? { value: x } : null;
    if (!parsed || "problem" in parsed || parsed.value <= 0) throw bad(`has "${k}" ${JSON.stringify(x)}: it must be a size above 0 such as 512M or 2G (a bare number is bytes)`);
    return parsed.value;
  };
  for (const [k, x] of Object.entries(v)) {
    if (k === "memory") out.memory_bytes = size(k, x);
    else if (k === "maxFileSize") out.max_file_bytes = size(k, x);
    else if (k === "maxProcs") {
      if (typeof x !== "number" || !Number.isSafeInteger(x) || x < 1) throw bad(`has "maxProcs" ${JSON.stringify(x)}: it must be a whole number, 1 or more`);
      out.max_procs = x;
    } else if (k === "cpu") {
      if (typeof x !== "number" || !Number.isFinite(x) || x <= 0) throw bad(`has "cpu" ${JSON.stringify(x)}: it must be a percentage of one CPU above 0 (200: two CPUs)`);
      out.cpu_percent = x;
    } else if (k === "bestEffort") {
      if (typeof x !== "boolean") throw bad(`has "bestEffort" ${JSON.stringify(x)}: it must be true or false`);
      if (x) out.best_effort = true;
    } else throw bad(`has an unknown field "${k}" (known: memory, maxProcs, cpu, maxFileSize, bestEffort)`);
  }
  return out;
}

/** True when a sandbox setting is not the default profile or stricter: off, or with network, env, paths, hosts allowed. */
export function loosens(sandbox: SandboxProfile | false | undefined): boolean {
  if (sandbox === undefined) return false;
  if (sandbox === false) return true;
  // An allow list opens a way out to the hosts it names: a project file needs trust for it, as for the network.
  return sandbox.network === true || sandbox.git === true || sandbox.home === true || Boolean(sandbox.env?.length || sandbox.writable?.length || sandbox.allow?.length);
}

function configFromEnv(env: NodeJS.ProcessEnv): Partial<Config> {
  const raw: Record<string, unknown> = {};
  for (const [name, key] of Object.entries(envKeys)) {
    const v = env[name];
    if (v === undefined || v === "") continue;
    if (key === "python" || key === "venv") raw[key] = v;
    else if (key === "autosave" || key === "sandbox") raw[key] = v === "1" || v.toLowerCase() === "true";
    else {
      // Read by the one rule for quantities (a unit allowed); the problem names the variable.
      const parsed = parseCount(v, key);
      if ("problem" in parsed) throw new AwreplError("usage", `${name} ${parsed.problem}`);
      raw[key] = parsed.value;
    }
  }
  return validateConfig(raw, "the environment");
}
