// What every CLI command gets from the program: the settings resolved once at the command line's edge
// (lib/settings/context.ts) and the session the global options name.
import { checkSessionName } from "../core/names.ts";
import { resolveSettings, type Settings } from "../settings/context.ts";
import type { SandboxFlags } from "./session_options.ts";
import { writeStream } from "./stdio.ts";

export type CliContext = Settings & {
  /** The session named by -s/--session (before or after the subcommand) or AWREPL_SESSION; validated. */
  session(): string | undefined;
  /** The global options that shape a session this command creates: --python and the sandbox flags. */
  sessionFlags(): SandboxFlags & { python?: string; venv?: string };
};

/**
 * The context every command gets: the settings, resolved here once (a config error is reported when
 * a command first asks for the config), and the session the global options name.
 */
export async function makeContext(
  flagSession: () => string | undefined,
  env: NodeJS.ProcessEnv,
  sessionFlags: () => SandboxFlags & { python?: string; venv?: string } = () => ({}),
): Promise<CliContext> {
  const settings = await resolveSettings(env);
  let told = false;
  return {
    ...settings,
    config() {
      const config = settings.config();
      if (!told) {
        told = true;
        for (const notice of config.notices ?? []) void writeStream("stderr", `awrepl: ${notice}\n`);
      }
      return config;
    },
    sessionFlags,
    session() {
      const flag = flagSession();
      if (flag !== undefined) return checkSessionName(flag);
      const fromEnv = env.AWREPL_SESSION;
      if (fromEnv === undefined || fromEnv === "") return undefined;
      return checkSessionName(fromEnv, "AWREPL_SESSION");
    },
  };
}
