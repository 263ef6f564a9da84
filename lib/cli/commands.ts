// The command line as commander declares it: every command, option and help text. Loaded only off
// the fast paths (lib/cli/program.ts), and by the build-time macro that makes the help texts
// (help_macro.ts), so the fast paths need no commander.
import type { Command } from "commander";
import { usageError } from "../core/errors.ts";
import { checkSessionName } from "../core/names.ts";
import { AWREPL_VERSION } from "../core/version.ts";
import { makeContext } from "./context.ts";
import { countOption } from "./options.ts";
import { oneLine } from "./report.ts";
import { type RunArgs, runCommand } from "./run.ts";
import type { SandboxFlags } from "./session_options.ts";

const VERSION = AWREPL_VERSION;

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

/** Commander's collector for a repeatable option. */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
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
    .option("--venv <dir>", "run a new session in this virtual environment, created on first use (python -m venv) with the interpreter it would otherwise use; writable under --sandbox")
    .option("--sandbox", "run a new session's worker in a sandbox (bubblewrap): no network, read-only but the cwd, home secrets hidden, env allowlist")
    .option("--no-sandbox", "no sandbox for a new session, whatever the config says")
    .option("--sandbox-net", "with --sandbox: keep the network")
    .option("--env <name>", "with --sandbox: pass this environment variable in (repeatable)", collect, [] as string[])
    .option("--sandbox-write <path>", "with --sandbox: this path is writable too (repeatable)", collect, [] as string[])
    .option("--sandbox-git", "with --sandbox: .git writable (its hooks and config stay read-only; what git reads from it later is then trusted)")
    .option("--sandbox-home", "with --sandbox: allow your home directory (or one holding it) as a writable directory")
    .option("--sandbox-allow <host[:port]>", "with --sandbox: this host is reachable through awrepl's proxy (repeatable; name, *.domain or address; no port: 80 and 443)", collect, [] as string[])
    .option("--memory <size>", "memory limit of a new session's worker and what it starts (512M, 2G): a cgroup, else RLIMIT_DATA per process")
    .option("--max-procs <n>", "processes and threads a new session may run together (at least 8)")
    .option("--cpu <percent>", "CPU share of a new session, in percent of one CPU (50, 200 = two CPUs; needs a cgroup)")
    .option("--max-file-size <size>", "largest file a new session may write (1M, 1G); bigger writes fail with EFBIG")
    .option("--limits-best-effort", "a limit this machine cannot enforce is left out (said by `sessions`) instead of failing the start")
    .option("--self-test", "prove the contract on this machine (no network) and exit; with --json, one JSON object: {ok, checks: [{name, ok, ms, detail?}], ...}")
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
    const o = program.opts<{ sandbox?: boolean; sandboxNet?: boolean; env: string[]; sandboxWrite: string[]; sandboxGit?: boolean; sandboxHome?: boolean; sandboxAllow: string[] }>();
    const l = program.opts<{ memory?: string; maxProcs?: string; cpu?: string; maxFileSize?: string; limitsBestEffort?: boolean }>();
    const venv = program.opts<{ venv?: string }>().venv;
    const flags: SandboxFlags & { python?: string; venv?: string } = { python: pythonFlag(), ...(venv !== undefined ? { venv } : {}) };
    if (o.sandbox !== undefined) flags.sandbox = o.sandbox;
    if (o.sandboxNet) flags.net = true;
    if (o.env.length) flags.env = o.env;
    if (o.sandboxWrite.length) flags.write = o.sandboxWrite;
    if (o.sandboxGit) flags.git = true;
    if (o.sandboxHome) flags.home = true;
    if (o.sandboxAllow.length) flags.allow = o.sandboxAllow;
    for (const key of ["memory", "maxProcs", "cpu", "maxFileSize"] as const) if (l[key] !== undefined) flags[key] = l[key];
    if (l.limitsBestEffort) flags.limitsBestEffort = true;
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
    .addOption(new Option("--timeout <time>", "per-cell timeout: 500ms, 30s, 2m, 1h (a bare number is ms), 0 = none (default 30s)").argParser((v) => countOption("--timeout", "timeoutMs", v)))
    .addOption(
      new Option(
        "--max-output <size>",
        "bytes kept per cell (64K, 1M; a bare number is bytes) of stdout+stderr, of the display entries' text, and of the value, the exception and the traceback each, 0 = no limit (default 64K)",
      )
        .argParser((v) => countOption("--max-output", "maxOutputBytes", v)),
    )
    .option("--autosave", "with --session: snapshot after every cell that changes the namespace, so a timeout kill loses only that cell")
    .option("--display-dir <dir>", "write the cell's display files (plots, images) to DIR, created if missing (default: the state directory)")
    .option("--id <key>", "with --session: an idempotency key; a repeat of KEY runs nothing and prints the first call's result (replayed)")
    .option("--detach", "with --session: start the cell and print its id at once (the --id KEY, or a new one); collect it with `wait ID`, look at it with `status ID`")
    .option("--keep-going", "with -f FILE.ipynb: run every code cell, also after one fails (the exit status is the first failure's)")
    .addHelpText("after", RUN_EXAMPLES)
    .action(
      async (
        code: string | undefined,
        opts: { file?: string; json?: boolean; traceback?: boolean; timeout?: number; maxOutput?: number; autosave?: boolean; displayDir?: string; id?: string; detach?: boolean; keepGoing?: boolean },
      ) => {
        const args: RunArgs = { code, file: opts.file, json: opts.json, traceback: opts.traceback, timeoutMs: opts.timeout, maxOutputBytes: opts.maxOutput };
        if (opts.autosave) args.autosave = true;
        if (opts.id !== undefined) args.id = opts.id;
        if (opts.detach) args.detach = true;
        if (opts.keepGoing) args.keepGoing = true;
        if (opts.displayDir !== undefined) args.displayDir = opts.displayDir;
        const python = pythonFlag();
        if (python !== undefined) args.python = python;
        setExit(await runCommand(args, ctx));
      },
    );

  const { registerRemoteCommands } = await import("./session_commands.ts");
  registerRemoteCommands(program, ctx, sessionFlags, setExit);
  const { registerHistoryCommands } = await import("./history_commands.ts");
  registerHistoryCommands(program, ctx, sessionFlags, setExit);
  const { registerTrustCommand } = await import("./trust_command.ts");
  registerTrustCommand(program, ctx);
  const { registerServeCommand } = await import("./serve/command.ts");
  registerServeCommand(program, ctx, setExit);
  const { registerMcpCommands } = await import("./mcp_command.ts");
  registerMcpCommands(program, ctx, setExit, pythonFlag, VERSION);
  const { registerKernelCommand } = await import("./kernel_command.ts");
  registerKernelCommand(program, ctx, setExit, pythonFlag);
  const { registerCompletionCommands } = await import("./completion.ts");
  registerCompletionCommands(program, ctx, VERSION);

  // A bad --session or --python is reported before any command runs, whether or not that command uses it.
  program.hook("preAction", async (_program, action) => {
    // Who this process is to the supervisor, in its sessions' histories (`awrepl mcp` says "mcp" itself).
    const { setClientKind } = await import("../client/connection.ts");
    setClientKind(action.name() === "serve" ? "serve" : "cli");
    const flag = program.opts<{ session?: string }>().session;
    if (flag !== undefined) checkSessionName(flag);
    const python = pythonFlag();
    if (python !== undefined && python.trim() === "") throw usageError(`--python needs an interpreter command, not ${JSON.stringify(python)}`);
    const venv = program.opts<{ venv?: string }>().venv;
    if (venv !== undefined && venv.trim() === "") throw usageError(`--venv needs a directory, not ${JSON.stringify(venv)}`);
  });

  // `--self-test --json`: a program-level --json would take every subcommand's own (commander reads a
  // program's options anywhere on the line), so --json is taken only beside --self-test: that flag lets
  // the program's own action see the options it does not know, and the action accepts --json alone.
  program.on("option:self-test", () => program.allowUnknownOption(true));
  program.allowExcessArguments(true).action(async (opts: { selfTest?: boolean }, command: Command) => {
    const json = opts.selfTest === true && command.args.includes("--json");
    const [unknown] = command.args.filter((arg) => !(json && arg === "--json"));
    if (unknown?.startsWith("-")) throw usageError(`unknown option '${unknown}' (--self-test takes --json and --python)`);
    if (unknown !== undefined) throw usageError(`Unknown command ${JSON.stringify(unknown)}: try 'awrepl --help'`);
    if (opts.selfTest) {
      const { selfTest } = await import("./selftest.ts");
      setExit(await selfTest({ python: pythonFlag(), env, json }));
      return;
    }
    throw usageError("Missing command: try 'awrepl --help'");
  });
  return program;
}
