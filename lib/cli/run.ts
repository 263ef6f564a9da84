// `awrepl run`: read the cell, run it in an ephemeral worker (no session) or in a supervisor-held
// session (--session / AWREPL_SESSION), stream its output, render the result, return the exit status.
//
// This module is on the hot path (`awrepl -s s run "1+1"`), so it imports no node: module and nothing
// heavy at the top: the client it needs for a named session is imported statically (a dynamic import
// costs a module load and promise turns of its own), the in-process session of an ephemeral run is
// loaded when one is needed, and parseFastRun lets main() skip building the commander program for a
// well-formed `run` command.
import { attach, connectEarly, type RemoteExecuteOptions, type RemoteSession } from "../client/attach.ts";
import { setClientKind } from "../client/connection.ts";
import { ExitCode, exitCodeForStatus, usageError } from "../core/errors.ts";
import { resolvePath as resolve } from "../core/fastio.ts";
import { IDEMPOTENCY, parseCount } from "../core/limits.ts";
import { durationMs } from "../core/units.ts";
import { killGroup } from "../core/process.ts";
import { SESSION_NAME } from "../core/names.ts";
import type { ExecResult } from "../protocol/result.ts";
import type { ReplSession } from "../session/session.ts";
import type { CliContext } from "./context.ts";
import type { SandboxFlags } from "./session_options.ts";
import type { RunArgs } from "./run_args.ts";

export type { RunArgs };
import { readCell } from "./input.ts";
import { LiveEcho, renderJson, renderText, useColor, writeRendered } from "./render.ts";
import { watchCtrlC } from "./ctrl_c.ts";
import { attachOptions, ownSessionOptions, sessionLimits } from "./session_options.ts";
import { writeStream } from "./stdio.ts";

/** The id an ephemeral `run` gives its worker; the result reports `session: null`. */
const EPHEMERAL_ID = "run";

export async function runCommand(args: RunArgs, ctx: CliContext): Promise<number> {
  setClientKind("cli");
  if (args.file?.endsWith(".ipynb")) return (await import("./notebook_run.ts")).runNotebook(args, ctx);
  if (args.keepGoing) throw usageError("--keep-going is for run -f FILE.ipynb (a notebook's cells)");
  const name = ctx.session();
  if (args.id !== undefined) checkIdFlag(args.id, name);
  if (args.detach && name === undefined) throw usageError("--detach needs a named session (-s NAME): an ephemeral worker ends with this command");
  // A named session: connect (and say hello) now, while the cell and the config are read.
  const early = name === undefined ? undefined : connectEarly({ clientEnv: ctx.env, layout: ctx.layout });
  let code: string;
  try {
    code = await readCell({ code: args.code, file: args.file });
  } catch (err) {
    void early?.conn.then((c) => c?.close(), () => {});
    throw err;
  }
  const flags = { ...ctx.sessionFlags(), python: args.python, timeoutMs: args.timeoutMs, maxOutputBytes: args.maxOutputBytes, autosave: args.autosave };
  // This command's limits, its flags over the config: settled here, once, for its session and its cell.
  const limits = sessionLimits(ctx, flags);
  // --display-dir: a directory that cannot be made is said before the cell runs, not after.
  let displayDir: { dir: string; move: (result: ExecResult, dir: string) => string[] } | undefined;
  if (args.displayDir !== undefined) {
    const { prepareDisplayDir, moveDisplayFiles } = await import("../session/display_dir.ts");
    if (args.displayDir.trim() === "") throw usageError("--display-dir needs a directory, not an empty string");
    displayDir = { dir: prepareDisplayDir(resolve(ctx.cwd, args.displayDir)), move: moveDisplayFiles };
  }

  // Code in C can ignore the interrupt: if the cell has not stopped after the grace period, an
  // ephemeral worker is ended (its state dies with this command anyway) and a named session is left
  // to its timeout; a second Ctrl-C stops waiting at once.
  let ephemeral: ReplSession | undefined;
  let stopWaiting: () => void = () => {};
  const gaveUp = new Promise<"gave up">((resolve) => (stopWaiting = () => resolve("gave up")));
  let abandoned = false; // the ephemeral worker was ended after Ctrl-C: its "died" is our doing
  const ctrlC = watchCtrlC({
    onRepeat() {
      if (ephemeral?.pid) killGroup(ephemeral.pid);
      process.exit(ExitCode.interrupted);
    },
    stuck: {
      graceMs: limits.graceMs,
      then() {
        const waited = `The cell did not stop within ${limits.graceMs} ms of Ctrl-C (code in C can ignore interrupts)`;
        if (ephemeral) {
          abandoned = true;
          void writeStream("stderr", `awrepl: ${waited}; ending its worker.\n`);
          void ephemeral.close().finally(stopWaiting);
        } else {
          void writeStream("stderr", `awrepl: ${waited}; the session runs it until its timeout. Ctrl-C again stops waiting.\n`);
        }
      },
    },
  });

  let session: ReplSession | RemoteSession | undefined;
  try {
    if (name !== undefined) {
      session = await attach(name, attachOptions(ctx, flags, limits), early);
    } else {
      const { ReplSession } = await import("../session/session.ts");
      // Its display files outlive it (bounded by the caps): the paths printed below must still open.
      session = ephemeral = await ReplSession.start(EPHEMERAL_ID, { ...ownSessionOptions(ctx, flags, limits), keepDisplayFiles: true });
    }
    if (ctrlC.signal.aborted) return ExitCode.interrupted;

    const { timeoutMs, maxOutputBytes } = limits;
    const live = args.json ? undefined : new LiveEcho(maxOutputBytes, (stream, text) => void writeStream(stream, text));
    // Sent with the cell: a session that exists already has limits of its own.
    const execOptions: RemoteExecuteOptions = { timeoutMs, maxOutputBytes, signal: ctrlC.signal };
    if (args.file !== undefined && args.file !== "-") execOptions.filename = resolve(args.file);
    if (args.id !== undefined) execOptions.id = args.id;
    // Undecoded: only the head the echo shows is ever decoded, however much the cell prints.
    if (live) {
      execOptions.onRawOutput = (stream, raw) => live.outputRaw(stream, raw);
      // The echo shows the first half of maxOutputBytes (LiveEcho); a supervisor sends no more than that.
      const head = LiveEcho.headBytes(maxOutputBytes);
      if (Number.isFinite(head)) execOptions.liveLimit = head;
    }
    if (args.detach) return await startDetached(session as RemoteSession, code, execOptions, args, name as string);
    const execution = session.execute(code, execOptions).catch((err: unknown) => {
      if (abandoned) return "gave up" as const; // we closed its worker ourselves
      throw err;
    });
    const started = performance.now();
    const result = await Promise.race([execution, gaveUp]);
    if (result === "gave up" || abandoned) {
      if (args.json) await writeStream("stdout", renderJson(abandonedResult(performance.now() - started)));
      return ExitCode.interrupted;
    }
    if (name === undefined) result.session = null;
    if (displayDir) {
      const failures = displayDir.move(result, displayDir.dir);
      if (failures.length > 0) result.notice = [result.notice, ...failures].filter(Boolean).join(" ");
    }

    if (args.json) await writeStream("stdout", renderJson(result));
    else {
      if (result.replayed) await writeStream("stderr", `awrepl: --id ${args.id}: this key ran before in session ${name}; its result is shown again, nothing ran\n`);
      // Only a failure is coloured; process.stderr is not touched otherwise (building it costs ms).
      const color = result.status !== "ok" && useColor(process.stderr.isTTY, ctx.env);
      await writeRendered(renderText(result, { traceback: args.traceback, color, echoed: live?.echoed }));
    }
    return exitCodeForStatus(result.status);
  } finally {
    ctrlC.dispose();
    // close() ends an ephemeral worker; for a named session it only detaches (the session stays).
    await session?.close();
  }
}

/**
 * `run --detach`: sends the cell detached under its id (--id, or a new one), has its result kept, and
 * prints the id once the supervisor holds the cell; the cell runs on after this command exits.
 */
async function startDetached(session: RemoteSession, code: string, options: RemoteExecuteOptions, args: RunArgs, name: string): Promise<number> {
  const id = args.id ?? `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  const { signal: _signal, onRawOutput: _raw, liveLimit: _live, ...rest } = options;
  const cell = session.executeDetached(code, { ...rest, id });
  // Its result also arrives here if it finishes first: nobody waits for it in this process.
  cell.result.catch(() => {});
  await cell.keepResult();
  await writeStream("stdout", args.json ? `${JSON.stringify({ id, state: "running", session: name })}\n` : `${id}\n`);
  return ExitCode.ok;
}

/** `--id KEY`: a key of IDEMPOTENCY.maxKeyLength characters at most, for a named session (an ephemeral worker keeps no keys). */
function checkIdFlag(id: string, session: string | undefined): void {
  if (session === undefined) throw usageError(`--id ${JSON.stringify(id)} needs a named session (-s NAME): an ephemeral run keeps no keys`);
  if (id === "" || id.length > IDEMPOTENCY.maxKeyLength) {
    throw usageError(`--id needs a key of 1 to ${IDEMPOTENCY.maxKeyLength} characters, not ${JSON.stringify(id.length > 40 ? `${id.slice(0, 40)}...` : id)}`);
  }
}

/** The result of an ephemeral cell whose worker was ended because it ignored Ctrl-C. */
function abandonedResult(elapsedMs: number): ExecResult {
  return {
    stdout: "",
    stderr: "",
    value: null,
    exception: "KeyboardInterrupt: the cell did not stop on Ctrl-C, so its worker was ended",
    traceback: "",
    duration_ms: durationMs(elapsedMs),
    truncated: false,
    truncated_bytes: 0,
    status: "interrupted",
    session: null,
    display: [],
  };
}

// ---------------------------------------------------------------------------------------------
// The fast path: a well-formed `run` command parsed without commander (it costs ~6 ms per start).
// It accepts only what commander would accept with the same meaning; anything else — an unknown or
// malformed option, a bad session name, --help — returns null and commander parses it (and reports
// any error), so there is one source of error messages.
// ---------------------------------------------------------------------------------------------

export type FastRun = { session?: string; run: RunArgs; sandbox: SandboxFlags };

export function parseFastRun(argv: readonly string[]): FastRun | null {
  let session: string | undefined;
  let python: string | undefined;
  const run: RunArgs = {};
  const sandbox: SandboxFlags = {};
  let sawRun = false;
  let positional: string | undefined;
  let endOfOptions = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const next = (): string | undefined => argv[++i];
    if (endOfOptions || !arg.startsWith("-") || arg === "-") {
      if (!sawRun) {
        if (arg !== "run" || endOfOptions) return null;
        sawRun = true;
      } else {
        if (positional !== undefined) return null;
        positional = arg;
      }
      continue;
    }
    const eq = arg.indexOf("=");
    const flag = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    const inline = arg.startsWith("--") && eq > 0 ? arg.slice(eq + 1) : undefined;
    const value = (): string | undefined => (inline !== undefined ? inline : next());
    if (flag === "--") {
      if (!sawRun) return null;
      endOfOptions = true;
    } else if (flag === "-s" || flag === "--session") {
      if (inline !== undefined && flag === "-s") return null;
      const v = value();
      if (v === undefined || !SESSION_NAME.test(v)) return null;
      session = v;
    } else if (flag === "--python") {
      const v = value();
      if (v === undefined || v.startsWith("-") || v.trim() === "") return null;
      python = v;
    } else if ((flag === "--sandbox" || flag === "--no-sandbox" || flag === "--sandbox-net" || flag === "--sandbox-git" || flag === "--sandbox-home") && inline === undefined) {
      if (flag === "--sandbox-net") sandbox.net = true;
      else if (flag === "--sandbox-git") sandbox.git = true;
      else if (flag === "--sandbox-home") sandbox.home = true;
      else sandbox.sandbox = flag === "--sandbox"; // the last one wins, as in commander
    } else if (flag === "--env" || flag === "--sandbox-write") {
      const v = value();
      if (v === undefined || v.startsWith("-") || v === "") return null; // commander says why
      if (flag === "--env") (sandbox.env ??= []).push(v);
      else (sandbox.write ??= []).push(v);
    } else if (!sawRun) {
      return null; // run's own options are not program options
    } else if (inline === undefined && (flag === "--json" || flag === "--traceback" || flag === "--autosave" || flag === "--detach")) {
      if (flag === "--json") run.json = true;
      else if (flag === "--autosave") run.autosave = true;
      else if (flag === "--detach") run.detach = true;
      else run.traceback = true;
    } else if (flag === "--timeout" || flag === "--max-output") {
      const v = value();
      const parsed = v === undefined ? null : parseCount(v, flag === "--timeout" ? "timeoutMs" : "maxOutputBytes");
      if (!parsed || "problem" in parsed) return null; // commander says why
      if (flag === "--timeout") run.timeoutMs = parsed.value;
      else run.maxOutputBytes = parsed.value;
    } else if (flag === "--id") {
      const v = value();
      if (v === undefined || (inline === undefined && v.startsWith("-"))) return null;
      run.id = v;
    } else if (flag === "--display-dir") {
      const v = value();
      if (v === undefined || v === "" || (inline === undefined && v.startsWith("-"))) return null;
      run.displayDir = v;
    } else if ((flag === "-f" || flag === "--file") && inline === undefined) {
      const v = next();
      if (v === undefined || (v.startsWith("-") && v !== "-")) return null;
      if (run.file !== undefined) return null;
      run.file = v;
    } else {
      return null;
    }
  }
  if (!sawRun) return null;
  if (positional !== undefined) run.code = positional;
  if (python !== undefined) run.python = python;
  return { session, run, sandbox };
}
