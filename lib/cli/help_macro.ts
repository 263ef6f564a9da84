// Run by `bun build` and by Bun's transpiler, not at run time (help_text.ts imports it
// `with { type: "macro" }`): the help texts of the command line as commander prints them when stdout
// is not a terminal (80 columns, no colours), for the program and each of its commands, so that
// `awrepl --help` and `awrepl CMD --help` need no commander at run time.
import type { Command } from "commander";
import { buildProgram } from "./commands.ts";

/** What commander prints for `cmd`'s help where stdout is not a terminal. */
export function capturedHelp(cmd: Command): string {
  let out = "";
  cmd.configureOutput({ writeOut: (s) => (out += s), getOutHelpWidth: () => 80, getOutHasColors: () => false });
  cmd.outputHelp();
  return out;
}

/** "" → the program's help; a command's name → that command's. */
export async function helpTexts(): Promise<Record<string, string>> {
  // A state directory that does not exist: building the program reads no one's config.
  const program = await buildProgram({ PATH: process.env.PATH, AWREPL_HOME: "/nonexistent/awrepl-help-texts" }, () => {});
  const texts: Record<string, string> = { "": capturedHelp(program) };
  for (const cmd of program.commands) texts[cmd.name()] = capturedHelp(cmd);
  return texts;
}
