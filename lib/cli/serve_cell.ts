// Runs one cell for `serve` and shows it as a REPL does: output live while the cell runs, then the
// trailing value on stdout, or the traceback on stderr. Shared by the terminal and the piped modes.
import type { ExecResult } from "../protocol.ts";
import type { Session } from "../types.ts";
import { LiveEcho, renderText } from "./render.ts";
import type { Style } from "./serve_style.ts";

/** stdout and stderr, remembering whether the last thing written ended a line. */
export class Terminal {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly style: Style;
  atLineStart = true;
  #muted = false;

  constructor(stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream, style: Style) {
    this.stdout = stdout;
    this.stderr = stderr;
    this.style = style;
  }

  out(text: string): void {
    this.#write(this.stdout, text);
  }

  err(text: string): void {
    this.#write(this.stderr, text);
  }

  /** Nothing more is written (the process is ending: its reader went away, or it was killed). */
  mute(): void {
    this.#muted = true;
  }

  #write(stream: NodeJS.WritableStream, text: string): void {
    if (text === "" || this.#muted) return;
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
  const rendered = renderText(result, { traceback: true, color: term.style.color, echoed: live.echoed });
  // With nothing of stdout left to print, the value must not continue a line the cell left open.
  if (result.stdout.length === live.echoed.stdout.length) term.endLine();
  term.out(rendered.stdout);
  if (rendered.stderr !== "") {
    term.endLine();
    term.err(rendered.stderr);
  }
  return result;
}
