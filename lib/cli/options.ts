// Option values every command reads the same way: a count of milliseconds or bytes (`--timeout`,
// `--max-output`, serve's `:timeout`), checked by the one rule in lib/core/limits.ts.
import { usageError } from "../core/errors.ts";
import { type NumberKey, parseCount } from "../core/limits.ts";

/** `text` as the whole number setting `key`, or a usage error naming `flag` and the value. */
export function countOption(flag: string, key: NumberKey, text: string): number {
  const parsed = parseCount(text, key);
  if ("problem" in parsed) throw usageError(`${flag} ${parsed.problem}`);
  return parsed.value;
}
