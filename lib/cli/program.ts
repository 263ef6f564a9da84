// The command line's entry: main() runs a command and returns its exit status.
//
// It first tries the fast paths, which need no commander (commander and the node: modules it imports
// cost ~7 ms per start, most of the hot path's budget): `--version`, the help texts (made at build
// time from the commander program: lib/cli/help_text.ts), a well-formed `run` (parseFastRun), `vars`
// and `sessions` (parseFastView). Everything else, including every malformed command, goes through
// commander (lib/cli/commands.ts), configured so that a usage error is one line on stderr and exit
// status 2: one source of error messages.
import type { CommanderError } from "commander";
import { ExitCode } from "../core/errors.ts";
import { AWREPL_VERSION } from "../core/version.ts";
import { SESSION_NAME } from "../core/names.ts";
import { makeContext } from "./context.ts";
import { helpText } from "./help_text.ts";
import { errorJson, oneLine, reportError, wantsJson } from "./report.ts";
import { parseFastRun, runCommand } from "./run.ts";
import { trackStdio, writeStream } from "./stdio.ts";

/** Runs the command line `argv` (without the executable); returns the exit status. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
      void writeStream("stdout", `${AWREPL_VERSION}\n`);
      return ExitCode.ok;
    }
    const help = helpFor(argv);
    if (help !== undefined) {
      void writeStream("stdout", help);
      return ExitCode.ok;
    }
    const fast = parseFastRun(argv);
    if (fast) {
      const ctx = await makeContext(() => fast.session, env, () => ({ ...fast.sandbox, python: fast.run.python }));
      return await runCommand(fast.run, ctx);
    }
    const view = parseFastView(argv);
    if (view) {
      const ctx = await makeContext(() => view.session, env);
      const { sessionsCommand, varsCommand } = await import("./session_commands.ts");
      if (view.command === "vars") await varsCommand(ctx, {}, { json: view.json });
      else await sessionsCommand(ctx, { json: view.json });
      return ExitCode.ok;
    }
    // Off the fast paths, commander and the commands write through process.stdout/stderr too.
    trackStdio();
    // The executable starts with a reluctant JIT (scripts/build.ts); the interactive REPL is long-lived.
    if (argv.includes("serve") && typeof Bun !== "undefined") Bun.unsafe.setJITPolicy?.(1);
    return await runProgram(argv, env, wantsJson(argv));
  } catch (err) {
    return reportError(err, wantsJson(argv));
  }
}

/**
 * The help commander prints for `--help`, `-h`, `help`, `help CMD`, `CMD --help` and `CMD -h`, from
 * the texts built at build time; undefined for anything else (`daemon status --help`, `help nosuch`,
 * `-s x --help`: commander answers those).
 */
export function helpFor(argv: readonly string[]): string | undefined {
  const [a, b] = argv;
  if (argv.length === 1 && (a === "--help" || a === "-h" || a === "help")) return helpText("");
  if (argv.length === 2 && a === "help" && b !== undefined) return helpText(b);
  if (argv.length === 2 && a !== undefined && !a.startsWith("-") && (b === "--help" || b === "-h")) return helpText(a);
  return undefined;
}

/** `vars` and `sessions` (the listings an agent runs between cells) as main() runs them without commander. */
export type FastView = { command: "vars" | "sessions"; session?: string; json: boolean };

/**
 * `[-s NAME | --session NAME | --session=NAME]... vars|sessions [--json]`, the session option also
 * after the command; null for anything else, including every malformed line (commander says why).
 */
export function parseFastView(argv: readonly string[]): FastView | null {
  let command: FastView["command"] | undefined;
  let session: string | undefined;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "-s" || arg === "--session" || arg.startsWith("--session=")) {
      const value = arg.startsWith("--session=") ? arg.slice("--session=".length) : argv[++i];
      if (value === undefined || !SESSION_NAME.test(value)) return null;
      session = value;
    } else if (command === undefined && (arg === "vars" || arg === "sessions")) command = arg;
    else if (command !== undefined && arg === "--json" && !json) json = true;
    else return null;
  }
  return command ? { command, session, json } : null;
}

async function runProgram(argv: readonly string[], env: NodeJS.ProcessEnv, json: boolean): Promise<number> {
  let exitCode: number = ExitCode.ok;
  const { buildProgram } = await import("./commands.ts");
  const program = await buildProgram(env, (code) => {
    exitCode = code;
  });
  try {
    await program.parseAsync(argv as string[], { from: "user" });
  } catch (err) {
    if (isCommanderError(err)) {
      // Help and --version end through here with exit code 0; real usage errors with 1.
      if (err.code === "commander.helpDisplayed" || err.code === "commander.version" || err.code === "commander.help") return ExitCode.ok;
      // Commander has written its line to stderr (outputError); the object is all that is left.
      if (json) void writeStream("stdout", errorJson("usage", oneLine(err.message), ExitCode.usage));
      return ExitCode.usage;
    }
    throw err;
  }
  return exitCode;
}

function isCommanderError(err: unknown): err is CommanderError {
  return err instanceof Error && typeof (err as CommanderError).code === "string" && (err as CommanderError).code.startsWith("commander.");
}
