// The one rule for session names: it keeps every name a safe file name (snapshots, specs, history and
// display folders are named after it) and a safe word on a command line.
import { usageError } from "./errors.ts";

export const SESSION_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** An environment variable name (`--env NAME`, a sandbox profile's `env`). */
export const ENV_VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `name` if it is a valid session name; otherwise a usage error naming it and `where` it came from. */
export function checkSessionName(name: unknown, where = "Session name"): string {
  if (typeof name === "string" && SESSION_NAME.test(name)) return name;
  const shown = JSON.stringify(name ?? null);
  const cut = shown.length > 80 ? `${shown.slice(0, 80)}... (${shown.length} characters)` : shown;
  throw usageError(`${where} ${cut} is invalid: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`);
}
