// `awrepl [--session NAME] serve`: an interactive REPL on a session, or, with stdin not a terminal, a
// line-fed runner of statements. A named session is held by the supervisor and outlives `serve`; without
// a name `serve` starts its own worker and ends it on the way out.
//
// Only the command's declaration is loaded with the program; the REPL itself (readline, the session,
// the supervisor client) is imported when `serve` actually runs, so other commands do not pay for it.
import type { Command } from "commander";
import { countOption } from "../options.ts";
import type { CliContext } from "../context.ts";

export type ServeFlags = {
  timeout?: string;
  maxOutput?: string;
  exitOnError?: boolean;
  /** The program's global --python. */
  python?: string;
};

/**
 * Declares `serve`. The exit status goes to `setExit` when given (the program's own channel), else to
 * process.exitCode.
 */
export function registerServeCommand(program: Command, ctx: CliContext, setExit?: (code: number) => void): void {
  program
    .command("serve")
    .description("interactive REPL on the session; with stdin not a terminal, run the statements it reads")
    .option("--timeout <time>", "per-cell timeout (500ms, 30s, 2m; bare = ms), 0 = none (default: none at a terminal, the configured one when piped)")
    .option("--max-output <size>", "stdout+stderr kept per cell (64K, 1M; bare = bytes), 0 = no limit (default 64K)")
    .option("--exit-on-error", "with piped stdin: stop at the first cell that fails")
    .addHelpText(
      "after",
      [
        "",
        "At the prompt: Tab completes, Up/Down recall history, Ctrl-C interrupts a",
        "cell or clears the line, Ctrl-D leaves (a named session keeps running).",
        ":help lists the meta commands (:vars, :inspect NAME, :reset, :timeout MS).",
        "Piped stdin: each statement runs as it arrives; the exit status is 0 when",
        "every cell succeeded, else that of the first failure. See docs/serve.md.",
      ].join("\n"),
    )
    .action(async (flags: ServeFlags) => {
      const python = program.opts<{ python?: string }>().python;
      const { serve } = await import("./main.ts");
      const code = await serve(ctx, {
        ...flags,
        timeoutMs: flags.timeout === undefined ? undefined : countOption("--timeout", "timeoutMs", flags.timeout),
        maxOutputBytes: flags.maxOutput === undefined ? undefined : countOption("--max-output", "maxOutputBytes", flags.maxOutput),
        python,
      });
      if (setExit) setExit(code);
      else process.exitCode = code;
    });
}
