// The sandbox a new session gets from a command's flags over the config: one function for every
// command that creates sessions (`run`, `serve`, and `awrepl mcp`, whose server lives in lib/mcp and
// so cannot import lib/cli). Resolved at the command's edge, like the rest of the settings. Small and
// without static node: imports: `run` loads it on its hot path.
import { usageError } from "../core/errors.ts";
import { ENV_VAR_NAME } from "../core/names.ts";
import type { SandboxProfile } from "../protocol/api.ts";
import type { Settings } from "./context.ts";

/** The sandbox flags as given (`--sandbox`, `--no-sandbox`, `--sandbox-net`, `--env NAME`, `--sandbox-write PATH`, `--sandbox-git`, `--sandbox-home`, `--sandbox-allow HOST[:PORT]`). */
export type SandboxFlags = {
  /** true: --sandbox; false: --no-sandbox; undefined: the config decides. */
  sandbox?: boolean;
  net?: boolean;
  env?: string[];
  write?: string[];
  git?: boolean;
  home?: boolean;
  /** --sandbox-allow HOST[:PORT] (repeatable): hosts the sandbox reaches through awrepl's proxy. */
  allow?: string[];
};

/**
 * The sandbox a new session gets from the flags over the config: a profile, `false` (--no-sandbox:
 * explicitly none) or undefined (none, and no preference: a live or saved session keeps its own
 * without a word). --sandbox-net, --env and --sandbox-write add to the config's profile and need a
 * sandbox to add to (so do --sandbox-allow's hosts, which exclude the network). Paths are made absolute against the caller's directory and must exist. Usage
 * errors name the offending flag and value. (Also for `awrepl mcp`: call it with its flags.)
 */
export function sandboxSpec(settings: Settings, flags: SandboxFlags = {}): SandboxProfile | false | undefined {
  const modifiers = [
    flags.net ? "--sandbox-net" : "",
    flags.env?.length ? "--env" : "",
    flags.write?.length ? "--sandbox-write" : "",
    flags.git ? "--sandbox-git" : "",
    flags.home ? "--sandbox-home" : "",
    flags.allow?.length ? "--sandbox-allow" : "",
  ].filter(Boolean);
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
    if (!ENV_VAR_NAME.test(name)) throw usageError(`--env needs an environment variable name, not ${JSON.stringify(name)}`);
  }
  const write = (flags.write ?? []).map((p) => checkWritable(settings, p));
  const profile: SandboxProfile = {};
  if (flags.net || base.network) profile.network = true;
  const env = union(base.env, flags.env);
  if (env.length) profile.env = env;
  const paths = union(base.writable, write);
  if (paths.length) profile.writable = paths;
  if (flags.git || base.git) profile.git = true;
  if (flags.home || base.home) profile.home = true;
  for (const host of flags.allow ?? []) {
    if (host.trim() === "") throw usageError(`--sandbox-allow needs a host[:port] (a name, *.domain, an IPv4 address or [IPv6]), not ${JSON.stringify(host)}`);
  }
  const allow = union(base.allow, flags.allow);
  if (allow.length) {
    if (profile.network) {
      const net = flags.net ? "--sandbox-net" : 'the config\'s sandbox "network"';
      throw usageError(`--sandbox-allow ${allow.join(" ")} cannot go with ${net}: the allow list only means something without the network`);
    }
    profile.allow = allow;
  }
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
