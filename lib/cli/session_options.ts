// The one place a command turns its flags and the settings into session options: for a session the
// supervisor holds (attach) and for a worker of the command's own (an ephemeral `run`, an unnamed
// `serve`). Small on purpose: `run` loads it on its hot path.
import type { AttachOptions } from "../client/attach.ts";
import type { ReplSessionOptions } from "../session/session.ts";
import type { Settings } from "../settings/context.ts";
import { type SandboxFlags, sandboxSpec } from "../settings/sandbox_flags.ts";

export type { SandboxFlags } from "../settings/sandbox_flags.ts";

/** What a command's own flags say about its session (undefined: the config's value). */
export type SessionFlags = SandboxFlags & {
  /** --python: beats the interpreter a session restored from its snapshot was created with. */
  python?: string;
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** --autosave: switches autosave on for the session (never off). */
  autosave?: boolean;
};

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
    displayMaxPayloadBytes: config.displayMaxPayloadBytes,
    figureFormat: config.figureFormat,
  };
  const sandbox = sandboxSpec(settings, flags);
  if (sandbox) options.sandbox = sandbox;
  return options;
}
