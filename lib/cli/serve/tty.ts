// The interactive REPL on a terminal: banner, prompts, multi-line cells decided by the runtime's
// `is_complete` (the continuation line is pre-filled with the indent it suggests), meta commands,
// history, completion, Ctrl-C and Ctrl-D.
import { version } from "../../../package.json";
import type { HistoryFile } from "./history.ts";
import { makeCompleter } from "./complete.ts";
import { isMetaCommand, runMetaCommand } from "./meta.ts";
import { LineReader } from "./reader.ts";
import { systemExit } from "./cell.ts";
import { cellText, completeness, continuesBlock, executeCell, isSkippedLine, reportError, type ServeRun } from "./run.ts";
import { columns, wrap } from "./style.ts";

const PS1 = ">>> ";
const PS2 = "... ";

export type TerminalOptions = {
  input: NodeJS.ReadStream;
  output: NodeJS.WriteStream;
  history: HistoryFile;
  /** Which Python the session runs, for the banner (e.g. "Python 3.11.2"), when known. */
  python?: string;
};

/**
 * Runs the REPL until Ctrl-D, :quit, `exit` or `exit(N)`. Returns 0, or the N of `exit(N)`: failures of
 * single cells do not end it.
 */
export async function serveTerminal(run: ServeRun, options: TerminalOptions): Promise<number> {
  const { term } = run;
  const lines: string[] = [];
  const reader = new LineReader({
    input: options.input,
    output: options.output,
    history: options.history.load(),
    historySize: options.history.limit,
    completer: makeCompleter(run.session, () => (lines.length ? cellText(lines) : "")),
  });
  term.out(banner(run, options.python, columns(options.output)));
  const ps1 = term.style.prompt(PS1);
  const ps2 = term.style.prompt(PS2);
  let indent = "";
  let blankBefore = false;
  let status = 0;
  try {
    for (;;) {
      term.endLine();
      const read = await reader.read(lines.length ? ps2 : ps1, lines.length ? indent : "");
      if (read.kind === "eof") {
        term.atLineStart = false; // Ctrl-D leaves the cursor on the prompt line
        break;
      }
      if (read.kind === "cancel") {
        lines.length = 0;
        continue;
      }
      const { line } = read;
      term.atLineStart = true; // readline ended the line the user typed
      options.history.append(line);
      const blank = line.trim() === "";
      if (lines.length === 0 && blank) continue;
      // Bare `exit` and `quit` leave, as in Python 3.13's REPL (`exit()` does too, through SystemExit).
      if (lines.length === 0 && /^\s*(exit|quit)\s*$/.test(line)) break;
      if (lines.length === 0 && isMetaCommand(line)) {
        const outcome = await runMetaCommand(line, run.session, term, run.state, columns(options.output)).catch((err) => reportError(run, err));
        if (outcome === "quit") break;
        continue;
      }
      // In pasted code an empty line followed by more of the block (the next line that counts is indented,
      // or an `else:`) does not end the block, as in a file: blank and comment-only lines do not count.
      const next = blank && lines.length > 0 ? await reader.peekPasted((queued) => !isSkippedLine(queued)) : undefined;
      if (next !== undefined && continuesBlock(next)) {
        lines.push("");
        continue;
      }
      lines.push(blank ? "" : line);
      const code = cellText(lines);
      const verdict = await completeness(run.session, code);
      // Ctrl-C while the check waited (a shared session busy with another client's cell) drops the cell.
      if (reader.takeCancel()) {
        lines.length = 0;
        continue;
      }
      // Two blank lines in a row end the cell whatever the verdict, so a confused check can never trap
      // the user at the continuation prompt; an unfinished cell then shows its SyntaxError.
      if (verdict.status === "incomplete" && !(blank && blankBefore)) {
        indent = dedentAfterExit(line, verdict.indent);
        blankBefore = blank;
        continue;
      }
      lines.length = 0;
      blankBefore = false;
      const result = await reader
        .whileBusy(() =>
          executeCell(run, code.replace(/\n+$/, ""), () => {
            // The terminal echoed ^C; start the traceback on its own line.
            term.err("\n");
          })
        )
        .catch((err) => void reportError(run, err));
      const exit = result ? systemExit(result) : null;
      if (exit) {
        status = exit.status;
        break;
      }
    }
  } finally {
    reader.close();
  }
  term.endLine();
  if (run.name !== undefined) {
    const hint = `Session ${run.name} keeps running; \`awrepl -s ${run.name} serve\` comes back to it.`;
    term.err(term.style.dim(wrap(hint, columns(options.output)).join("\n")) + "\n");
  }
  return status;
}

function banner(run: ServeRun, python: string | undefined, width: number): string {
  const { style } = run.term;
  const who = run.name !== undefined ? `session ${run.name}` : "a new unnamed session";
  const head = `awrepl ${version} · ${who}${python ? ` · ${python}` : ""}`;
  const leave = run.name !== undefined ? "Ctrl-D or :quit leaves; the session keeps running. :help lists commands." : "Ctrl-D or :quit leaves and ends the session. :help lists commands.";
  return [...wrap(head, width).map(style.bold), ...wrap(leave, width).map(style.dim)].join("\n") + "\n";
}

/**
 * After `return`, `pass`, `break`, `continue` or `raise` nothing more belongs to that block, so the next
 * line is offered one level less (as IPython does), unless the runtime already dedented.
 */
export function dedentAfterExit(line: string, indent: string): string {
  const own = /^\s*/.exec(line)?.[0] ?? "";
  if (!/^\s*(return|pass|break|continue|raise)\b/.test(line) || indent !== own || own === "") return indent;
  return indent.slice(0, Math.max(0, indent.length - 4));
}
