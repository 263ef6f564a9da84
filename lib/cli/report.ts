// How a command that stops says so: one line on stderr, the exit status its error maps to, and with
// --json also one object on stdout (README, "The JSON result"). Shared by every command path.
import { AwreplError, type ErrorCode, ExitCode } from "../core/errors.ts";
import { writeStream } from "./stdio.ts";

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
export function errorJson(code: ErrorCode, message: string, exitCode: number): string {
  return `${JSON.stringify({ error: { code, message, exit_code: exitCode } })}\n`;
}

export function oneLine(text: string): string {
  return text
    .replace(/^error: /, "")
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .join(" ");
}
