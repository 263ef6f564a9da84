// `awrepl -s NAME history`, `export FILE.ipynb|FILE.py` and `watch`: a person's view of what ran in a
// session, whoever ran it (docs/history.md). The history is the supervisor's (lib/supervisor/history.ts);
// the notebook and script formats are notebook.ts's, following live is watch.ts's.
import type { Command } from "commander";
import { attach } from "../client/attach.ts";
import { AwreplError, usageError } from "../core/errors.ts";
import { resolvePath as resolve } from "../core/fastio.ts";
import type { HistoryCell, HistoryValue } from "../protocol/supervisor.ts";
import type { CliContext } from "./context.ts";
import { countOption } from "./options.ts";
import { attachOptions, type SessionFlags } from "./session_options.ts";
import { writeStream } from "./stdio.ts";

export function registerHistoryCommands(program: Command, ctx: CliContext, flags: () => SessionFlags, setExit: (code: number) => void): void {
  program
    .command("history")
    .description("the cells the session ran, oldest first: number, who ran it (cli, serve, mcp, library, python, kernel), when, status, code and result")
    .addOption(program.createOption("-n, --last <count>", "only the newest COUNT cells").argParser((v) => wholeNumber("--last", v)))
    .option("--json", "print one JSON object: {session, cells: [{n, code, client, started_at, duration_ms, status, result}], total, dropped}")
    .action(async (opts: { last?: number; json?: boolean }) => {
      const history = await readHistory(ctx, flags(), opts.last);
      await writeStream("stdout", opts.json ? `${JSON.stringify(history)}\n` : renderHistory(history));
    });

  program
    .command("export")
    .description("write the session's history as a notebook (FILE.ipynb, nbformat 4.5, images embedded) or as a script of # %% cells (FILE.py)")
    .argument("<file>", "FILE.ipynb or FILE.py (replaced if it exists)")
    .addOption(program.createOption("-n, --last <count>", "only the newest COUNT cells").argParser((v) => wholeNumber("--last", v)))
    .option("--json", "print one JSON object: {session, path, cells}")
    .action(async (file: string, opts: { last?: number; json?: boolean }) => {
      const { exportFormat, historyNotebook, historyScript } = await import("./notebook.ts");
      const format = exportFormat(file);
      const history = await readHistory(ctx, flags(), opts.last);
      const { readFileSync, writeFileSync } = await import("node:fs");
      const readDisplayFile = (path: string) => {
        try {
          return readFileSync(path);
        } catch {
          return null;
        }
      };
      const text = format === "ipynb" ? `${JSON.stringify(historyNotebook(history, readDisplayFile), null, 1)}\n` : historyScript(history);
      const path = resolve(ctx.cwd, file);
      try {
        writeFileSync(path, text);
      } catch (err) {
        throw new AwreplError("usage", `Cannot write ${JSON.stringify(file)}: ${(err as Error).message}`);
      }
      const line = opts.json ? JSON.stringify({ session: history.session, path, cells: history.cells.length }) : `exported ${history.cells.length} cell(s) of session ${history.session} to ${path}`;
      await writeStream("stdout", `${line}\n`);
    });

  program
    .command("watch")
    .description("follow the session live: each cell's code as it starts and its output as it arrives, from whichever client runs it, until Ctrl-C")
    .option("--json", "one JSON object per line, as the supervisor sends them (watching, cell, stdout, stderr, display, cell_end, dropped)")
    .action(async (opts: { json?: boolean }) => {
      const { watchCommand } = await import("./watch.ts");
      setExit(await watchCommand(ctx, requireSession(ctx), opts.json === true));
    });
}

function requireSession(ctx: CliContext): string {
  const name = ctx.session();
  if (name === undefined) throw usageError("This command needs a session: pass --session NAME (or set AWREPL_SESSION)");
  return name;
}

function wholeNumber(flag: string, text: string): number {
  const n = countOption(flag, "historyMaxCells", text);
  if (!Number.isInteger(n)) throw usageError(`${flag} needs a whole number of cells, not ${JSON.stringify(text)}`);
  return n;
}

async function readHistory(ctx: CliContext, flags: SessionFlags, last: number | undefined): Promise<HistoryValue> {
  const session = await attach(requireSession(ctx), { ...attachOptions(ctx, flags), existing: true });
  try {
    return await session.history(last === undefined ? {} : { last });
  } finally {
    await session.close();
  }
}

/** The history as text: a header line per cell, its code, then what it printed and its value or error. */
export function renderHistory(history: HistoryValue): string {
  const older = history.total - history.dropped - history.cells.length;
  const lines: string[] = [];
  if (history.dropped > 0) lines.push(`(${history.dropped} oldest cell(s) dropped by the history's bounds)`);
  if (older > 0) lines.push(`(${older} older cell(s) not shown)`);
  if (history.cells.length === 0) lines.push(`Session ${history.session} has no history yet`);
  for (const cell of history.cells) lines.push(renderCell(cell));
  return `${lines.join("\n")}\n`;
}

function renderCell(cell: HistoryCell): string {
  const r = cell.result;
  const out = [`[${cell.n}] ${cell.client}  ${cell.started_at}  ${cell.status}  ${cell.duration_ms} ms`];
  cell.code.replace(/\n$/, "").split("\n").forEach((line, i) => out.push(`${i === 0 ? ">>> " : "... "}${line}`));
  for (const text of [r.stdout, r.stderr]) if (text) out.push(text.replace(/\n$/, ""));
  for (const item of r.display) {
    const kinds = Object.keys(item).filter((k) => k.includes("/"));
    const files = kinds.filter((k) => item.metadata?.[k]).map((k) => `${k} ${item[k]}`);
    if (item.source !== "value") out.push(`[display: ${files.length ? files.join(", ") : kinds.join(", ")}]`);
  }
  if (r.value !== null) out.push(r.value);
  if (r.exception !== null) out.push(r.exception);
  if (r.truncated) out.push(`[${r.truncated_bytes} bytes of output were cut from the result]`);
  return `${out.join("\n")}\n`;
}
