// The line editor of the interactive REPL: node:readline (the editor Node's own REPL uses) supplies
// editing, history, Tab completion and Ctrl-C/Ctrl-D handling; this wraps it into one awaitable read()
// so the REPL is a plain loop. Lines readline has already echoed but nobody asked for yet (a paste of
// several lines) are queued and handed out in order without a second prompt.
import * as readline from "node:readline";

export type ReadResult = { kind: "line"; line: string } | { kind: "cancel" } | { kind: "eof" };

export type Completer = (before: string) => Promise<[string[], string]>;

export type LineReaderOptions = {
  input: NodeJS.ReadStream;
  output: NodeJS.WriteStream;
  history: string[];
  historySize: number;
  completer: Completer;
};

export class LineReader {
  readonly rl: readline.Interface;
  private readonly input: NodeJS.ReadStream;
  private readonly output: NodeJS.WriteStream;
  private queue: ReadResult[] = [];
  private waiter: ((r: ReadResult) => void) | null = null;
  private closed = false;

  constructor(options: LineReaderOptions) {
    this.input = options.input;
    this.output = options.output;
    this.rl = readline.createInterface({
      input: options.input,
      output: options.output,
      terminal: true,
      history: options.history,
      historySize: options.historySize,
      tabSize: 4,
      completer: (before: string, callback: (err: Error | null, result: [string[], string]) => void) => {
        options.completer(before).then(
          (result) => callback(null, result),
          () => callback(null, [[], before]),
        );
      },
    });
    // readline leaves only on Ctrl-D at an empty line; a continuation line holding nothing but its
    // pre-filled indent counts as empty too (this listener runs after readline's own).
    options.input.on("keypress", (_text: string | undefined, key: { ctrl?: boolean; name?: string } | undefined) => {
      if (!this.waiter) return;
      if (key?.ctrl && key.name === "d" && this.rl.line !== "" && this.rl.line.trim() === "") {
        this.rl.close();
        return;
      }
      this.trackWrappedRows();
    });
    // Backspace in the indentation removes one indent level, as Python's and IPython's REPLs do: this
    // listener runs before readline's and removes all but the one space readline is about to delete.
    options.input.prependListener("keypress", (_text: string | undefined, key: { name?: string; ctrl?: boolean; meta?: boolean } | undefined) => {
      if (!this.waiter || key?.name !== "backspace" || key.ctrl || key.meta) return;
      const before = this.rl.line.slice(0, this.rl.cursor);
      if (before === "" || !/^ +$/.test(before)) return;
      const extra = (before.length - 1) % 4;
      for (let i = 0; i < extra; i++) this.rl.write(null, { name: "backspace" });
    });
    this.rl.on("line", (line) => this.deliver({ kind: "line", line }));
    this.rl.on("SIGINT", () => this.cancel());
    // Back in the foreground after Ctrl-Z: readline leaves its input paused; showing the prompt again
    // resumes it.
    this.rl.on("SIGCONT", () => {
      if (this.waiter) this.rl.prompt(true);
    });
    this.rl.on("close", () => {
      this.closed = true;
      this.deliver({ kind: "eof" });
    });
  }

  /** Shows `prompt` (with `prefill` typed in, e.g. the indent of a block) and waits for one line. */
  read(prompt: string, prefill = ""): Promise<ReadResult> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    if (this.closed) return Promise.resolve({ kind: "eof" });
    return new Promise((resolve) => {
      this.waiter = resolve;
      this.rl.setPrompt(prompt);
      this.rl.prompt(true);
      // Text typed ahead while the previous cell ran is kept; the indent is only offered on a clean line.
      if (prefill && this.rl.line === "") this.rl.write(prefill);
    });
  }

  /** True (once) when Ctrl-C was pressed since the last read(): what was entered is to be dropped. */
  takeCancel(): boolean {
    if (this.queue[0]?.kind !== "cancel") return false;
    this.queue.shift();
    return true;
  }

  /**
   * The first line already entered (pasted along with the one just read) but not yet read for which
   * `counts` holds, if any. A paste reaches readline in pieces as the terminal passes them on, so when
   * nothing that counts is queued yet the rest is given `settleMs` to arrive (a person pressing Enter
   * does not notice the wait). A Ctrl-C or Ctrl-D queued first ends the search.
   */
  async peekPasted(counts: (line: string) => boolean, settleMs = 100): Promise<string | undefined> {
    const deadline = Date.now() + settleMs;
    for (;;) {
      for (const next of this.queue) {
        if (next.kind !== "line") return undefined;
        if (counts(next.line)) return next.line;
      }
      if (Date.now() >= deadline || this.closed) return undefined;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /**
   * While a cell runs the editor steps aside: input is paused and the terminal goes back to cooked mode,
   * so Ctrl-C raises SIGINT in this process (the worker has its own process group and never sees it)
   * and anything typed ahead is echoed and buffered by the terminal until the next prompt.
   */
  async whileBusy<T>(task: () => Promise<T>): Promise<T> {
    this.rl.pause();
    this.setRawMode(false);
    try {
      return await task();
    } finally {
      if (!this.closed) {
        this.setRawMode(true);
        this.rl.resume();
      }
    }
  }

  close(): void {
    if (!this.closed) this.rl.close();
  }

  /**
   * Text typed or pasted in one chunk at the end of the line is written as is and the terminal wraps
   * it, but readline (Node's and Bun's alike) does not update `prevRows`, the row of the cursor below
   * the prompt it moves back up by on its next redraw; the next edit then redraws one row too low and
   * the first row appears twice. With the cursor at the end, its row is known: record it.
   */
  private trackWrappedRows(): void {
    const state = this.rl as unknown as { prevRows?: number; line: string; cursor: number };
    if (state.cursor === state.line.length) state.prevRows = this.rl.getCursorPos().rows;
  }

  private setRawMode(raw: boolean): void {
    if (this.input.isTTY) this.input.setRawMode(raw);
  }

  private deliver(result: ReadResult): void {
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = null;
      waiter(result);
    } else if (result.kind !== "eof" || this.queue.at(-1)?.kind !== "eof") {
      this.queue.push(result);
    }
  }

  /** Ctrl-C at the prompt: leave what was typed visible, marked ^C, and start over on a fresh line. */
  private cancel(): void {
    this.rl.write(null, { ctrl: true, name: "e" }); // to the end of the line, so ^C follows the text
    this.output.write("^C\n");
    // readline keeps the edited text in `line`/`cursor`; clearing them without a redraw keeps the
    // abandoned text on screen, the way a shell does.
    const state = this.rl as unknown as { line: string; cursor: number };
    state.line = "";
    state.cursor = 0;
    this.deliver({ kind: "cancel" });
  }
}
