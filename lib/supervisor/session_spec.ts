// How the supervisor makes a session from a client's spec. The spec is the creating client's (its
// interpreter choice, directory and environment: the supervisor's own are whoever started it), and it
// is saved beside the session's snapshot, so that a session re-created from its snapshot is made as it
// was first made rather than as this caller would make a new one.
import { existsSync } from "node:fs";
import type { Config } from "../settings/config.ts";
import type { HomeLayout } from "../settings/home.ts";
import type { SessionSpec } from "../protocol/supervisor.ts";
import { ReplSession } from "../session/session.ts";
import { defaultSnapshotPath, readSessionSpec, writeSessionSpec } from "../session/snapshot_files.ts";
import type { SpareWorkers } from "../worker/spare.ts";
import { persistentSessionOptions } from "./persistence.ts";
import type { SessionFactory } from "./session_table.ts";

type Log = (line: string) => void;

/** Starts sessions in `layout`'s state directory with `config`'s defaults and limits, from `spares` when one fits. */
export function sessionFactory(layout: HomeLayout, config: Config, spares: SpareWorkers, log: Log): SessionFactory {
  return (name, requested) => {
    const spec = specFor(layout.home, name, requested, log);
    // Saved once the session runs: a start that fails (a missing directory, no interpreter) leaves
    // nothing behind, and never replaces the spec a snapshot was saved with.
    const saveSpec = (session: ReplSession) => {
      try {
        writeSessionSpec(layout.home, name, spec);
      } catch (err) {
        log(`session ${name}: cannot save its spec: ${(err as Error).message}`);
      }
      return session;
    };
    return ReplSession.start(name, {
      ...persistentSessionOptions(config, spec.autosave),
      python: spec.python ?? config.python,
      cwd: spec.cwd,
      env: spec.env && exactEnv(spec.env, layout.home),
      timeoutMs: spec.timeout_ms ?? config.timeoutMs,
      maxOutputBytes: spec.max_output_bytes ?? config.maxOutputBytes,
      graceMs: spec.grace_ms ?? config.graceMs,
      displayMaxFiles: config.displayMaxFiles,
      displayMaxBytes: config.displayMaxBytes,
      displayMaxEntries: config.displayMaxEntries,
      figureFormat: config.figureFormat,
      home: layout.home,
      spares,
    }).then(saveSpec);
  };
}

/**
 * The spec to create session `name` with: the requested one, or when the session has a snapshot to
 * be re-created from, the one saved with it (interpreter, directory, environment, limits); an
 * explicit --python still wins, and a caller's autosave switches autosave on.
 */
export function specFor(home: string, name: string, requested: SessionSpec, log: Log): SessionSpec {
  if (!existsSync(defaultSnapshotPath(home, name))) return requested;
  const saved = savedSpec(home, name);
  if (!saved) return requested;
  const python = requested.python_given ? requested.python : (saved.python ?? requested.python);
  log(`session ${name}: re-created as it was saved (${python ?? "default python"} in ${saved.cwd ?? "?"})`);
  // A directory removed since is not a reason to lose the state: the caller's is used instead.
  const cwd = saved.cwd !== undefined && existsSync(saved.cwd) ? saved.cwd : requested.cwd;
  return { ...saved, python, cwd, python_given: undefined, autosave: saved.autosave || requested.autosave || undefined };
}

/**
 * What a request asked of session `name` that the running session does not do, since a session keeps
 * what it was created with: said in the result's notice, with how to change it. Null when nothing was
 * asked for explicitly (defaults are not choices) or it matches.
 */
export function unusedSpecNotice(name: string, session: ReplSession, requested: SessionSpec | undefined): string | null {
  const running = session.interpreter.command;
  if (!requested?.python_given || requested.python === undefined || requested.python === running) return null;
  return `Session ${name} keeps the interpreter it started with (${running}), not the requested ${requested.python}; to change it, close the session first (awrepl close ${name}).`;
}

/** A spec as a supervisor of protocol 1 saved it: the limits in camelCase. */
type Protocol1Spec = SessionSpec & { timeoutMs?: number; maxOutputBytes?: number; graceMs?: number };

/** The spec saved beside a session's snapshot; one saved by a protocol 1 supervisor is read too, so an upgrade keeps its limits. */
export function savedSpec(home: string, name: string): SessionSpec | null {
  const saved = readSessionSpec(home, name) as Protocol1Spec | null;
  if (!saved) return null;
  const { timeoutMs, maxOutputBytes, graceMs, ...spec } = saved;
  spec.timeout_ms ??= timeoutMs;
  spec.max_output_bytes ??= maxOutputBytes;
  spec.grace_ms ??= graceMs;
  return spec;
}

/**
 * A worker environment of exactly `env` (the creating client's) rather than `env` over the
 * supervisor's own: ReplSession merges over process.env, so every variable of ours that the client
 * lacks is masked (spawn skips undefined values). AWREPL_HOME stays: `awrepl` run from a cell reaches
 * this state directory.
 */
function exactEnv(env: Record<string, string>, home: string): Record<string, string> {
  const masked: Record<string, string | undefined> = {};
  for (const k of Object.keys(process.env)) masked[k] = undefined;
  return { ...masked, ...env, AWREPL_HOME: home } as Record<string, string>;
}
