// `awrepl run -f FILE.ipynb`: a notebook's code cells run in order, in the named session (or in one
// ephemeral worker for them all), each printed as `run` prints a cell; markdown and raw cells are
// skipped, and `!`/`%` lines go to the runtime as they are (it understands them). The first cell that
// fails stops the run unless --keep-going; the exit status is that of the first failing cell.
import { attach, type RemoteExecuteOptions, type RemoteSession } from "../client/attach.ts";
import { ExitCode, exitCodeForStatus, usageError } from "../core/errors.ts";
import { resolvePath as resolve } from "../core/fastio.ts";
import type { ExecResult } from "../protocol/result.ts";
import type { ReplSession } from "../session/session.ts";
import type { CliContext } from "./context.ts";
import { watchCtrlC } from "./ctrl_c.ts";
import { notebookCodeCells } from "./notebook.ts";
import { LiveEcho, renderJson, renderText, useColor, writeRendered } from "./render.ts";
import type { RunArgs } from "./run_args.ts";
import { attachOptions, ownSessionOptions, sessionLimits } from "./session_options.ts";
import { writeStream } from "./stdio.ts";

export async function runNotebook(args: RunArgs & { keepGoing?: boolean }, ctx: CliContext): Promise<number> {
  if (args.code !== undefined) throw usageError("Give the cell as CODE or as -f FILE, not both");
  if (args.id !== undefined || args.detach) throw usageError("run -f FILE.ipynb runs several cells: --id and --detach name one cell each");
  if (args.displayDir !== undefined) throw usageError("run -f FILE.ipynb does not take --display-dir (the result's display paths stay in the state directory)");
  const path = resolve(ctx.cwd, args.file as string);
  const { readFileSync } = await import("node:fs");
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw usageError(`Cannot read notebook ${JSON.stringify(args.file)}: ${(err as Error).message}`);
  }
  const cells = notebookCodeCells(text, `Notebook ${JSON.stringify(args.file)}`);
  const name = ctx.session();
  const flags = { ...ctx.sessionFlags(), python: args.python, timeoutMs: args.timeoutMs, maxOutputBytes: args.maxOutputBytes, autosave: args.autosave };
  const limits = sessionLimits(ctx, flags);
  const ctrlC = watchCtrlC({ onRepeat: () => process.exit(ExitCode.interrupted) });
  let session: RemoteSession | ReplSession | undefined;
  const results: { cell: number; result: ExecResult }[] = [];
  let exit: number = ExitCode.ok;
  try {
    if (name !== undefined) session = await attach(name, attachOptions(ctx, flags, limits));
    else {
      const { ReplSession } = await import("../session/session.ts");
      session = await ReplSession.start("run", { ...ownSessionOptions(ctx, flags, limits), keepDisplayFiles: true });
    }
    const { timeoutMs, maxOutputBytes } = limits;
    for (const [i, cell] of cells.entries()) {
      if (ctrlC.signal.aborted) return ExitCode.interrupted;
      if (!args.json) await writeStream("stderr", `awrepl: cell ${cell.index} (${i + 1} of ${cells.length} code cells)\n`);
      const live = args.json ? undefined : new LiveEcho(maxOutputBytes, (stream, text) => void writeStream(stream, text));
      const options: RemoteExecuteOptions = { timeoutMs, maxOutputBytes, signal: ctrlC.signal };
      if (live) {
        options.onRawOutput = (stream, raw) => live.outputRaw(stream, raw);
        const head = LiveEcho.headBytes(maxOutputBytes);
        if (Number.isFinite(head)) options.liveLimit = head;
      }
      const result = await session.execute(cell.code, options);
      if (name === undefined) result.session = null;
      results.push({ cell: cell.index, result });
      if (!args.json) {
        const color = result.status !== "ok" && useColor(process.stderr.isTTY, ctx.env);
        await writeRendered(renderText(result, { traceback: args.traceback, color, echoed: live?.echoed }));
      }
      if (result.status !== "ok" && exit === ExitCode.ok) exit = exitCodeForStatus(result.status);
      if (result.status === "interrupted" && ctrlC.signal.aborted) break;
      if (result.status !== "ok" && !args.keepGoing) {
        const left = cells.length - i - 1;
        if (left > 0 && !args.json) await writeStream("stderr", `awrepl: stopped at cell ${cell.index} (${result.status}); ${left} code cell(s) not run (--keep-going runs them)\n`);
        break;
      }
    }
    if (args.json) {
      const cellsJson = results.map((r) => `{"cell":${r.cell},"result":${renderJson(r.result).trimEnd()}}`).join(",");
      await writeStream("stdout", `{"notebook":${JSON.stringify(path)},"session":${JSON.stringify(name ?? null)},"code_cells":${cells.length},"cells":[${cellsJson}]}\n`);
    }
    return exit;
  } finally {
    ctrlC.dispose();
    await session?.close();
  }
}
