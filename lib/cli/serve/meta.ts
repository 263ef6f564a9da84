// Meta commands of `serve`: a line starting with ":" at the primary prompt. No Python statement starts
// with a colon, so these can never shadow code.
import { AwreplError } from "../../core/errors.ts";
import type { InspectInfo } from "../../protocol/runtime.ts";
import type { Session } from "../../protocol/api.ts";
import type { Terminal } from "./cell.ts";
import { countOption } from "../options.ts";
import { wrap } from "./style.ts";

export type MetaState = {
  /** Per-cell timeout in ms, 0 = none; `:timeout` changes it. */
  timeoutMs: number;
};

export type MetaOutcome = "continue" | "quit";

const HELP: [string, string][] = [
  [":vars", "list the session's variables"],
  [":inspect NAME", "describe one variable"],
  [":reset", "clear the session's namespace"],
  [":timeout [MS]", "show or set the per-cell timeout (0 = none)"],
  [":help", "this list"],
  [":quit", "leave (also Ctrl-D)"],
];

export function isMetaCommand(line: string): boolean {
  return /^\s*:[A-Za-z?]/.test(line);
}

export async function runMetaCommand(line: string, session: Session, term: Terminal, state: MetaState, width: number): Promise<MetaOutcome> {
  const [word = "", ...args] = line.trim().slice(1).split(/\s+/);
  try {
    switch (word.toLowerCase()) {
      case "q":
      case "quit":
      case "exit":
        return "quit";
      case "h":
      case "?":
      case "help":
        showHelp(term, width);
        return "continue";
      case "v":
      case "vars":
        showVariables(await session.variables(), term, width);
        return "continue";
      case "i":
      case "inspect":
        if (args.length !== 1) throw new AwreplError("usage", "Usage: :inspect NAME");
        showInspect(await session.inspect(args[0] as string), term, width);
        return "continue";
      case "reset":
        await session.reset();
        term.err(term.style.dim("Namespace cleared.") + "\n");
        return "continue";
      case "timeout":
        setTimeoutMs(args, term, state);
        return "continue";
      default:
        throw new AwreplError("usage", `Unknown command :${word}; :help lists the commands`);
    }
  } catch (err) {
    if (!(err instanceof AwreplError)) throw err;
    term.err(term.style.error(err.message) + "\n");
    return "continue";
  }
}

function showHelp(term: Terminal, width: number): void {
  const pad = Math.max(...HELP.map(([cmd]) => cmd.length)) + 2;
  // On a narrow terminal every description goes under its command instead of wrapping mid-word.
  const table = HELP.every(([, what]) => pad + what.length <= width);
  const lines = HELP.flatMap(([cmd, what]) => (table ? [cmd.padEnd(pad) + what] : [cmd, ...wrap(what, width - 2).map((l) => `  ${l}`)]));
  lines.push(...wrap("Ctrl-C interrupts a running cell or clears the line; Tab completes.", width));
  // The worker's stdin is /dev/null: say so before someone waits on an input() that cannot be answered.
  lines.push(...wrap("Cells cannot read the keyboard: input() and getpass raise EOFError, breakpoint()/pdb quits at once; assign the values in the cell instead.", width));
  term.out(lines.join("\n") + "\n");
}

function showVariables(vars: Record<string, string>, term: Terminal, width: number): void {
  const names = Object.keys(vars).sort();
  if (names.length === 0) {
    term.out(term.style.dim("(no variables)") + "\n");
    return;
  }
  const pad = Math.min(Math.max(...names.map((n) => n.length)) + 2, Math.floor(width / 3));
  for (const name of names) {
    const repr = oneLine(vars[name] ?? "");
    const head = name.length + 2 > pad ? `${name}  ` : name.padEnd(pad);
    term.out(head + clip(repr, Math.max(width - head.length, 10)) + "\n");
  }
}

function showInspect(info: InspectInfo, term: Terminal, width: number): void {
  const rows: [string, string][] = [["type", info.type]];
  for (const key of ["signature", "len", "shape", "dtype", "module", "file"] as const) {
    const v = info[key];
    if (v !== undefined && v !== null) rows.push([key, String(v)]);
  }
  if (info.keys?.length) rows.push(["keys", info.keys.join(", ")]);
  if (info.dir?.length) rows.push(["attributes", `${info.dir.length}`]);
  rows.push(["repr", oneLine(info.repr)]);
  const pad = Math.max(...rows.map(([k]) => k.length)) + 2;
  for (const [key, value] of rows) term.out(key.padEnd(pad) + clip(value, Math.max(width - pad, 10)) + "\n");
  if (info.docstring) {
    // The runtime sends the docstring's first paragraph, the summary; the rest belongs to help().
    term.out(term.style.dim(info.docstring.trim().split("\n").slice(0, 8).join("\n")) + "\n");
  }
}

function setTimeoutMs(args: string[], term: Terminal, state: MetaState): void {
  const [arg] = args;
  if (arg !== undefined) {
    state.timeoutMs = countOption(":timeout", "timeoutMs", arg);
  }
  term.out(state.timeoutMs === 0 ? "No timeout: Ctrl-C interrupts a cell.\n" : `Cells time out after ${state.timeoutMs} ms.\n`);
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ");
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
