// The command line: global options (-s/--session before or after the subcommand, AWREPL_SESSION,
// --python, --self-test, --version), `run`, and the supervisor's commands (lib/cli/session_commands.ts).
//
// main() first tries the fast paths, which need no commander (it and the node: modules it imports cost
// ~7 ms per start, most of the hot path's budget): `--version`, the help texts (built at build time
// from this very program: lib/cli/help_text.ts), a well-formed `run` (parseFastRun), `vars` and
// `sessions` (parseFastView). Everything else, including every malformed command, goes through
// commander, configured so that a usage error is one line on stderr and exit status 2: one source of
// error messages.
import type { Command, CommanderError } from "commander";
import { AwreplError, type ErrorCode, ExitCode, usageError } from "../core/errors.ts";
import { checkSessionName, SESSION_NAME } from "../core/names.ts";
import { resolveSettings } from "../settings/context.ts";
import type { CliContext } from "./context.ts";
import { helpText } from "./help_text.ts";
import { countOption } from "./options.ts";
import { type RunArgs, parseFastRun, runCommand } from "./run.ts";
import type { SandboxFlags } from "./session_options.ts";
import { trackStdio, writeStream } from "./stdio.ts";
import { version } from "../../package.json";

export const VERSION: string = version;

const EXAMPLES = `
Examples:
  awrepl run "print(1 + 2)"                  # one cell in a throwaway interpreter
  awrepl -s agent run "x = 42"               # a named session: state survives this process
  awrepl -s agent run "x + 1"                # prints 43 (the trailing expression's repr)
  awrepl -s agent run - <<'EOF'              # a heredoc: no shell quoting trouble
  import json
  data = {"a": [1, 2, 3]}
  print(json.dumps(data))
  EOF
  awrepl run -f script.py --timeout 5000     # a file, stopped after 5 s (exit 124)
  awrepl run "1/0" --json                    # one JSON object: the ExecResult
  awrepl --self-test                         # prove the contract on this machine

Exit status: 0 ok, 1 the cell raised, 2 usage error, 124 timeout, 125 awrepl failed, 130 interrupted.
Environment: AWREPL_SESSION (default session), AWREPL_PYTHON, AWREPL_HOME (state directory), NO_COLOR.
`;

const RUN_EXAMPLES = `
Examples:
  awrepl run "print(1 + 2)"
  awrepl -s agent run - <<'EOF'
  rows = [line.split(",") for line in open("data.csv")]
  len(rows)
  EOF
  cat cell.py | awrepl -s agent run --json
  awrepl run --timeout 5000 --max-output 4096 -f job.py

Text mode prints the cell's stdout and stderr as they arrive, then the trailing value; on an exception,
the failing line and \`ExceptionType: message\` (--traceback: every frame). Exit status: 0 ok, 1 the cell
raised, 2 usage error, 124 timeout, 125 awrepl failed, 130 interrupted.
`;

/**
 * The context every command gets: the settings, resolved here once (a config error is reported when
 * a command first asks for the config), and the session the global options name.
 */
export async function makeContext(
  flagSession: () => string | undefined,
  env: NodeJS.ProcessEnv,
  sessionFlags: () => SandboxFlags & { python?: string } = () => ({}),
): Promise<CliContext> {
  const settings = await resolveSettings(env);
  let told = false;
  return {
    ...settings,
    config() {
      const config = settings.config();
      if (!told) {
        told = true;
        for (const notice of config.notices ?? []) void writeStream("stderr", `awrepl: ${notice}\n`);
      }
      return config;
    },
    sessionFlags,
    session() {
      const flag = flagSession();
      if (flag !== undefined) return checkSessionName(flag);
      const fromEnv = env.AWREPL_SESSION;
      if (fromEnv === undefined || fromEnv === "") return undefined;
      return checkSessionName(fromEnv, "AWREPL_SESSION");
    },
  };
}

/** Runs the command line `argv` (without the executable); returns the exit status. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
      void writeStream("stdout", `${VERSION}\n`);
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

/** `--json` among the options (not after `--`, where it would be the cell's text). */
export function wantsJson(argv: readonly string[]): boolean {
  for (const arg of argv) {
    if (arg === "--") return false;
    if (arg === "--json") return true;
  }
  return false;
}

/**
 * One line on stderr for anything that stops a command; the exit status it maps to. With `json`,
 * stdout also gets one object, {"error": {code, message, exit_code}}, so a caller that parses stdout
 * always finds exactly one JSON object.
 */
export function reportError(err: unknown, json = false): number {
  if (err instanceof AwreplError) return reportFailure(err.code, oneLine(err.message), err.exitCode, json);
  const message = err instanceof Error ? err.message : String(err);
  // A system call that failed (a state directory that cannot be created, a full disk) is a problem of
  // the environment, said as the OS said it; anything else is a bug of awrepl's.
  const errno = (err as NodeJS.ErrnoException | undefined)?.code;
  const kind = typeof errno === "string" && /^E[A-Z]+$/.test(errno) ? "" : "internal error: ";
  const status = reportFailure("internal", `${kind}${oneLine(message)}`, ExitCode.internal, json);
  if (err instanceof Error && err.stack && process.env.AWREPL_DEBUG) void writeStream("stderr", `${err.stack}\n`);
  return status;
}

function reportFailure(code: ErrorCode, line: string, exitCode: number, json: boolean): number {
  if (json) void writeStream("stdout", errorJson(code, line, exitCode));
  void writeStream("stderr", `awrepl: ${line}\n`);
  return exitCode;
}

/** The one object `--json` prints for a failure that is not a cell's result (README, "The JSON result"). */
function errorJson(code: ErrorCode, message: string, exitCode: number): string {
  return `${JSON.stringify({ error: { code, message, exit_code: exitCode } })}\n`;
}

function oneLine(text: string): string {
  return text
    .replace(/^error: /, "")
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .join(" ");
}

async function runProgram(argv: readonly string[], env: NodeJS.ProcessEnv, json: boolean): Promise<number> {
  let exitCode: number = ExitCode.ok;
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

/** Commander's collector for a repeatable option. */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function isCommanderError(err: unknown): err is CommanderError {
  return err instanceof Error && typeof (err as CommanderError).code === "string" && (err as CommanderError).code.startsWith("commander.");
}

export async function buildProgram(env: NodeJS.ProcessEnv, setExit: (code: number) => void): Promise<Command> {
  const { Command, Option } = await import("commander");
  const program = new Command("awrepl");
  program
    .description("A persistent Python REPL for agents and people: state that survives between shell calls.")
    .usage("[--session NAME] <command> [options]")
    .version(VERSION, "-V, --version", "print the version")
    .helpOption("-h, --help", "show this help")
    .helpCommand("help [command]", "show help for a command")
    .option("-s, --session <name>", "run in the named session (kept by a background supervisor); default $AWREPL_SESSION")
    .option("--python <cmd>", "interpreter command line for a new session (default: $AWREPL_PYTHON, config, venv, python3)")
    .option("--sandbox", "run a new session's worker in a sandbox (bubblewrap): no network, read-only but the cwd, home secrets hidden, env allowlist")
    .option("--no-sandbox", "no sandbox for a new session, whatever the config says")
    .option("--sandbox-net", "with --sandbox: keep the network")
    .option("--env <name>", "with --sandbox: pass this environment variable in (repeatable)", collect, [] as string[])
    .option("--sandbox-write <path>", "with --sandbox: this path is writable too (repeatable)", collect, [] as string[])
    .option("--self-test", "prove the contract on this machine (no network) and exit")
    .addHelpText("after", EXAMPLES)
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => process.stdout.write(s),
      writeErr: (s) => process.stderr.write(s),
      outputError: (s, write) => write(`awrepl: ${oneLine(s)}\n`),
    });

  const pythonFlag = () => program.opts<{ python?: string }>().python;
  const sessionFlags = () => {
    const o = program.opts<{ sandbox?: boolean; sandboxNet?: boolean; env: string[]; sandboxWrite: string[] }>();
    const flags: SandboxFlags & { python?: string } = { python: pythonFlag() };
    if (o.sandbox !== undefined) flags.sandbox = o.sandbox;
    if (o.sandboxNet) flags.net = true;
    if (o.env.length) flags.env = o.env;
    if (o.sandboxWrite.length) flags.write = o.sandboxWrite;
    return flags;
  };
  const ctx = await makeContext(() => program.opts<{ session?: string }>().session, env, sessionFlags);

  program
    .command("run")
    .description("run one cell: CODE, - (stdin), -f FILE, or piped stdin")
    .argument("[code]", "Python code; - reads stdin (use -- before code that starts with -)")
    .option("-f, --file <file>", "read the cell from FILE (__file__ is set to it; tracebacks name it)")
    .option("--json", "print exactly one JSON object: the ExecResult")
    .option("--traceback", "show every traceback frame (default: the failing cell line and the error)")
    .addOption(new Option("--timeout <ms>", "per-cell timeout in ms, 0 = none (default 30000)").argParser((v) => countOption("--timeout", "timeoutMs", v)))
    .addOption(new Option("--max-output <bytes>", "bytes kept per cell of stdout+stderr, of the display entries' text, and of the value, the exception and the traceback each, 0 = no limit (default 65536)").argParser((v) => countOption("--max-output", "maxOutputBytes", v)))
    .option("--autosave", "with --session: snapshot after every cell that changes the namespace, so a timeout kill loses only that cell")
    .option("--display-dir <dir>", "write the cell's display files (plots, images) to DIR, created if missing (default: the state directory)")
    .addHelpText("after", RUN_EXAMPLES)
    .action(async (code: string | undefined, opts: { file?: string; json?: boolean; traceback?: boolean; timeout?: number; maxOutput?: number; autosave?: boolean; displayDir?: string }) => {
      const args: RunArgs = { code, file: opts.file, json: opts.json, traceback: opts.traceback, timeoutMs: opts.timeout, maxOutputBytes: opts.maxOutput };
      if (opts.autosave) args.autosave = true;
      if (opts.displayDir !== undefined) args.displayDir = opts.displayDir;
      const python = pythonFlag();
      if (python !== undefined) args.python = python;
      setExit(await runCommand(args, ctx));
    });

  const { registerRemoteCommands } = await import("./session_commands.ts");
  registerRemoteCommands(program, ctx, sessionFlags, setExit);
  const { registerTrustCommand } = await import("./trust_command.ts");
  registerTrustCommand(program, ctx);
  const { registerServeCommand } = await import("./serve/command.ts");
  registerServeCommand(program, ctx, setExit);
  const { registerMcpCommands } = await import("./mcp_command.ts");
  registerMcpCommands(program, ctx, setExit, pythonFlag, VERSION);
  const { registerCompletionCommands } = await import("./completion.ts");
  registerCompletionCommands(program, ctx, VERSION);

  // A bad --session or --python is reported before any command runs, whether or not that command uses it.
  program.hook("preAction", () => {
    const flag = program.opts<{ session?: string }>().session;
    if (flag !== undefined) checkSessionName(flag);
    const python = pythonFlag();
    if (python !== undefined && python.trim() === "") throw usageError(`--python needs an interpreter command, not ${JSON.stringify(python)}`);
  });

  program.allowExcessArguments(true).action(async (opts: { selfTest?: boolean }, command: Command) => {
    const [unknown] = command.args;
    if (unknown !== undefined) throw usageError(`Unknown command ${JSON.stringify(unknown)}: try 'awrepl --help'`);
    if (opts.selfTest) {
      const { selfTest } = await import("./selftest.ts");
      setExit(await selfTest({ python: pythonFlag(), env }));
      return;
    }
    throw usageError("Missing command: try 'awrepl --help'");
  });
  return program;
}
