// What every CLI command gets from the program: the settings resolved once at the command line's edge
// (lib/settings/context.ts) and the session the global options name.
import type { Settings } from "../settings/context.ts";
import type { SandboxFlags } from "./session_options.ts";

export type CliContext = Settings & {
  /** The session named by -s/--session (before or after the subcommand) or AWREPL_SESSION; validated. */
  session(): string | undefined;
  /** The global options that shape a session this command creates: --python and the sandbox flags. */
  sessionFlags(): SandboxFlags & { python?: string };
};
