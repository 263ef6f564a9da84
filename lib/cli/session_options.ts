// The one place a command turns its flags and the settings into session options: for a session the
// supervisor holds (attach) and for a worker of the command's own (an ephemeral `run`, an unnamed
// `serve`). Small on purpose: `run` loads it on its hot path.
import type { AttachOptions } from "../client/attach.ts";
import { usageError } from "../core/errors.ts";
import type { SandboxProfile } from "../protocol/api.ts";
import type { ReplSessionOptions } from "../session/session.ts";
import type { Settings } from "../settings/context.ts";

/** The sandbox flags as given (`--sandbox`, `--no-sandbox`, `--sandbox-net`, `--env NAME`, `--sandbox-write PATH`). */
export type SandboxFlags = {
  /** true: --sandbox; false: --no-sandbox; undefined: the config decides. */
  sandbox?: boolean;
  net?: boolean;
  env?: string[];
  write?: string[];
};

/** What a command's own flags say about its session (undefined: the config's value). */
export type SessionFlags = SandboxFlags & {
  /** --python: beats the interpreter a session restored from its snapshot was created with. */
  python?: string;
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** --autosave: switches autosave on for the session (never off). */
  autosave?: boolean;
};

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The sandbox a new session gets from the flags over the config: a profile, `false` (--no-sandbox:
 * explicitly none) or undefined (none, and no preference: a live or saved session keeps its own
 * without a word). --sandbox-net, --env and --sandbox-write add to the config's profile and need a
 * sandbox to add to. Paths are made absolute against the caller's directory and must exist. Usage
 * errors name the offending flag and value. (Also for `awrepl mcp`: call it with its flags.)
 */
export function sandboxSpec(settings: Settings, flags: SandboxFlags = {}): SandboxProfile | false | undefined {
  const modifiers = [flags.net ? "--sandbox-net" : "", flags.env?.length ? "--env" : "", flags.write?.length ? "--sandbox-write" : ""].filter(Boolean);
  if (flags.sandbox === false) {
    if (modifiers.length) throw usageError(`${modifiers.join(", ")} cannot go with --no-sandbox`);
    return false;
  }
  const configured = settings.config().sandbox;
  const base = flags.sandbox ? configured || {} : configured || undefined;
  if (!base) {
    if (modifiers.length) throw usageError(`${modifiers.join(", ")} ${modifiers.length > 1 ? "shape" : "shapes"} a sandbox: add --sandbox (or set "sandbox" in the config)`);
    return undefined;
  }
  for (const name of flags.env ?? []) {
    if (!ENV_NAME.test(name)) throw usageError(`--env needs an environment variable name, not ${JSON.stringify(name)}`);
  }
  const write = (flags.write ?? []).map((p) => checkWritable(settings, p));
  const profile: SandboxProfile = {};
  if (flags.net || base.network) profile.network = true;
  const env = union(base.env, flags.env);
  if (env.length) profile.env = env;
  const paths = union(base.writable, write);
  if (paths.length) profile.writable = paths;
  return profile;
}

function union(a: readonly string[] | undefined, b: readonly string[] | undefined): string[] {
  return [...new Set([...(a ?? []), ...(b ?? [])])];
}

/** `--sandbox-write PATH` as an absolute path that exists (a sandbox binds existing paths only). */
function checkWritable(settings: Settings, path: string): string {
  const { resolve } = process.getBuiltinModule("node:path") as typeof import("node:path");
  const { statSync } = process.getBuiltinModule("node:fs") as typeof import("node:fs");
  const abs = resolve(settings.cwd, path);
  if (abs === "/") throw usageError("--sandbox-write / would make the whole filesystem writable: name the directories the code may change");
  if (!statSync(abs, { throwIfNoEntry: false })) throw usageError(`--sandbox-write ${path}: no such file or directory (${abs})`);
  return abs;
}

/**
 * How a named session is created if it does not exist yet (an existing one keeps its interpreter,
 * sandbox, directory and environment). The config's interpreter (AWREPL_PYTHON, the config file) is
 * only a default: unlike --python it does not replace the one a restored session was created with.
 */
export function attachOptions(settings: Settings, flags: SessionFlags = {}): AttachOptions {
  const config = settings.config();
  const options: AttachOptions = {
    python: flags.python,
    defaultPython: config.python,
    timeoutMs: flags.timeoutMs ?? config.timeoutMs,
    maxOutputBytes: flags.maxOutputBytes ?? config.maxOutputBytes,
    graceMs: config.graceMs,
    autosave: flags.autosave || config.autosave,
    cwd: settings.cwd,
    layout: settings.layout,
    clientEnv: settings.env,
  };
  const sandbox = sandboxSpec(settings, flags);
  if (sandbox !== undefined) options.sandbox = sandbox;
  return options;
}

/** The same, for a worker the command starts itself and ends on its way out. */
export function ownSessionOptions(settings: Settings, flags: SessionFlags = {}): ReplSessionOptions {
  const config = settings.config();
  const options: ReplSessionOptions = {
    python: flags.python ?? config.python,
    timeoutMs: flags.timeoutMs ?? config.timeoutMs,
    maxOutputBytes: flags.maxOutputBytes ?? config.maxOutputBytes,
    graceMs: config.graceMs,
    cwd: settings.cwd,
    home: settings.layout.home,
    displayMaxFiles: config.displayMaxFiles,
    displayMaxBytes: config.displayMaxBytes,
    displayMaxEntries: config.displayMaxEntries,
    figureFormat: config.figureFormat,
  };
  const sandbox = sandboxSpec(settings, flags);
  if (sandbox) options.sandbox = sandbox;
  return options;
}
