// The one place a command turns its flags and the settings into session options: its limits (its
// flags over the config, resolved once: sessionLimits), and the options for a session the supervisor
// holds (attach) or for a worker of the command's own (an ephemeral `run`, an unnamed `serve`). Small
// on purpose: `run` loads it on its hot path.
import type { AttachOptions } from "../client/attach.ts";
import { type Limits, resolveLimits } from "../core/limits.ts";
import type { ReplSessionOptions } from "../session/session.ts";
import type { Settings } from "../settings/context.ts";
import { type LimitFlags, limitsSpec } from "../settings/limits_flags.ts";
import { type SandboxFlags as SandboxProfileFlags, sandboxSpec } from "../settings/sandbox_flags.ts";

/**
 * The global flags that shape a new session's worker: the sandbox's (`--sandbox`, `--sandbox-allow`,
 * ...) and its resource limits (`--memory`, `--max-procs`, `--cpu`, `--max-file-size`,
 * `--limits-best-effort`). One type, because every command takes them together (CliContext.sessionFlags).
 */
export type SandboxFlags = SandboxProfileFlags & LimitFlags;

/** What a command's own flags say about its session (undefined: the config's value). */
export type SessionFlags = SandboxFlags & {
  /** --python: beats the interpreter a session restored from its snapshot was created with. */
  python?: string;
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** --autosave: switches autosave on for the session (never off). */
  autosave?: boolean;
  /** --venv DIR: the session runs in that virtual environment (created on first use). */
  venv?: string;
};

/** The limits of a command's session and calls: its flags over the config (the CLI's edge). */
export function sessionLimits(settings: Settings, flags: SessionFlags = {}): Limits {
  return resolveLimits(settings.config(), { timeoutMs: flags.timeoutMs, maxOutputBytes: flags.maxOutputBytes });
}

/**
 * How a named session is created if it does not exist yet (an existing one keeps its interpreter,
 * sandbox, directory and environment). The config's interpreter (AWREPL_PYTHON, the config file) is
 * only a default: unlike --python it does not replace the one a restored session was created with.
 * `limits`: the command's, when it resolved them already.
 */
export function attachOptions(settings: Settings, flags: SessionFlags = {}, limits: Limits = sessionLimits(settings, flags)): AttachOptions {
  const config = settings.config();
  const options: AttachOptions = {
    python: flags.python,
    defaultPython: config.python,
    venv: flags.venv ?? config.venv,
    // What a session created by this call keeps; the supervisor's config has the rest of its limits.
    timeoutMs: limits.timeoutMs,
    maxOutputBytes: limits.maxOutputBytes,
    graceMs: limits.graceMs,
    autosave: flags.autosave || config.autosave,
    cwd: settings.cwd,
    layout: settings.layout,
    clientEnv: settings.env,
  };
  const sandbox = sandboxSpec(settings, flags);
  if (sandbox !== undefined) options.sandbox = sandbox;
  const resources = limitsSpec(settings, flags);
  if (resources) options.limits = resources;
  return options;
}

/** The same, for a worker the command starts itself and ends on its way out: it gets every limit. */
export function ownSessionOptions(settings: Settings, flags: SessionFlags = {}, limits: Limits = sessionLimits(settings, flags)): ReplSessionOptions {
  const config = settings.config();
  const options: ReplSessionOptions = {
    ...limits,
    python: flags.python ?? config.python,
    venv: flags.venv ?? config.venv,
    cwd: settings.cwd,
    home: settings.layout.home,
    figureFormat: config.figureFormat,
  };
  const sandbox = sandboxSpec(settings, flags);
  if (sandbox) options.sandbox = sandbox;
  const resources = limitsSpec(settings, flags);
  if (resources) options.limits = resources;
  return options;
}
