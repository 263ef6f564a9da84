// `awrepl completion bash|zsh|fish`: shell completion scripts, generated from the commander program
// itself (every visible command, option and argument), so they cannot drift from the CLI. What is
// only known at run time (the names of sessions) comes from the hidden `awrepl __complete sessions`,
// which prints the running and the saved session names, one a line, and never starts or stops a
// supervisor (a TAB press must not replace a supervisor of another version, as a real command would).
import type { Command, Option } from "commander";
import { deadline } from "../core/deadline.ts";
import { usageError } from "../core/errors.ts";
import type { HomeLayout } from "../settings/home.ts";
import type { CliContext } from "./context.ts";

export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

/** What a value is: drives the shell's completion of it. A string[] is a fixed choice. */
type ValueKind = "session" | "file" | "dir" | "command" | "number" | "text" | "commands" | readonly string[];

type OptSpec = { short?: string; long?: string; value: ValueKind | null; description: string };
type CmdSpec = { name: string; description: string; options: OptSpec[]; arg: ValueKind | null; subcommands: CmdSpec[] };
type ProgramSpec = { global: OptSpec[]; commands: CmdSpec[] };

/** Option values by long flag; anything else that takes a value is free text. */
const OPTION_VALUES: Record<string, ValueKind> = {
  "--session": "session",
  "--file": "file",
  "--python": "command",
  "--display-dir": "dir",
  "--cwd": "dir",
  "--venv": "dir",
  "--timeout": "number",
  "--max-output": "number",
  "--lines": "number",
  "--wait": "number",
  "--max-image": "number",
  "--prefix": "dir",
  "--home": "dir",
  "--awrepl-bin": "file",
  "--timeout-ms": "number",
  "--interrupt-mode": ["message", "signal"],
  "--memory": "number",
  "--max-procs": "number",
  "--cpu": "number",
  "--max-file-size": "number",
  "--last": "number",
};

/** The first argument of a command, by command name (others get no completion: code, names...). */
const ARG_VALUES: Record<string, ValueKind> = {
  close: "session",
  snapshot: "file",
  restore: "file",
  trust: "file",
  export: "file",
  completion: SHELLS,
  help: "commands",
};

function optSpec(o: Option): OptSpec {
  const takes = o.required || o.optional;
  return {
    short: o.short,
    long: o.long,
    value: takes ? (OPTION_VALUES[o.long ?? ""] ?? "text") : null,
    description: o.description,
  };
}

function cmdSpec(cmd: Command): CmdSpec {
  const help = cmd.createHelp();
  const args = cmd.registeredArguments;
  return {
    name: cmd.name(),
    description: cmd.description(),
    options: help.visibleOptions(cmd).map(optSpec),
    arg: args.length ? (ARG_VALUES[cmd.name()] ?? null) : null,
    subcommands: help.visibleCommands(cmd).filter((c) => c.name() !== "help").map(cmdSpec),
  };
}

export function programSpec(program: Command): ProgramSpec {
  const help = program.createHelp();
  return { global: help.visibleOptions(program).map(optSpec), commands: help.visibleCommands(program).map(cmdSpec) };
}

const flags = (o: OptSpec) => [o.short, o.long].filter((f): f is string => !!f);
const words = (list: string[]) => list.join(" ");
/** The options that stay valid after a subcommand (DESIGN: -s/--session before or after it). */
const afterCommand = (spec: ProgramSpec) => spec.global.filter((o) => o.long === "--session" || o.long === "--python");

// ---------------------------------------------------------------------------------------------- bash

export function bashScript(spec: ProgramSpec, version: string): string {
  const all = [...spec.global, ...spec.commands.flatMap((c) => [...c.options, ...c.subcommands.flatMap((s) => s.options)])];
  const valueOpts = [...new Set(all.filter((o) => o.value).flatMap(flags))];
  const byKind = (kind: ValueKind) => [...new Set(all.filter((o) => o.value === kind).flatMap(flags))];
  const lateGlobals = words(afterCommand(spec).flatMap(flags));
  const optionCases: string[] = [];
  const argCases: string[] = [];
  const argLine = (key: string, kind: ValueKind | null, empty: string) => {
    if (!kind || kind === "number" || kind === "text") return;
    const body = kind === "session"
      ? `_awrepl_reply "$(_awrepl_sessions)"`
      : kind === "file"
      ? `_awrepl_files`
      : kind === "dir"
      ? `_awrepl_files -d`
      : kind === "command"
      ? `COMPREPLY=($(compgen -c -- "$cur"))`
      : kind === "commands"
      ? `_awrepl_reply "${words(spec.commands.map((c) => c.name))}"`
      : `_awrepl_reply "${words([...kind])}"`;
    argCases.push(`    "${key}") [[ -z $${empty} ]] && ${body} ;;`);
  };
  for (const c of spec.commands) {
    optionCases.push(`    "${c.name} ") opts="${words(c.options.flatMap(flags))} ${lateGlobals}" ;;`);
    argLine(`${c.name} `, c.arg, "arg");
    if (c.subcommands.length) argCases.push(`    "${c.name} ") [[ -z $arg ]] && _awrepl_reply "${words(c.subcommands.map((s) => s.name))}" ;;`);
    for (const s of c.subcommands) {
      optionCases.push(`    "${c.name} ${s.name}") opts="${words(s.options.flatMap(flags))} ${lateGlobals}" ;;`);
      argLine(`${c.name} ${s.name}`, s.arg, "arg2");
    }
  }
  const valueCase = (kind: ValueKind, body: string) => {
    const f = byKind(kind);
    return f.length ? `    ${f.join("|")}) ${body}; return ;;` : "";
  };
  return `# bash completion for awrepl ${version} (generated by \`awrepl completion bash\`)
#   now:     source <(awrepl completion bash)
#   always:  mkdir -p ~/.local/share/bash-completion/completions && awrepl completion bash > ~/.local/share/bash-completion/completions/awrepl   (bash-completion)
#            or in ~/.bashrc: source <(awrepl completion bash)
# Session names come from \`awrepl __complete sessions\` (running and saved; never starts a supervisor).

_awrepl_bin() {
  local bin=\${COMP_WORDS[0]}
  [[ $bin == "~/"* ]] && bin=$HOME/\${bin#"~/"}
  command -v -- "$bin" >/dev/null 2>&1 || bin=awrepl
  printf '%s\\n' "$bin"
}
_awrepl_sessions() { command "$(_awrepl_bin)" __complete sessions 2>/dev/null; }
_awrepl_reply() { COMPREPLY=($(compgen -W "$1" -- "$cur")); }
_awrepl_files() {
  # One name a line: names with spaces stay whole (bash 3.2, macOS's, has no mapfile).
  local IFS=$'\n'
  compopt -o filenames 2>/dev/null
  if [[ $1 == -d ]]; then COMPREPLY=($(compgen -d -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
}

_awrepl() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]}
  local cmd="" sub="" arg="" arg2="" i w
  COMPREPLY=()
  # "--session=NAME": bash splits the word at "=" (COMP_WORDBREAKS).
  if [[ $cur == "=" ]]; then prev=\${COMP_WORDS[COMP_CWORD-1]}; cur=""; fi
  if [[ $prev == "=" && $COMP_CWORD -ge 2 ]]; then prev=\${COMP_WORDS[COMP_CWORD-2]}; fi
  # The words so far: the command, its subcommand, its first argument; option values skipped.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=\${COMP_WORDS[i]}
    case $w in
      --) return ;;
      ${valueOpts.join("|")})
        [[ \${COMP_WORDS[i+1]} == "=" ]] && ((i++))
        ((i++)) ;;
      -*) ;;
      *)
        if [[ -z $cmd ]]; then cmd=$w
        elif [[ -z $arg ]]; then arg=$w
        else arg2=$w; fi ;;
    esac
  done
  # Commands with subcommands: the subcommand is the first argument.
  case "$cmd" in
    ${spec.commands.filter((c) => c.subcommands.length).map((c) => c.name).join("|") || "__none__"}) sub=$arg; arg=$arg2; arg2="" ;;
  esac
  case $prev in
${
    [
      valueCase("session", `_awrepl_reply "$(_awrepl_sessions)"`),
      valueCase("file", `_awrepl_files`),
      valueCase("dir", `_awrepl_files -d`),
      valueCase("command", `COMPREPLY=($(compgen -c -- "$cur"))`),
      byKind("number").length || byKind("text").length ? `    ${[...byKind("number"), ...byKind("text")].join("|")}) return ;;` : "",
    ].filter(Boolean).join("\n")
  }
  esac
  if [[ $cur == -* ]]; then
    local opts=""
    case "$cmd \${sub}" in
    " ") opts="${words(spec.global.flatMap(flags))}" ;;
${optionCases.join("\n")}
    esac
    _awrepl_reply "$opts"
    return
  fi
  case "$cmd \${sub}" in
    " ") _awrepl_reply "${words(spec.commands.map((c) => c.name))}" ;;
${argCases.join("\n")}
  esac
}
complete -F _awrepl awrepl
`;
}

// ----------------------------------------------------------------------------------------------- zsh

const zq = (s: string) => s.replace(/\\/g, "\\\\").replace(/'/g, "'\\''").replace(/([[\]:])/g, "\\$1");

function zshAction(kind: ValueKind | null, commands: string[]): string {
  if (kind === null) return "";
  if (kind === "session") return "_awrepl_sessions";
  if (kind === "file") return "_files";
  if (kind === "dir") return "_files -/";
  if (kind === "command") return "_command_names -e";
  if (kind === "commands") return `(${commands.join(" ")})`;
  if (kind === "number" || kind === "text") return " ";
  return `(${kind.join(" ")})`;
}

function zshOption(o: OptSpec, commands: string[]): string {
  const f = flags(o);
  const desc = `[${zq(o.description)}]`;
  const value = o.value ? `:${o.value === "number" ? "number" : typeof o.value === "string" ? o.value : "value"}:${zshAction(o.value, commands)}` : "";
  const excl = f.length > 1 ? `'(${f.join(" ")})'` : "";
  if (f.length > 1) {
    const forms = f.map((x) => (o.value ? (x.startsWith("--") ? `${x}=` : `${x}+`) : x));
    return `${excl}{${forms.join(",")}}'${desc}${value}'`;
  }
  const only = f[0] as string;
  return `'${o.value ? (only.startsWith("--") ? `${only}=` : `${only}+`) : only}${desc}${value}'`;
}

export function zshScript(spec: ProgramSpec, version: string): string {
  const commands = spec.commands.map((c) => c.name);
  const late = afterCommand(spec).map((o) => zshOption(o, commands));
  const describe = (list: CmdSpec[]) => list.map((c) => `'${c.name.replace(/:/g, "\\:")}:${c.description.replace(/'/g, "'\\''")}'`).join(" ");
  const cmdCase = (c: CmdSpec, indent: string): string => {
    const opts = [...c.options.map((o) => zshOption(o, commands)), ...late];
    if (c.subcommands.length) {
      return `${indent}(${c.name})
${indent}  _arguments -C ${opts.join(" ")} '1: :->sub' '*:: :->subargs' && ret=0
${indent}  case $state in
${indent}    (sub) local -a subs; subs=(${describe(c.subcommands)}); _describe -t commands '${c.name} command' subs && ret=0 ;;
${indent}    (subargs)
${indent}      case $words[1] in
${c.subcommands.map((s) => cmdCase(s, `${indent}        `)).join("\n")}
${indent}      esac ;;
${indent}  esac ;;`;
    }
    const arg = c.arg ? `'1:${typeof c.arg === "string" ? c.arg : "value"}:${zshAction(c.arg, commands)}'` : "'*: :'";
    return `${indent}(${c.name}) _arguments ${opts.join(" ")} ${arg} && ret=0 ;;`;
  };
  return `#compdef awrepl
# zsh completion for awrepl ${version} (generated by \`awrepl completion zsh\`)
#   now (after compinit):  source <(awrepl completion zsh)
#   always:                mkdir -p ~/.zfunc && awrepl completion zsh > ~/.zfunc/_awrepl
#                          and in ~/.zshrc, before compinit: fpath=(~/.zfunc $fpath)
# Session names come from \`awrepl __complete sessions\` (running and saved; never starts a supervisor).

_awrepl_sessions() {
  local -a names
  names=(\${(f)"$(command \${words[1]:-awrepl} __complete sessions 2>/dev/null || command awrepl __complete sessions 2>/dev/null)"})
  _wanted sessions expl 'session' compadd -a names
}

_awrepl() {
  local curcontext="$curcontext" state state_descr line ret=1
  typeset -A opt_args
  _arguments -C ${spec.global.map((o) => zshOption(o, commands)).join(" ")} '1: :->command' '*:: :->args' && ret=0
  case $state in
    (command)
      local -a cmds
      cmds=(${describe(spec.commands)})
      _describe -t commands 'awrepl command' cmds && ret=0 ;;
    (args)
      curcontext="\${curcontext%:*:*}:awrepl-$words[1]:"
      case $words[1] in
${spec.commands.map((c) => cmdCase(c, "        ")).join("\n")}
      esac ;;
  esac
  return ret
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _awrepl "$@"
else
  compdef _awrepl awrepl
fi
`;
}

// ---------------------------------------------------------------------------------------------- fish

const fq = (s: string) => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

export function fishScript(spec: ProgramSpec, version: string): string {
  const all = [...spec.global, ...spec.commands.flatMap((c) => [...c.options, ...c.subcommands.flatMap((s) => s.options)])];
  const valueOpts = [...new Set(all.filter((o) => o.value).flatMap(flags))];
  const lines: string[] = [];
  const option = (o: OptSpec, cond: string) => {
    const parts = ["complete -c awrepl"];
    if (cond) parts.push(`-n ${fq(cond)}`);
    if (o.short) parts.push(`-s ${o.short.slice(1)}`);
    if (o.long) parts.push(`-l ${o.long.slice(2)}`);
    if (o.value === "session") parts.push(`-x -a '(__awrepl_sessions)'`);
    else if (o.value === "file") parts.push("-r -F");
    else if (o.value === "dir") parts.push(`-x -a '(__fish_complete_directories)'`);
    else if (o.value === "command") parts.push(`-x -a '(__fish_complete_command)'`);
    else if (o.value) parts.push("-x");
    parts.push(`-d ${fq(o.description)}`);
    lines.push(parts.join(" "));
  };
  const arg = (kind: ValueKind | null, cond: string) => {
    if (!kind || kind === "number" || kind === "text") return;
    const a = kind === "session"
      ? `-a '(__awrepl_sessions)'`
      : kind === "file"
      ? "-F"
      : kind === "dir"
      ? `-a '(__fish_complete_directories)'`
      : kind === "command"
      ? `-a '(__fish_complete_command)'`
      : kind === "commands"
      ? `-a ${fq(spec.commands.map((c) => c.name).join(" "))}`
      : `-a ${fq(kind.join(" "))}`;
    lines.push(`complete -c awrepl -n ${fq(cond)} ${a}`);
  };
  for (const o of spec.global) option(o, afterCommand(spec).includes(o) ? "" : "__awrepl_at 0");
  for (const c of spec.commands) {
    lines.push(`complete -c awrepl -n '__awrepl_at 0' -a ${c.name} -d ${fq(c.description)}`);
    for (const o of c.options) option(o, `__awrepl_is ${c.name}`);
    arg(c.arg, `__awrepl_is ${c.name}; and __awrepl_at 1`);
    for (const s of c.subcommands) {
      lines.push(`complete -c awrepl -n '__awrepl_is ${c.name}; and __awrepl_at 1' -a ${s.name} -d ${fq(s.description)}`);
      for (const o of s.options) option(o, `__awrepl_is ${c.name} ${s.name}`);
      arg(s.arg, `__awrepl_is ${c.name} ${s.name}; and __awrepl_at 2`);
    }
  }
  return `# fish completion for awrepl ${version} (generated by \`awrepl completion fish\`)
#   now:     awrepl completion fish | source
#   always:  mkdir -p ~/.config/fish/completions && awrepl completion fish > ~/.config/fish/completions/awrepl.fish
# Session names come from \`awrepl __complete sessions\` (running and saved; never starts a supervisor).

# The words typed so far that are neither options nor option values (the command, its arguments).
function __awrepl_words
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l skip 0
    for t in $tokens
        if test $skip = 1
            set skip 0
            continue
        end
        switch $t
            case ${valueOpts.join(" ")}
                set skip 1
            case '--'
                return
            case '-*'
            case '*'
                echo $t
        end
    end
end
# True when exactly N such words have been typed.
function __awrepl_at --argument-names n
    test (count (__awrepl_words)) -eq $n
end
# True when the words typed start with the given ones (e.g. "daemon status").
function __awrepl_is
    set -l w (__awrepl_words)
    test (count $w) -ge (count $argv); or return 1
    for i in (seq (count $argv))
        test "$w[$i]" = "$argv[$i]"; or return 1
    end
end
function __awrepl_sessions
    set -l bin (commandline -opc)[1]
    command $bin __complete sessions 2>/dev/null; or command awrepl __complete sessions 2>/dev/null
end

complete -c awrepl -f
${lines.join("\n")}
`;
}

// ------------------------------------------------------------------------------------ the commands

/**
 * The session names to offer: the running ones (when a supervisor of this version answers within a
 * second) and the saved ones. Only a raw connection: the client's usual path would start a supervisor,
 * or ask one of another version to stop, and a TAB press must do neither.
 */
export async function completionSessionNames(layout: HomeLayout): Promise<string[]> {
  const [{ SupervisorConnection }, { savedSessionNames }] = await Promise.all([
    import("../client/connection.ts"),
    import("../session/snapshot_files.ts"),
  ]);
  const names = new Set(savedSessionNames(layout.home));
  // One second for the hello and the list together (timed from before the connect).
  const giveUpAt = Date.now() + 1000;
  const left = () => Math.max(0, giveUpAt - Date.now());
  try {
    const conn = await SupervisorConnection.connect(layout);
    if (conn) {
      try {
        const hello = await deadline(conn.hello, left(), "the supervisor's hello");
        if (hello?.ok) {
          const rows = await deadline(conn.call({ type: "list" }), left(), "the list of sessions");
          for (const r of rows ?? []) names.add(r.name);
        }
      } finally {
        conn.close();
      }
    }
  } catch {
    // No names from the supervisor (none answered, or not within the second): the saved ones still help.
  }
  return [...names].sort();
}

/** `completion SHELL`, and the hidden `__complete sessions` its scripts call. */
export function registerCompletionCommands(program: Command, ctx: CliContext, version: string): void {
  program
    .command("completion")
    .description("print a shell completion script: bash, zsh or fish (its first lines say how to install it)")
    .argument("<shell>", "bash, zsh or fish")
    .option("--json", "refused: the output is a shell script for the shell to read")
    .action((shell: string, opts: { json?: boolean }) => {
      if (opts.json) throw usageError("completion prints a shell script that the shell sources; it has no JSON form (drop --json)");
      const generate = { bash: bashScript, zsh: zshScript, fish: fishScript }[shell as Shell];
      if (!generate) throw usageError(`completion takes bash, zsh or fish, not ${JSON.stringify(shell)}`);
      process.stdout.write(generate(programSpec(program), version));
    });
  program
    .command("__complete", { hidden: true })
    .description("print completion candidates (sessions: the session names, one a line)")
    .argument("<what>")
    .action(async (what: string) => {
      if (what !== "sessions") throw usageError(`__complete takes sessions, not ${JSON.stringify(what)}`);
      const names = await completionSessionNames(ctx.layout);
      if (names.length) process.stdout.write(`${names.join("\n")}\n`);
    });
}
