// How the supervisor makes a session from a client's spec. The spec is the creating client's (its
// interpreter choice, sandbox, directory and environment: the supervisor's own are whoever started
// it), and it is saved in the session's directory, so that a session re-created later (after a stop,
// whether or not its snapshot could be written) is made exactly as it was first made, or not at all:
// never silently on another interpreter, without its sandbox, or in another directory.
import { existsSync } from "node:fs";
import { AwreplError } from "../core/errors.ts";
import { type Limits, resolveLimits } from "../core/limits.ts";
import type { Config } from "../settings/config.ts";
import type { HomeLayout } from "../settings/home.ts";
import type { SandboxProfile } from "../protocol/api.ts";
import type { SessionSpec } from "../protocol/supervisor.ts";
import type { ResourceLimits } from "../protocol/limits.ts";
import { formatBytes } from "../core/units.ts";
import { ReplSession, type ReplSessionOptions } from "../session/session.ts";
import { defaultSnapshotPath, migrateLegacyLayout, readSessionSpec, writeSessionSpec } from "../session/snapshot_files.ts";
import type { SpareWorkers } from "../worker/spare.ts";
import { persistentSessionOptions } from "./persistence.ts";
import type { SessionFactory } from "./session_table.ts";

type Log = (line: string) => void;

/** The spec each live session was made with (after specFor): what a later caller's request is compared with. */
const madeWith = new WeakMap<ReplSession, SessionSpec>();
/** Sessions whose first result already says what became of their earlier state. */
const toldState = new WeakSet<ReplSession>();

/** Starts sessions in `layout`'s state directory with `config`'s defaults and limits, from `spares` when one fits. */
export function sessionFactory(layout: HomeLayout, config: Config, spares: SpareWorkers, log: Log): SessionFactory {
  // Snapshots of an earlier version's flat layout move into per-session directories before any is read.
  const migration = migrateLegacyLayout(layout.home);
  if (migration.moved.length) log(`snapshots moved to per-session directories: ${migration.moved.join(", ")}`);
  if (migration.left.length) log(`snapshot files left in place (their new name is taken, or they name no session): ${migration.left.join(", ")}`);
  return async (name, requested, owned) => {
    if (owned) return startOwned(layout, config, spares, name, requested);
    const { spec, notices, recreated } = specFor(layout.home, name, requested, log);
    const hadSnapshot = existsSync(defaultSnapshotPath(layout.home, name));
    const session = await ReplSession.start(name, { ...persistentSessionOptions(config, spec.autosave), ...workerOptions(layout, config, spares, spec) });
    // Saved once the session runs: a start that fails (a missing directory, no interpreter) leaves
    // nothing behind. A spec that cannot be saved refuses the session: a later re-creation could not
    // be made the same way.
    try {
      writeSessionSpec(layout.home, name, spec);
    } catch (err) {
      await session.close();
      throw new AwreplError("internal", `Cannot create session ${name}: its spec cannot be saved in ${layout.home}: ${(err as Error).message}`);
    }
    for (const notice of notices) session.note(notice);
    if (session.toldUnsavedAtStart) toldState.add(session);
    else if (recreated && !hadSnapshot) {
      // It existed, and nothing of its state was saved (its supervisor was killed, say): said, not silent.
      session.note(`Session ${name} was re-created as it was made, but it had no snapshot: its earlier state is gone.`);
      toldState.add(session);
    }
    madeWith.set(session, spec);
    session.onKeyDropped = (key, reason) => log(`session ${name}: dropped the result of cell ${key}: ${reason}`);
    return session;
  };
}

/**
 * An owned session (docs/supervisor-protocol.md "Owned sessions"): made as this call asks, and nothing
 * of it touches the disk: no snapshot restored, no autosave, no spec saved. The table checked that no
 * session of that name runs or is saved.
 */
async function startOwned(layout: HomeLayout, config: Config, spares: SpareWorkers, name: string, requested: SessionSpec): Promise<ReplSession> {
  const session = await ReplSession.start(name, { restoreOnStart: false, autosave: false, ...workerOptions(layout, config, spares, requested) });
  madeWith.set(session, { ...requested, autosave: undefined, python_given: undefined, existing: undefined });
  return session;
}

/** What a session made from `spec` runs with: its limits, interpreter, sandbox, directory and environment. */
function workerOptions(layout: HomeLayout, config: Config, spares: SpareWorkers, spec: SessionSpec): ReplSessionOptions {
  return {
    ...specLimits(config, spec),
    python: spec.python ?? config.python,
    ...(spec.venv ? { venv: spec.venv } : {}),
    ...sandboxOption(spec.sandbox),
    ...(spec.limits ? { limits: spec.limits } : {}),
    cwd: spec.cwd,
    env: spec.env && exactEnv(spec.env, layout.home),
    figureFormat: config.figureFormat,
    home: layout.home,
    spares,
  };
}

/**
 * The spec to create session `name` with, and what the first result must say about it. A session
 * with a saved spec (it existed before: stopped, parked, or its supervisor went away) is re-created
 * with that spec: its interpreter (unless this call gave --python explicitly, which is said), its
 * sandbox (always: a caller cannot take it away, or add one, by re-creating the session), its
 * directory (which must still exist: otherwise a clear error, nothing created), its environment and
 * limits. A new session (no saved spec) is made as requested.
 */
export function specFor(home: string, name: string, requested: SessionSpec, log: Log): { spec: SessionSpec; notices: string[]; recreated: boolean } {
  const saved = savedSpec(home, name);
  if (!saved) {
    const notices: string[] = [];
    if (existsSync(defaultSnapshotPath(home, name))) {
      // A snapshot without a spec (a spec lost by hand): the only spec there is, is this call's.
      log(`session ${name}: has a snapshot but no saved spec; made as this call asks`);
      notices.push(`Session ${name} had no saved spec (how it was created); it was re-created as this call asks.`);
    }
    const spec = { ...requested };
    delete spec.python_given;
    delete spec.existing;
    return { spec, notices, recreated: false };
  }
  const notices: string[] = [];
  // An unset python stays unset: the saved environment and directory resolve the same default again.
  let python = saved.python;
  if (requested.python_given && requested.python !== undefined && requested.python !== saved.python) {
    python = requested.python;
    notices.push(`Session ${name} was re-created with --python ${requested.python} instead of ${saved.python ?? "the default interpreter"}, the one it was created with.`);
  }
  const sandboxNote = sandboxMismatch(name, saved.sandbox, requested.sandbox);
  if (sandboxNote) notices.push(sandboxNote);
  const limitsNote = limitsMismatch(name, saved.limits, requested.limits);
  if (limitsNote) notices.push(limitsNote);
  if (saved.cwd !== undefined && !existsSync(saved.cwd)) {
    throw new AwreplError(
      "usage",
      `Session ${name} was created in ${saved.cwd}, which no longer exists; it is re-created only as it was made. Create that directory again to get the session back (its snapshot, if any, is kept), or run \`awrepl close ${name}\` to forget it.`,
    );
  }
  log(`session ${name}: re-created as it was saved (${python ?? "default python"}${describeSandbox(saved.sandbox, " ")} in ${saved.cwd ?? "?"})`);
  const spec: SessionSpec = { ...saved, python, autosave: saved.autosave || requested.autosave || undefined };
  delete spec.python_given;
  delete spec.existing;
  return { spec, notices, recreated: true };
}

/**
 * The limits of a session made from `spec`: those its creating client sent (a timeout, an output cap,
 * a grace period) over the supervisor's config. Resolved here, once: the supervisor's edge.
 */
export function specLimits(config: Config, spec: SessionSpec): Limits {
  return resolveLimits(config, { timeoutMs: spec.timeout_ms, maxOutputBytes: spec.max_output_bytes, graceMs: spec.grace_ms });
}

/**
 * What a call is told when it asks session `name` (live, or re-created from its saved spec) for
 * another interpreter or sandbox than it has: the session keeps its own, and how to change it. Null
 * when the call asked for nothing different.
 */
export function specMismatch(name: string, has: SessionSpec, asked: SessionSpec | undefined): string | null {
  if (!asked) return null;
  const notes: string[] = [];
  if (asked.python_given && asked.python !== undefined && asked.python !== has.python) {
    notes.push(`Session ${name} keeps its interpreter (${has.python ?? "the default interpreter"}); --python ${asked.python} was not used.`);
  }
  const sandbox = sandboxMismatch(name, has.sandbox, asked.sandbox);
  if (sandbox) notes.push(sandbox);
  const limits = limitsMismatch(name, has.limits, asked.limits);
  if (limits) notes.push(limits);
  if (notes.length === 0) return null;
  return `${notes.join(" ")} A session keeps what it was created with: \`awrepl close ${name}\` first to change it.`;
}

/** True when `session`'s first result says what became of its earlier state (lost, or an older snapshot). */
export function creationToldState(session: ReplSession): boolean {
  return toldState.has(session);
}

/** The spec session `session` was made with (by this supervisor's factory), or null. */
export function specOf(session: ReplSession): SessionSpec | null {
  return madeWith.get(session) ?? null;
}

function sandboxMismatch(name: string, has: SandboxProfile | false | undefined, asked: SandboxProfile | false | undefined): string | null {
  if (asked === undefined || sameSandbox(has, asked)) return null;
  if (!has) return `Session ${name} runs WITHOUT a sandbox (it was created so); the sandbox asked for (${describeSandbox(asked)}) was not applied.`;
  if (asked === false) return `Session ${name} keeps its sandbox (${describeSandbox(has)}); --no-sandbox was not applied.`;
  return `Session ${name} keeps its sandbox (${describeSandbox(has)}); the profile asked for (${describeSandbox(asked)}) was not applied.`;
}

/** Whether two sandbox settings are the same profile (order of names and paths aside; false and absent alike). */
export function sameSandbox(a: SandboxProfile | false | undefined, b: SandboxProfile | false | undefined): boolean {
  return canonicalSandbox(a) === canonicalSandbox(b);
}

function canonicalSandbox(s: SandboxProfile | false | undefined): string {
  if (!s) return "none";
  const sorted = (xs: string[] | undefined) => [...new Set(xs ?? [])].sort();
  return JSON.stringify([s.network === true, sorted(s.env), sorted(s.writable), s.git === true, s.home === true, sorted(s.allow)]);
}

/**
 * What a call is told when it asks for other resource limits than the session has (live, or saved
 * with its spec): it keeps its own. Null when the call asked for none (no preference) or the same.
 */
function limitsMismatch(name: string, has: ResourceLimits | undefined, asked: ResourceLimits | undefined): string | null {
  if (asked === undefined || canonicalLimits(has) === canonicalLimits(asked)) return null;
  return `Session ${name} keeps its limits (${describeLimits(has)}); the limits asked for (${describeLimits(asked)}) were not applied.`;
}

function canonicalLimits(l: ResourceLimits | undefined): string {
  const keys = ["memory_bytes", "max_procs", "cpu_percent", "max_file_bytes"] as const;
  return JSON.stringify([...keys.map((k) => l?.[k] ?? null), l?.best_effort === true]);
}

/** "memory 256 MiB, max procs 32", or "none". */
export function describeLimits(l: ResourceLimits | undefined): string {
  const parts: string[] = [];
  if (l?.memory_bytes !== undefined) parts.push(`memory ${formatBytes(l.memory_bytes)}`);
  if (l?.max_procs !== undefined) parts.push(`max procs ${l.max_procs}`);
  if (l?.cpu_percent !== undefined) parts.push(`cpu ${l.cpu_percent}%`);
  if (l?.max_file_bytes !== undefined) parts.push(`max file size ${formatBytes(l.max_file_bytes)}`);
  if (parts.length && l?.best_effort) parts.push("best effort");
  return parts.length ? parts.join(", ") : "none";
}

/** "sandbox: no network", "sandbox: network, env GITHUB_TOKEN, writable /data", or "no sandbox". */
export function describeSandbox(s: SandboxProfile | false | undefined, prefix = ""): string {
  if (!s) return prefix ? "" : "no sandbox";
  const parts = [s.network ? "network" : "no network"];
  if (s.env?.length) parts.push(`env ${s.env.join(" ")}`);
  if (s.writable?.length) parts.push(`writable ${s.writable.join(" ")}`);
  if (s.git) parts.push("writable .git");
  if (s.home) parts.push("home allowed");
  if (s.allow?.length) parts.push(`allow ${s.allow.join(" ")}`);
  return `${prefix}sandbox: ${parts.join(", ")}`;
}

/** The session option that puts a worker in the sandbox `sandbox` describes (nothing without one). */
function sandboxOption(sandbox: SandboxProfile | false | undefined): { sandbox?: SandboxProfile } {
  return sandbox ? { sandbox } : {};
}

/** A spec as a supervisor of protocol 1 saved it: the limits in camelCase. */
type Protocol1Spec = SessionSpec & { timeoutMs?: number; maxOutputBytes?: number; graceMs?: number };

/** The spec saved for a session; one saved by a protocol 1 supervisor is read too, so an upgrade keeps its limits. */
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
