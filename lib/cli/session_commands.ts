// The commands that talk to the supervisor: vars, inspect, reset, interrupt, snapshot, restore,
// sessions, close, daemon, and the hidden `__supervisor` subcommand the client re-executes to start
// the supervisor. `vars` and `sessions` also run without commander (varsCommand, sessionsCommand:
// lib/cli/program.ts), so this module imports no node: module and no commander value at the top
// (lib/core/fastio.ts says what each costs a start).
import type { Command, Option } from "commander";
import { attach, type RemoteSession } from "../client/attach.ts";
import { SUPERVISOR_SUBCOMMAND } from "../client/start.ts";
import { AwreplError, ExitCode, usageError } from "../core/errors.ts";
import type { RestoreReport } from "../protocol/result.ts";
import type { SessionInfo, StopSnapshot } from "../protocol/supervisor.ts";
import type { SnapshotReport } from "../protocol/api.ts";
import type { CliContext } from "./context.ts";
import { countOption } from "./options.ts";
import { attachOptions, type SessionFlags } from "./session_options.ts";
import { writeStream } from "./stdio.ts";

export function registerRemoteCommands(program: Command, ctx: CliContext, flags: () => SessionFlags, setExit: (code: number) => void): void {
  const client = () => ({ env: ctx.env, layout: ctx.layout });

  program
    .command("vars")
    .description("list the session's variables, one line each: what the value is (type, size, short repr)")
    .option("--json", "print one JSON object")
    .action((opts: { json?: boolean }) => varsCommand(ctx, flags(), opts));

  program
    .command("inspect")
    .description("describe one variable: type, size, repr, signature, docstring (first paragraph; --full for all), ...")
    .argument("<name>", "a name in the session's namespace")
    .option("--full", "the whole docstring and every attribute name, dunders too")
    .option("--json", "print one JSON object")
    .action(async (name: string, opts: { json?: boolean; full?: boolean }) => {
      const info = await withSession(ctx, flags(), (s) => s.inspect(name, { full: opts.full === true }), EXISTING);
      if (opts.json) return print(JSON.stringify(info));
      print(
        Object.entries(info)
          .filter(([, v]) => v !== null && v !== undefined)
          .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)
          .join("\n"),
      );
    });

  program
    .command("reset")
    .description("clear the session's namespace (the worker keeps running)")
    .option("--json", "print one JSON object: {session, reset}")
    .action(async (opts: { json?: boolean }) => {
      await withSession(ctx, flags(), (s) => s.reset(), EXISTING);
      if (opts.json) print(JSON.stringify({ session: requireSession(ctx), reset: true }));
    });

  program
    .command("interrupt")
    .description("interrupt the session's running cell (from any shell)")
    .option("--json", "print one JSON object: {session, interrupted}")
    .action(async (opts: { json?: boolean }) => {
      const name = requireSession(ctx);
      const { interruptSession } = await import("../client/daemon.ts");
      const interrupted = await interruptSession(name, client());
      if (interrupted && opts.json) print(JSON.stringify({ session: name, interrupted }));
      if (!interrupted) {
        const [{ listSessions }, { knownSessionNames }, { resolveHome }] = await Promise.all([
          import("../client/daemon.ts"),
          import("../session/snapshot_files.ts"),
          import("../settings/home.ts"),
        ]);
        const known = (await listSessions(client())).some((r) => r.name === name) || knownSessionNames(resolveHome(client())).includes(name);
        if (!known) throw new AwreplError("session_not_found", `No session named ${JSON.stringify(name)}`);
        if (opts.json) print(JSON.stringify({ session: name, interrupted }));
        else process.stderr.write(`Session ${name} was not running a cell\n`);
      }
    });

  program
    .command("snapshot")
    .description("save the session's variables (default: in the state directory, restored on next use)")
    .argument("[path]", "where to write the snapshot on this machine (its JSON manifest goes beside it)")
    .option("--json", "print one JSON object")
    .addOption(timeoutOption(program))
    .action(async (path: string | undefined, opts: { json?: boolean; timeout?: number }) => {
      // A relative path is the caller's, not the session's working directory.
      const { dirname, resolve } = await import("node:path");
      const target = path === undefined ? undefined : resolve(path);
      if (target !== undefined && !(await isDirectory(dirname(target)))) {
        throw usageError(`Cannot write a snapshot to ${target}: the directory ${dirname(target)} does not exist`);
      }
      const report = await withSession(ctx, flags(), (s) => s.snapshot(target, { timeoutMs: opts.timeout }), EXISTING);
      print(opts.json ? JSON.stringify(report) : snapshotText(report));
    });

  program
    .command("restore")
    .description("load a snapshot's variables into the session (default: its own snapshot)")
    .argument("[path]", "the snapshot to load (a file on this machine, whatever the worker's host)")
    .option("--json", "print one JSON object")
    .addOption(timeoutOption(program))
    .action(async (path: string | undefined, opts: { json?: boolean; timeout?: number }) => {
      const [{ resolve }, { existsSync }] = await Promise.all([import("node:path"), import("node:fs")]);
      const source = path === undefined ? undefined : resolve(path);
      if (source !== undefined && !existsSync(source)) throw usageError(`No snapshot at ${source}`);
      // Its own snapshot: nothing to restore into a name that has neither a session nor a snapshot.
      const report = await withSession(ctx, flags(), (s) => s.restore(source, { timeoutMs: opts.timeout }), source === undefined);
      print(opts.json ? JSON.stringify(report) : restoreText(report));
    });

  program
    .command("sessions")
    .description("list the supervisor's sessions")
    .option("--json", "print a JSON array")
    .action((opts: { json?: boolean }) => sessionsCommand(ctx, opts));

  program
    .command("close")
    .description("end a session's worker and forget its snapshot (or every session with --all)")
    .argument("[name]", "the session to close")
    .option("--all", "close every session")
    .option("--keep", "snapshot first and keep it: the next use of the name restores it (a session whose snapshot fails is not closed; exit 1)")
    .option("--json", "print one JSON object: {closed: [names], unsaved: [StopSnapshot]}")
    .action(async (name: string | undefined, opts: { all?: boolean; keep?: boolean; json?: boolean }) => {
      const { closeAllSessionsReport, closeSessionReport } = await import("../client/daemon.ts");
      const options = { ...client(), keep: opts.keep === true };
      let unsaved: StopSnapshot[];
      if (opts.all) {
        if (name !== undefined) throw usageError("close takes a session name or --all, not both");
        const report = await closeAllSessionsReport(options);
        if (opts.json) print(JSON.stringify({ closed: report.closed, unsaved: report.unsaved }));
        else process.stderr.write(report.closed.length ? `Closed ${report.closed.join(", ")}\n` : "No sessions to close\n");
        unsaved = report.unsaved;
      } else {
        if (name === undefined) throw usageError("close needs a session name (or --all)");
        const report = await closeSessionReport(name, options);
        if (!report.found) throw new AwreplError("session_not_found", `No session named ${JSON.stringify(name)}`);
        unsaved = report.unsaved;
        if (opts.json) print(JSON.stringify({ closed: unsaved.length ? [] : [name], unsaved }));
      }
      // --keep whose snapshot failed: the session was left running rather than lose its state.
      for (const o of unsaved) process.stderr.write(`awrepl: session ${o.session} was NOT closed: its snapshot failed: ${o.error}. It keeps running; close it without --keep to end it anyway.\n`);
      if (unsaved.length) setExit(ExitCode.stateNotSaved);
    });

  const daemon = program
    .command("daemon")
    .description("the background supervisor: status | stop | logs")
    .action(() => {
      throw usageError("daemon needs a subcommand: status, stop or logs");
    });
  daemon
    .command("status")
    .description("is the supervisor running, and what does it hold")
    .option("--json", "print one JSON object (null when not running)")
    .action(async (opts: { json?: boolean }) => {
      const { daemonStatus } = await import("../client/daemon.ts");
      const status = await daemonStatus(client());
      if (opts.json) return print(JSON.stringify(status));
      if (!status) return print("Supervisor not running");
      print(
        [
          `Supervisor running: pid ${status.pid}, version ${status.version}, up ${duration(status.uptime_ms)}`,
          `sessions: ${status.sessions}   spare workers: ${status.spares}   connections: ${status.connections}   rss: ${bytes(status.rss_bytes)}`,
          `socket: ${status.socket}`,
          `log: ${status.log}`,
          `idle exit: ${status.idle_exit_ms ? `after ${duration(status.idle_exit_ms)} with no sessions` : "never"}`,
        ].join("\n"),
      );
    });
  daemon
    .command("stop")
    .description("snapshot every session, then stop the supervisor and every worker (exit 1 if a session's state could not be saved)")
    .option("--json", "print one JSON object: {stopped, snapshots: [per session], unsaved: [names]}")
    .action(async (opts: { json?: boolean }) => {
      const [{ stopDaemonReport }, { describeStopSnapshot }] = await Promise.all([import("../client/daemon.ts"), import("../supervisor/persistence.ts")]);
      const report = await stopDaemonReport(client());
      if (opts.json) print(JSON.stringify({ stopped: report.stopped, snapshots: report.snapshots, unsaved: report.unsaved.map((o) => o.session) }));
      const lines = [report.stopped ? "Supervisor stopped" : "Supervisor not running"];
      for (const o of report.snapshots ?? []) {
        const unsaved = report.unsaved.includes(o);
        if (unsaved || o.skipped?.length || o.status === "not_written") lines.push(`${unsaved ? "awrepl: " : ""}session ${o.session}: ${describeStopSnapshot(o)}`);
      }
      process.stderr.write(`${lines.join("\n")}\n`);
      if (report.unsaved.length) setExit(ExitCode.stateNotSaved);
    });
  daemon
    .command("logs")
    .description("print the supervisor's log")
    .option("-n, --lines <count>", "only the last COUNT lines", (v) => {
      if (!/^\d+$/.test(v)) throw usageError(`--lines must be a number, not ${JSON.stringify(v)}`);
      return Number(v);
    })
    .option("--json", "print one JSON object: {path, lines: [text]} (lines: null when there is no log yet)")
    .action(async (opts: { lines?: number; json?: boolean }) => {
      const { daemonLogPath } = await import("../client/daemon.ts");
      const path = daemonLogPath(client());
      const { readFileSync } = await import("node:fs");
      let text: string;
      try {
        text = readFileSync(path, "utf8");
      } catch {
        if (opts.json) return print(JSON.stringify({ path, lines: null }));
        process.stderr.write(`No supervisor log yet (${path})\n`);
        return;
      }
      if (opts.lines !== undefined) text = text.split("\n").slice(-opts.lines - 1).join("\n");
      if (opts.json) return print(JSON.stringify({ path, lines: text.split("\n").filter((line, i, all) => line !== "" || i < all.length - 1) }));
      process.stdout.write(text);
    });

  program
    .command(SUPERVISOR_SUBCOMMAND, { hidden: true })
    .description("run the supervisor in the foreground (started by the client)")
    .action(async () => {
      const { runSupervisor } = await import("../supervisor/supervisor.ts");
      // Exit explicitly: nothing the supervisor opened may keep a finished supervisor alive.
      process.exit(await runSupervisor({ env: ctx.env }));
    });
}

function requireSession(ctx: CliContext): string {
  const name = ctx.session();
  if (name === undefined) throw usageError("This command needs a session: pass --session NAME (or set AWREPL_SESSION)");
  return name;
}

/** Commands that only read or act on a session: a name with no session and no snapshot is an error. */
const EXISTING = true;

async function withSession<T>(ctx: CliContext, flags: SessionFlags, fn: (s: RemoteSession) => Promise<T>, existing = false): Promise<T> {
  const name = requireSession(ctx);
  const session = await attach(name, { ...attachOptions(ctx, flags), existing, onNotice: (text) => void writeStream("stderr", `awrepl: ${text}\n`) });
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

/** (program.createOption: this module imports no commander value, see the top.) */
function timeoutOption(program: Command): Option {
  return program.createOption("--timeout <time>", "this call's deadline (500ms, 30s, 2m; bare = ms), 0 = none (default: the session's)").argParser((v) => countOption("--timeout", "timeoutMs", v));
}

async function isDirectory(path: string): Promise<boolean> {
  const { statSync } = await import("node:fs");
  return statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
}

function print(text: string): void {
  void writeStream("stdout", text.endsWith("\n") || text === "" ? text : `${text}\n`);
}

/** `vars` (also run without commander: lib/cli/program.ts). */
export async function varsCommand(ctx: CliContext, flags: SessionFlags, opts: { json?: boolean }): Promise<void> {
  const vars = await withSession(ctx, flags, (s) => s.variables(), EXISTING);
  if (opts.json) return print(JSON.stringify(vars));
  const names = Object.keys(vars);
  const width = Math.min(24, Math.max(0, ...names.map((n) => n.length)));
  print(names.map((n) => `${n.padEnd(width)}  ${vars[n]}`).join("\n"));
}

/** `sessions` (also run without commander: lib/cli/program.ts). */
export async function sessionsCommand(ctx: CliContext, opts: { json?: boolean }): Promise<void> {
  const [{ listSessions }, names] = await Promise.all([import("../client/daemon.ts"), import("../session/snapshot_names.ts")]);
  const rows = await listSessions({ env: ctx.env, layout: ctx.layout });
  if (opts.json) return print(JSON.stringify(rows));
  // Sessions that exist only as a snapshot come back on their next use: say which, and which
  // come back empty (their state was not saved). An older layout is migrated first (as
  // snapshot_files.ts savedSessionNames() does; node:fs loads only then).
  const home = ctx.layout.home;
  let files = names.sessionFiles(home);
  if (files.flat) {
    (await import("../session/snapshot_files.ts")).migrateLegacyLayout(home);
    files = names.sessionFiles(home);
  }
  const running = new Set(rows.map((r) => r.name));
  const saved = files.saved.filter((n) => !running.has(n));
  const lost = files.known.filter((n) => !running.has(n) && !saved.includes(n));
  const table = rows.length === 0 && saved.length + lost.length > 0 ? "No sessions running" : sessionsTable(rows);
  const lines = [table];
  if (saved.length) lines.push(`Saved, restored on next use: ${saved.join(", ")}`);
  if (lost.length) lines.push(`State NOT saved (re-created empty on next use): ${lost.join(", ")}`);
  print(lines.join("\n"));
}

function snapshotText(r: SnapshotReport): string {
  const lines = [`Saved ${r.saved.length} name(s) to ${r.path} (${r.bytes} bytes)`];
  for (const s of r.skipped) lines.push(`skipped ${s.name}: ${s.reason}`);
  if (r.pruned.length) lines.push(`pruned from the session: ${r.pruned.join(", ")}`);
  return lines.join("\n");
}

function restoreText(r: RestoreReport): string {
  const lines = [`Restored ${r.restored.length} name(s) from ${r.source}${r.restored.length ? `: ${r.restored.join(", ")}` : ""}`];
  for (const f of r.failed) lines.push(`not restored ${f.name}: ${f.reason}`);
  return lines.join("\n");
}

/** The `sessions` table (also the MCP `sessions` tool's text). */
export function sessionsTable(rows: SessionInfo[]): string {
  if (rows.length === 0) return "No sessions";
  // Where each worker runs, once any runs elsewhere than a plain local process: pid, cwd and RSS are
  // then the far side's (or the sandbox's), as the worker reported them.
  const where = rows.some((r) => r.worker === "transport" || r.sandbox);
  // Each limit with its use, once any session has limits (the mechanisms are in --json).
  const limited = rows.some((r) => r.limits);
  const header = ["NAME", "PID", ...(where ? ["WHERE"] : []), "STATE", "CELLS", "AGE", "IDLE", "RSS", ...(limited ? ["LIMITS"] : []), "PYTHON", "CWD"];
  const lines = rows.map((r) => [
    r.name,
    String(r.pid ?? "-"),
    ...(where ? [r.worker === "transport" ? `host ${r.host ?? "?"}` : r.sandbox ? "sandbox" : "local"] : []),
    r.queued ? `${r.state}+${r.queued}` : r.state,
    String(r.cells_run),
    duration(r.age_ms),
    duration(r.idle_ms),
    bytes(r.rss_bytes),
    ...(limited ? [limitsCell(r.limits)] : []),
    r.python,
    r.cwd,
  ]);
  const all = [header, ...lines];
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] as string).length)));
  return all.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] as number))).join("  ")).join("\n");
}

function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor(s / 3600) % 24).padStart(2, "0")}h`;
}

/** "mem 40.1M/256.0M procs 5/32 file 1.0M": each limit's use against it ("-" without limits); a limit left out (best effort) is "none". */
function limitsCell(u: SessionInfo["limits"]): string {
  if (!u) return "-";
  const m = u.mechanisms;
  const parts: string[] = [];
  if (m.memory) parts.push(`mem ${bytes(u.memory_bytes)}/${m.memory === "none" ? "none" : bytes(u.limits.memory_bytes ?? null)}`);
  if (m.procs) parts.push(`procs ${u.procs ?? "-"}/${m.procs === "none" ? "none" : u.limits.max_procs}`);
  if (m.cpu) parts.push(`cpu ${m.cpu === "none" ? "none" : `${u.limits.cpu_percent}%`}`);
  if (m.file_size) parts.push(`file ${m.file_size === "none" ? "none" : bytes(u.limits.max_file_bytes ?? null)}`);
  return parts.join(" ") || "-";
}

function bytes(n: number | null): string {
  if (n === null) return "-";
  if (n < 1024 * 1024) return `${Math.round(n / 1024)}K`;
  return `${(n / (1024 * 1024)).toFixed(1)}M`;
}
