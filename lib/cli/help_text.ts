// The help texts commander prints, made at build time by help_macro.ts (a Bun macro: the call below is
// replaced by its result, an object literal, when this module is bundled or transpiled). A test
// compares them with what commander prints at run time (tests/e2e/cli_usage.test.ts).
import { helpTexts } from "./help_macro.ts" with { type: "macro" };

/** The help of the program ("") or of one of its commands; undefined for a name that is none. */
export function helpText(command: string): string | undefined {
  // The macro's promise is awaited at build time: what is inlined is the plain object.
  const texts = helpTexts() as unknown as Record<string, string>;
  return Object.hasOwn(texts, command) ? texts[command] : undefined;
}
