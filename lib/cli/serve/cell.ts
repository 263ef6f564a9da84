// Runs one cell for `serve` and shows it as a REPL does: output live while the cell runs, then the
// trailing value on stdout, or the traceback on stderr. Shared by the terminal and the piped modes.
import type { ExecResult } from "../../protocol/result.ts";
import type { Session } from "../../protocol/api.ts";
import { LiveEcho, renderText } from "../render.ts";
import type { Style } from "./style.ts";

/** stdout and stderr, remembering whether the last thing written ended a line. */
export class Terminal {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly style: Style;
  atLineStart = true;
  private muted = false;

  constructor(stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream, style: Style) {
    this.stdout = stdout;
    this.stderr = stderr;
    this.style = style;
  }

  out(text: string): void {
    this.write(this.stdout, text);
  }

  err(text: string): void {
    this.write(this.stderr, text);
  }

  /** Nothing more is written (the process is ending: its reader went away, or it was killed). */
  mute(): void {
    this.muted = true;
  }

  private write(stream: NodeJS.WritableStream, text: string): void {
    if (text === "" || this.muted) return;
    this.atLineStart = text.endsWith("\n");
    stream.write(text); // main() waits for every write to reach the OS before exiting (lib/cli/stdio.ts)
  }

  /** Ends a line the cell left open (`print(x, end="")`), so the next prompt starts at column 0. */
  endLine(): void {
    if (!this.atLineStart) this.out("\n");
  }
}

export type CellOptions = { timeoutMs: number; maxOutputBytes: number; signal?: AbortSignal };

/**
 * Runs `code`, echoing its output live (as much as the result keeps as its head, like `run`), then
 * shows the rest as `run` renders it: the trailing value on stdout, notices and the full traceback on
 * stderr (a person at a REPL wants every frame, as Python's own REPL shows them).
 */
export async function runCell(session: Session, code: string, term: Terminal, options: CellOptions): Promise<ExecResult> {
  const live = new LiveEcho(options.maxOutputBytes, (stream, text) => (stream === "stdout" ? term.out(text) : term.err(text)));
  const result = await session.execute(code, { ...options, onOutput: (stream, text) => live.output(stream, text) });
  const exit = systemExit(result);
  // `exit()` / `sys.exit(N)` leaves the REPL as in Python's: no traceback, only a message if one was given.
  const shown = exit ? { ...result, status: "ok" as const, exception: null, traceback: "" } : result;
  const rendered = renderText(shown, { traceback: true, color: term.style.color, echoed: live.echoed });
  if (exit?.message) rendered.stderr += `${exit.message}\n`;
  // With nothing of stdout left to print, the value must not continue a line the cell left open.
  if (result.stdout.length === live.echoed.stdout.length) term.endLine();
  term.out(rendered.stdout);
  if (rendered.stderr !== "") {
    term.endLine();
    term.err(rendered.stderr);
  }
  return result;
}

/**
 * The exit status a cell asked for by raising SystemExit (`exit()`, `quit()`, `sys.exit(N)`), with the
 * message Python would print for `sys.exit("text")`; null when the cell did not.
 */
export function systemExit(result: ExecResult): { status: number; message: string } | null {
  const m = /^SystemExit(?::\s*([\s\S]*))?$/.exec(result.exception ?? "");
  if (!m) return null;
  const arg = (m[1] ?? "").trim();
  if (arg === "" || arg === "None") return { status: 0, message: "" };
  if (/^-?\d+$/.test(arg)) return { status: Number(arg) & 0xff, message: "" };
  return { status: 1, message: arg };
}
