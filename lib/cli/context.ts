// What every CLI command gets from the program: the resolved global options and config. Shared by the
// local commands (lib/cli/program.ts, run) and the supervisor commands (lib/cli/remote.ts).
import type { Config } from "../settings/config.ts";

export type CliContext = {
  /** The session named by -s/--session (before or after the subcommand) or AWREPL_SESSION; validated. */
  session(): string | undefined;
  /** Config files + environment, loaded once on first use (flags are applied by each command). */
  config(): Config;
  /** Environment to resolve paths and defaults from (tests pass their own AWREPL_HOME through it). */
  env: NodeJS.ProcessEnv;
};
