// `awrepl mcp`: the command's declaration and its edge — flags and settings resolved here, once, and
// handed to the server (lib/mcp/server.ts), which is imported only when the command runs: the MCP SDK
// sits in a chunk of its own that no other command loads. And `awrepl -s NAME wait`, which collects
// from a shell what the server's detached cells leave (one module: one chunk for the program to load).
import type { Command } from "commander";
import { AwreplError, ExitCode, exitCodeForStatus, usageError } from "../core/errors.ts";
import { MAX_DELAY_MS } from "../core/limits.ts";
import type { CliContext } from "./context.ts";
import { countOption } from "./options.ts";

/** MCP's defaults (smaller output than the CLI's: hosts count tokens; a wait under the ~60 s after which hosts give up). */
export const MCP_DEFAULTS = {
  maxOutputBytes: 20_000,
  waitMs: 50_000,
  maxImageBytes: 512 * 1024,
} as const;

type McpFlags = { cwd?: string; maxOutput?: number; wait?: number; maxImage?: number };

/** Declares `mcp` and `wait`. */
export function registerMcpCommands(program: Command, ctx: CliContext, setExit: (code: number) => void, pythonFlag: () => string | undefined, version: string): void {
  program
    .command("mcp")
    .description("serve the Model Context Protocol over stdio: run, wait, interrupt, variables, inspect, sessions, reset, close (for agent hosts)")
    .option("--cwd <dir>", "working directory of new sessions, and what the default session name derives from (default: the current one)")
    .option(
      "--max-output <size>",
      `bytes of stdout+stderr a result keeps (64K, 1M; bare = bytes), unless a call asks (default ${MCP_DEFAULTS.maxOutputBytes})`,
      (v) => countOption("--max-output", "maxOutputBytes", v),
    )
    .option(
      "--wait <time>",
      `how long \`run\` and \`wait\` wait before answering status running (30s, 2m; bare = ms), unless a call asks (default ${MCP_DEFAULTS.waitMs} ms)`,
      (v) => countOption("--wait", "waitMs", v),
    )
    .option(
      "--max-image <size>",
      `largest display image returned as image content; larger ones: the path only (default ${MCP_DEFAULTS.maxImageBytes})`,
      (v) => countOption("--max-image", "maxImageBytes", v),
    )
    .addHelpText(
      "after",
      [
        "",
        "The session: --session NAME, else $AWREPL_SESSION, else the working directory's name plus a short",
        "hash of its path; every tool takes a `session` argument too. Sessions are the supervisor's: a person",
        "can `awrepl -s NAME serve` into what the agent built, and a host that restarts the server loses",
        "nothing (cells run on; `wait` collects their results). --python and --cwd apply to new sessions.",
        "See README.md (MCP) for host configuration snippets, docs/mcp.md for the tools.",
      ].join("\n"),
    )
    .action(async (flags: McpFlags) => {
      setExit(await mcpCommand(ctx, flags, pythonFlag(), version));
    });
  registerWaitCommand(program, ctx, setExit);
}

async function mcpCommand(ctx: CliContext, flags: McpFlags, python: string | undefined, version: string): Promise<number> {
  const [{ resolve }, { statSync }, { resolveSettings }, { attachOptions, sessionLimits }, { renderText }, { sessionsTable }, { sessionNameForDir }, { MAX_OUTPUT_RANGE }] = await Promise.all([
    import("node:path"),
    import("node:fs"),
    import("../settings/context.ts"),
    import("./session_options.ts"),
    import("./render.ts"),
    import("./session_commands.ts"),
    import("../mcp/session_name.ts"),
    import("../mcp/schemas.ts"),
  ]);
  if (flags.maxOutput !== undefined && (flags.maxOutput < MAX_OUTPUT_RANGE.min || flags.maxOutput > MAX_OUTPUT_RANGE.max)) {
    throw usageError(`--max-output must be between ${MAX_OUTPUT_RANGE.min} and ${MAX_OUTPUT_RANGE.max} bytes, not ${flags.maxOutput}`);
  }
  // --cwd stands for the project (hosts start servers anywhere: Claude Desktop in /): new sessions
  // start there, the default name derives from it, and its awrepl.jsonc is the one read.
  let settings = ctx;
  if (flags.cwd !== undefined) {
    const dir = resolve(ctx.cwd, flags.cwd);
    if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw usageError(`--cwd ${JSON.stringify(flags.cwd)} is not a directory`);
    settings = { ...(await resolveSettings(ctx.env, dir)), session: ctx.session, sessionFlags: ctx.sessionFlags };
    for (const notice of settings.config().notices ?? []) process.stderr.write(`awrepl: ${notice}\n`);
  }
  // --python and the sandbox options (global: `awrepl mcp --sandbox`) shape the sessions it creates.
  const sessionFlags = { ...ctx.sessionFlags(), python };
  // The config's limits (the program's context says its notices itself), resolved once: the sessions
  // this server creates get them, and its cells their timeout; a result keeps MCP's smaller output.
  const limits = sessionLimits(settings, sessionFlags);
  // --session, then AWREPL_SESSION (ctx.session() checks both), then the directory's name.
  const defaultSession = ctx.session() ?? sessionNameForDir(settings.cwd);
  const { runMcpServer } = await import("../mcp/server.ts");
  const heartbeat = ctx.env.AWREPL_MCP_HEARTBEAT_MS; // tests only: a shorter heartbeat
  return runMcpServer({
    defaultSession,
    attach: { ...attachOptions(settings, sessionFlags, limits), layout: settings.layout, clientEnv: settings.env },
    cell: { timeoutMs: limits.timeoutMs, maxOutputBytes: flags.maxOutput ?? MCP_DEFAULTS.maxOutputBytes },
    waitMs: flags.wait ?? MCP_DEFAULTS.waitMs,
    maxImageBytes: flags.maxImage ?? MCP_DEFAULTS.maxImageBytes,
    heartbeatMs: heartbeat ? countOption("AWREPL_MCP_HEARTBEAT_MS", "heartbeatMs", heartbeat) : undefined,
    format: { result: (r) => renderText(r, { omittedFramesHint: "the full traceback is in the result's `traceback` field" }), sessions: sessionsTable },
    version,
    debug: Boolean(ctx.env.AWREPL_DEBUG),
  });
}

// `awrepl -s NAME wait [--timeout MS] [--json]`: the result of the session's detached cell (one an
// agent's MCP server left running, or left behind when its host restarted it), printed as `run` prints a
// result, with `run`'s exit status. It only waits: Ctrl-C leaves the cell running.
type WaitFlags = { timeout?: number; json?: boolean; traceback?: boolean; output?: boolean };

function registerWaitCommand(program: Command, ctx: CliContext, setExit: (code: number) => void): void {
  program
    .command("wait")
    .description("wait for the session's detached cell (ID: the one `run --detach` printed; default: the one an agent's `awrepl mcp` left running) and print its result")
    .argument("[id]", "the cell's id (`run --detach`, `run --id`)")
    .option("--timeout <time>", "stop waiting after this long (500ms, 30s, 2m; bare = ms; the cell keeps running; exit 124); default: until it ends", (v) => countOption("--timeout", "waitMs", v))
    .option("--json", "print one JSON object: the ExecResult, or {state: running|idle}")
    .option("--traceback", "show every traceback frame")
    .action(async (id: string | undefined, flags: WaitFlags) => {
      setExit(id === undefined ? await waitCommand(ctx, flags) : await cellCommand(ctx, id, flags, "wait"));
    });
  program
    .command("status")
    .description("say whether the session's cell ID is running or finished, and for how long (no ID: whether the session is busy)")
    .argument("[id]", "the cell's id (`run --detach`, `run --id`)")
    .option("--json", "print one JSON object: {id, state: running|done|dropped, elapsed_ms | finished_ms_ago, status}")
    .option("--output", "with ID, of a running cell: also its latest output so far (at most 8192 characters)")
    .action(async (id: string | undefined, flags: { json?: boolean; output?: boolean }) => {
      if (flags.output && id === undefined) throw usageError("status --output needs a cell id: awrepl -s NAME status ID --output");
      setExit(id === undefined ? await sessionBusy(ctx, flags) : await cellCommand(ctx, id, flags, "status"));
    });
}

/** `wait ID` (waits, prints the result as `run` does) and `status ID` (only looks): the cell `run --detach` named. */
async function cellCommand(ctx: CliContext, id: string, flags: WaitFlags, verb: "wait" | "status"): Promise<number> {
  const name = ctx.session();
  if (name === undefined) throw usageError(`${verb} needs a session: awrepl -s NAME ${verb} ${id} (or set AWREPL_SESSION)`);
  const [{ attach }, { renderJson, renderText, useColor, writeRendered }, { writeStream }] = await Promise.all([
    import("../client/attach.ts"),
    import("./render.ts"),
    import("./stdio.ts"),
  ]);
  const session = await attach(name, { clientEnv: ctx.env, layout: ctx.layout });
  try {
    const waitMs = verb === "status" ? 0 : flags.timeout === undefined || flags.timeout === 0 ? MAX_DELAY_MS : flags.timeout;
    const got = await session.wait(id, { waitMs, output: flags.output === true });
    const seconds = (ms: number | null) => (ms === null ? "?" : `${(ms / 1000).toFixed(1)} s`);
    if (got.state === "dropped") {
      if (flags.json) await writeStream("stdout", `${JSON.stringify({ id, state: "dropped", reason: got.reason })}\n`);
      await writeStream("stderr", `awrepl: the result of cell ${id} in session ${name} is no longer kept: ${got.reason}\n`);
      return ExitCode.usage;
    }
    if (got.state === "running") {
      const output = got.output !== undefined ? { output: got.output } : {};
      if (flags.json) await writeStream("stdout", `${JSON.stringify({ id, state: "running", elapsed_ms: got.elapsedMs, ...output })}\n`);
      if (verb === "status" && !flags.json) await writeStream("stdout", `${id}: running for ${seconds(got.elapsedMs)}\n${got.output ?? ""}`);
      if (verb === "wait") {
        await writeStream("stderr", `awrepl: cell ${id} in session ${name} is still running after ${seconds(got.elapsedMs)}; wait again, or stop it with 'awrepl -s ${name} interrupt'\n`);
      }
      return verb === "wait" ? ExitCode.timeout : ExitCode.ok;
    }
    if (got.state !== "done") return ExitCode.ok;
    if (verb === "status") {
      const line = { id, state: "done", status: got.result.status, duration_ms: got.result.duration_ms, finished_ms_ago: got.finishedMsAgo ?? null };
      await writeStream(
        "stdout",
        flags.json ? `${JSON.stringify(line)}\n` : `${id}: finished (${got.result.status}) ${seconds(got.finishedMsAgo ?? null)} ago, after running ${seconds(got.result.duration_ms)}\n`,
      );
      return ExitCode.ok;
    }
    if (flags.json) await writeStream("stdout", renderJson(got.result));
    else await writeRendered(renderText(got.result, { traceback: flags.traceback, color: useColor(process.stderr.isTTY, ctx.env) }));
    return exitCodeForStatus(got.result.status);
  } finally {
    await session.close();
  }
}

/** `status` without an id: whether the session runs a cell now, and how many calls wait behind it. */
async function sessionBusy(ctx: CliContext, flags: { json?: boolean }): Promise<number> {
  const name = ctx.session();
  if (name === undefined) throw usageError("status needs a session: awrepl -s NAME status [ID] (or set AWREPL_SESSION)");
  const [{ listSessions }, { writeStream }] = await Promise.all([import("../client/daemon.ts"), import("./stdio.ts")]);
  const row = (await listSessions({ env: ctx.env, layout: ctx.layout })).find((r) => r.name === name);
  if (!row) throw new AwreplError("session_not_found", `No session named ${JSON.stringify(name)} is running`);
  const text = row.state === "busy" ? `${name}: busy (${row.queued} queued)` : `${name}: idle for ${(row.idle_ms / 1000).toFixed(1)} s`;
  await writeStream("stdout", flags.json ? `${JSON.stringify({ session: name, state: row.state, queued: row.queued, idle_ms: row.idle_ms })}\n` : `${text}\n`);
  return ExitCode.ok;
}

async function waitCommand(ctx: CliContext, flags: WaitFlags): Promise<number> {
  const name = ctx.session();
  if (name === undefined) throw usageError("wait needs a session: awrepl -s NAME wait (or set AWREPL_SESSION)");
  const [{ collectResult }, { renderJson, renderText, useColor, writeRendered }, { writeStream }] = await Promise.all([
    import("../client/daemon.ts"),
    import("./render.ts"),
    import("./stdio.ts"),
  ]);
  const waitMs = flags.timeout === undefined || flags.timeout === 0 ? MAX_DELAY_MS : flags.timeout;
  const got = await collectResult(name, { env: ctx.env, layout: ctx.layout, waitMs });
  if (got.state === "done") {
    if (flags.json) await writeStream("stdout", renderJson(got.result));
    else await writeRendered(renderText(got.result, { traceback: flags.traceback, color: useColor(process.stderr.isTTY, ctx.env) }));
    return exitCodeForStatus(got.result.status);
  }
  if (flags.json) await writeStream("stdout", `${JSON.stringify(got.state === "running" ? { state: "running", elapsed_ms: got.elapsedMs } : { state: "idle" })}\n`);
  if (got.state === "running") {
    const where = got.elapsedMs === null ? "is still queued" : `is still running after ${(got.elapsedMs / 1000).toFixed(1)} s`;
    await writeStream("stderr", `awrepl: the detached cell in session ${name} ${where}; wait again, or stop it with 'awrepl -s ${name} interrupt'\n`);
    return ExitCode.timeout;
  }
  await writeStream("stderr", `awrepl: nothing to wait for in session ${name}: no detached cell is running and no result was kept\n`);
  return ExitCode.ok;
}
