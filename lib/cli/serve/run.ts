// What the two modes of `serve` (terminal and piped) share: the session being served, how cells run,
// and the exit status a failed cell maps to.
import { AwreplError } from "../../core/errors.ts";
import type { ExecResult } from "../../protocol/result.ts";
import type { CompletenessStatus, Session } from "../../protocol/api.ts";
import { watchCtrlC } from "../ctrl_c.ts";
import { runCell, type Terminal } from "./cell.ts";
import type { MetaState } from "./meta.ts";

export type ServeRun = {
  session: Session;
  /** The session's name; undefined for an unnamed session that ends with `serve`. */
  name: string | undefined;
  term: Terminal;
  state: MetaState & { maxOutputBytes: number };
};

/**
 * Runs one cell; Ctrl-C (SIGINT) while it runs interrupts the cell, not the session. The first Ctrl-C
 * aborts this call (in a shared session that withdraws it if another client's cell is still ahead of
 * it); a later one interrupts again, for a cell that caught the first KeyboardInterrupt.
 */
export async function executeCell(run: ServeRun, code: string, onInterrupt?: () => void): Promise<ExecResult> {
  const ctrlC = watchCtrlC({
    onPress: onInterrupt,
    onRepeat: () =>
      void run.session.interrupt().catch(() => {
        // The cell may have ended already; an interrupt that finds nothing to stop is not an error.
      }),
  });
  try {
    return await runCell(run.session, code, run.term, {
      timeoutMs: run.state.timeoutMs,
      maxOutputBytes: run.state.maxOutputBytes,
      signal: ctrlC.signal,
    });
  } finally {
    ctrlC.dispose();
  }
}

/**
 * The text of the lines entered so far as `is_complete` reads it: every entered line ends with a
 * newline, so a block followed by an empty line ends in "\n\n", which is what closes it.
 */
export function cellText(lines: readonly string[]): string {
  return lines.map((line) => `${line}\n`).join("");
}

/**
 * A line Python's tokenizer skips when it tracks indentation (empty, whitespace only, or only a
 * comment): it cannot end a block, only the next line that counts can.
 */
export function isSkippedLine(line: string): boolean {
  return /^\s*(#.*)?$/.test(line);
}

/**
 * Whether a line that follows a block (after any skipped lines) belongs to it: an indented line, or a
 * clause that continues the statement above although it starts at column 0.
 */
export function continuesBlock(line: string): boolean {
  return /^\s/.test(line) || /^(else|elif|except|finally)\b/.test(line);
}

/** The runtime's verdict on a piece of code; if asking fails, the code is run and the failure shows there. */
export async function completeness(session: Session, code: string): Promise<{ status: CompletenessStatus; indent: string }> {
  try {
    return await session.isComplete(code);
  } catch (err) {
    if (err instanceof AwreplError) return { status: "complete", indent: "" };
    throw err;
  }
}

/** Prints an error awrepl itself reports (supervisor gone, worker could not start) and returns its exit code. */
export function reportError(run: ServeRun, err: unknown): number {
  if (!(err instanceof AwreplError)) throw err;
  run.term.endLine();
  const next = err.code === "supervisor_unreachable" && run.name !== undefined ? "; the next call reconnects" : "";
  run.term.err(run.term.style.error(`awrepl: ${err.message}${next}`) + "\n");
  return err.exitCode;
}
