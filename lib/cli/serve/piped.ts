// `serve` with stdin not a terminal: no prompts, no banner; each statement runs as soon as its last line
// has arrived, so a script (or a program feeding lines) sees results as it goes. The runtime's
// `is_complete` decides where a statement ends, read as Python reads a file: a block ends at the next
// unindented statement (a file needs no blank line after a `def`, and a blank line followed by more
// indented lines does not end it), or at end of input.
import { AwreplError, ExitCode, exitCodeForStatus } from "../../core/errors.ts";
import { systemExit } from "./cell.ts";
import { isMetaCommand, runMetaCommand } from "./meta.ts";
import { cellText, completeness, continuesBlock, executeCell, isSkippedLine, reportError, type ServeRun } from "./run.ts";

export type PipedOptions = {
  /** Stop at the first cell that fails instead of going on with the next (a REPL goes on). */
  exitOnError: boolean;
  /** Width used to lay out meta command output. */
  width: number;
};

/**
 * Splits lines into statements as Python reads a file. push() returns the statements its line
 * completed, in order; the caller runs them before pushing the next line.
 *
 * Inside a statement, blank and comment-only lines decide nothing by themselves: they are held until
 * the next line that counts. An indented one continues the statement (a class with blank lines between
 * its methods), and so does a column-0 `else`/`elif`/`except`/`finally`; any other column-0 line ends
 * it, if it is complete then. End of input (flush()) ends it too.
 */
export class StatementSplitter {
  private readonly check: (code: string) => Promise<{ status: string }>;
  private lines: string[] = [];
  /** Blank or comment-only lines after `lines`, not yet known to belong to its statement. */
  private held: string[] = [];

  constructor(check: (code: string) => Promise<{ status: string }>) {
    this.check = check;
  }

  get pending(): boolean {
    return this.lines.length > 0;
  }

  async push(line: string): Promise<string[]> {
    const ready: string[] = [];
    const blank = line.trim() === "";
    if (this.lines.length === 0) {
      if (blank) return ready;
      if (isMetaCommand(line)) return [line];
    } else if (isSkippedLine(line)) {
      this.held.push(blank ? "" : line);
      return ready;
    } else if (!continuesBlock(line)) {
      // A new statement at column 0 ends the one above if that one is complete once ended; the blank
      // and comment lines between them belong to neither and are dropped.
      if ((await this.check(`${cellText(this.lines)}\n`)).status === "complete") {
        ready.push(this.take());
        if (isMetaCommand(line)) return [...ready, line];
      }
    }
    this.lines.push(...this.held, line);
    this.held = [];
    if ((await this.check(cellText(this.lines))).status !== "incomplete") ready.push(this.take());
    return ready;
  }

  /** End of input: whatever is left is one last statement (an unfinished one shows its SyntaxError). */
  flush(): string | null {
    return this.lines.length ? this.take() : null;
  }

  private take(): string {
    const code = this.lines.join("\n").replace(/\n+$/, "");
    this.lines = [];
    this.held = [];
    return code;
  }
}

/**
 * Runs the statements read from `input`. Exit status: 0 when every cell succeeded, else the status of
 * the first that failed (1 raised, 124 timed out, 125 worker died or awrepl failed, 130 interrupted).
 * A dead worker or a failure of awrepl's own stops reading, as does Ctrl-C, which interrupts the
 * running cell; the session itself is left alive.
 */
export async function servePiped(run: ServeRun, input: AsyncIterable<Buffer | string>, options: PipedOptions): Promise<number> {
  const splitter = new StatementSplitter((code) => completeness(run.session, code));
  let exitCode: number = ExitCode.ok;
  let stopped = false;
  let wake: () => void = () => {};
  const stop = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const onSigint = () => {
    stopped = true;
    exitCode ||= ExitCode.interrupted;
    wake();
  };
  process.on("SIGINT", onSigint);

  /** Runs one statement; false means stop reading. */
  const runOne = async (code: string): Promise<boolean> => {
    try {
      if (isMetaCommand(code)) return (await runMetaCommand(code, run.session, run.term, run.state, options.width)) !== "quit";
      const result = await executeCell(run, code);
      const exit = systemExit(result);
      if (exit) {
        exitCode ||= exit.status; // `exit(N)` ends the script with N, unless a cell failed before
        return false;
      }
      const failed = exitCodeForStatus(result.status);
      if (failed !== ExitCode.ok) {
        exitCode ||= failed;
        // After the worker died the next cell would run in a fresh, empty one, where a script's later
        // cells fail or, worse, quietly compute something else: stop as for a failure of awrepl's own.
        return result.status !== "died" && !options.exitOnError;
      }
      return true;
    } catch (err) {
      exitCode ||= reportError(run, err);
      return false; // awrepl itself failed: later cells would fail the same way
    }
  };

  try {
    const source = readLines(input);
    let halted = false;
    reading: while (!stopped) {
      const next = await Promise.race([source.next(), stop.then(() => null)]);
      if (next === null || next.done) break;
      for (const code of await splitter.push(next.value)) {
        if (stopped || !(await runOne(code))) {
          halted = true; // what is left unread or unfinished is not run
          break reading;
        }
      }
    }
    const last = halted || stopped ? null : splitter.flush();
    if (last !== null) await runOne(last);
  } catch (err) {
    if (!(err instanceof AwreplError)) throw err;
    exitCode ||= reportError(run, err);
  } finally {
    process.off("SIGINT", onSigint);
  }
  return exitCode;
}

/** The lines of `input` as they arrive (UTF-8; a final line without a newline counts; CRLF is fine). */
async function* readLines(input: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  const decoder = new TextDecoder("utf-8");
  let rest = "";
  for await (const chunk of input) {
    rest += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    const lines = rest.split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) yield line.replace(/\r$/, "");
  }
  rest += decoder.decode();
  if (rest !== "") yield rest.replace(/\r$/, "");
}
