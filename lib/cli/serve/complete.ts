// Tab completion for the interactive REPL: the runtime's `complete` answers from the live namespace;
// this adapts its matches to what node:readline expects (matches that all start with the text being
// replaced), indents on a blank line, and completes the meta commands.
import { deadline, DeadlineError } from "../../core/deadline.ts";
import type { Session } from "../../protocol/api.ts";
import type { Completer } from "./reader.ts";

const META_COMMANDS = [":vars", ":inspect ", ":reset", ":timeout ", ":help", ":quit"];
/** A completion that takes longer (another client's cell is running in a shared session) gives up. */
const COMPLETE_TIMEOUT_MS = 2_000;
const MAX_MATCHES = 500;

/** `pending` returns the lines of the cell typed so far (before the current line), so completion sees them. */
export function makeCompleter(session: Session, pending: () => string): Completer {
  return async (before) => {
    if (/^\s*$/.test(before)) return [[before + " ".repeat(4 - (before.length % 4))], before];
    if (pending() === "" && /^\s*:\w*$/.test(before)) {
      const word = before.trimStart();
      return [META_COMMANDS.filter((c) => c.startsWith(word)), word];
    }
    const matches = await deadline(session.complete(pending() + before), COMPLETE_TIMEOUT_MS, "completions").catch((err) => {
      if (err instanceof DeadlineError) return [];
      throw err;
    });
    return fitMatches(matches ?? [], before);
  };
}

/**
 * readline inserts `match.slice(replaced.length)`, so every match must start with `replaced`. A runtime
 * may answer with whole dotted names (`os.path`, as rlcompleter does) or with the last part only
 * (`path`, as jedi does); take whichever tail of the line all matches extend.
 */
export function fitMatches(matches: string[], before: string): [string[], string] {
  const unique = [...new Set(matches)].slice(0, MAX_MATCHES);
  const dotted = /[\p{L}\p{N}_.]*$/u.exec(before)?.[0] ?? "";
  const word = /[\p{L}\p{N}_]*$/u.exec(before)?.[0] ?? "";
  for (const replaced of [dotted, word]) {
    if (unique.length > 0 && unique.every((m) => m.startsWith(replaced))) return [unique, replaced];
  }
  return [unique.filter((m) => m.startsWith(word)), word];
}
