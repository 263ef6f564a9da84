// The body of `serve`, loaded only when the command runs: opens the session (attached in the supervisor
// when named, a worker of its own when not), picks the terminal or the piped mode, and leaves cleanly.
import { attach } from "../../client/attach.ts";
import { listSessions } from "../../client/daemon.ts";
import type { HomeLayout } from "../../settings/home.ts";
import { ReplSession } from "../../session/session.ts";
import type { Session } from "../../protocol/api.ts";
import type { CliContext } from "../context.ts";
import { attachOptions, ownSessionOptions, sessionLimits } from "../session_options.ts";
import { Terminal } from "./cell.ts";
import { HistoryFile, historyPath } from "./history.ts";
import { servePiped } from "./piped.ts";
import type { ServeRun } from "./run.ts";
import { columns, makeStyle } from "./style.ts";
import { serveTerminal } from "./tty.ts";

export type ServeOptions = { timeoutMs?: number; maxOutputBytes?: number; exitOnError?: boolean; python?: string };

/** The id of the worker an unnamed `serve` starts: per process, so two never share display files. */
const UNNAMED_ID = `serve-${process.pid}`;

export async function serve(ctx: CliContext, flags: ServeOptions): Promise<number> {
  const interactive = Boolean(process.stdin.isTTY);
  // A person at a terminal has Ctrl-C, so no deadline by default; a script gets the configured one.
  const sessionFlags = { ...ctx.sessionFlags(), python: flags.python, timeoutMs: flags.timeoutMs ?? (interactive ? 0 : undefined), maxOutputBytes: flags.maxOutputBytes };
  // This command's limits, its flags over the config: settled here, once, for its session and its cells.
  const limits = sessionLimits(ctx, sessionFlags);
  const { timeoutMs, maxOutputBytes } = limits;
  const name = ctx.session();
  let session: Session;
  if (name !== undefined) {
    // A serve outlives supervisors (daemon stop, an upgrade, a crash): the session reconnects by
    // itself, and completion and the like are sent again when a supervisor's end cut them off.
    session = await attach(name, {
      ...attachOptions(ctx, sessionFlags, limits),
      layout: ctx.layout,
      resendSafeCalls: true,
      // The session keeps its own interpreter and sandbox: a different ask is said, not ignored.
      onNotice: (text) => void process.stderr.write(`awrepl: ${text}\n`),
    });
    // attach() makes no round trip; the first call creates the session, so a bad interpreter is
    // reported now, before the banner, and the banner can say which Python runs it.
    await session.isComplete("").catch(async (err) => {
      await session.close().catch(() => {});
      throw err;
    });
  } else {
    session = await ReplSession.start(UNNAMED_ID, ownSessionOptions(ctx, sessionFlags, limits));
  }

  const term = new Terminal(process.stdout, process.stderr, makeStyle(Boolean(process.stdout.isTTY), ctx.env));
  const run: ServeRun = { session, name, term, state: { timeoutMs, maxOutputBytes } };
  // A closed terminal, a kill, or a reader that went away (`awrepl serve < cells | head`) still ends an
  // unnamed session's worker (a named one stays) and gives the terminal back in its normal mode.
  const end = (status: number) => {
    term.mute();
    try {
      if (process.stdin.isTTY) process.stdin.setRawMode(false);
    } catch {
      // A terminal that hung up cannot be reset, and needs no resetting.
    }
    // Closing ends an unnamed worker gracefully; the timer makes sure leaving never hangs on it.
    setTimeout(() => process.exit(status), 3_000).unref();
    void session.close().finally(() => process.exit(status));
  };
  const endOnSignal = (signal: NodeJS.Signals) => end(signal === "SIGHUP" ? 129 : 143);
  const endOnBrokenPipe = (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") end(141); // as if killed by SIGPIPE, like any Unix filter
  };
  process.once("SIGHUP", endOnSignal);
  process.once("SIGTERM", endOnSignal);
  process.stdout.on("error", endOnBrokenPipe);
  process.stderr.on("error", endOnBrokenPipe);
  try {
    if (interactive) {
      return await serveTerminal(run, {
        input: process.stdin,
        // Prompts go where a person sees them: `awrepl serve | tee log` keeps them out of the log.
        output: process.stdout.isTTY || !process.stderr.isTTY ? process.stdout : process.stderr,
        history: new HistoryFile(historyPath(ctx.layout.home, name)),
        python: await describePython(session, name, ctx.layout),
      });
    }
    return await servePiped(run, process.stdin, { exitOnError: Boolean(flags.exitOnError), width: columns(process.stdout) });
  } finally {
    process.off("SIGHUP", endOnSignal);
    process.off("SIGTERM", endOnSignal);
    // close() ends an unnamed session's worker; for a named one it only detaches this client.
    await session.close().catch(() => {
      // Leaving must not fail because the worker or the supervisor is already gone.
    });
  }
}

/** "Python 3.11.2 (/usr/bin/python3)" for the banner, or as much of it as is known. */
async function describePython(session: Session, name: string | undefined, layout: HomeLayout): Promise<string | undefined> {
  let command: string | undefined;
  let version: string | null | undefined;
  if (session instanceof ReplSession) {
    const info = session.info();
    command = info.python;
    version = info.pythonVersion;
  } else {
    // The supervisor lists it as "COMMAND (VERSION)".
    const listed = (await listSessions({ layout }).catch(() => [])).find((s) => s.name === name)?.python;
    const m = listed ? /^(.*) \(([^()]*)\)$/.exec(listed) : null;
    command = m ? m[1] : listed;
    version = m?.[2];
  }
  version = version?.split(/\s/)[0];
  if (version && command) return `Python ${version} (${command})`;
  return version ? `Python ${version}` : command;
}
