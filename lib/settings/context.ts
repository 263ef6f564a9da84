// Settings resolved once at a command's edge and passed down: the caller's environment and directory,
// the state directory's layout, and the config (files + environment), read here once and kept.
// Nothing below a command's edge reads process.env, process.cwd() or the config files again.
import { type Config, loadConfig } from "./config.ts";
import { type HomeLayout, homeLayout, resolveHome } from "./home.ts";

export type Settings = {
  /** The caller's environment (tests pass their own AWREPL_HOME through it). */
  env: NodeJS.ProcessEnv;
  /** The caller's working directory: a new session's, and where ./awrepl.jsonc is read. */
  cwd: string;
  /** The state directory (absolute) and everything in it. */
  layout: HomeLayout;
  /**
   * Config files + environment (flags are laid on top by each command). A config that cannot be
   * loaded (a malformed file) throws here, when a command asks, so commands that need no config
   * (`sessions`, `close`, `daemon`) still work.
   */
  config(): Config;
};

/** The settings of a command run in `cwd` with `env`; the config files are read now (loadConfig). */
export async function resolveSettings(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): Promise<Settings> {
  const layout = homeLayout(resolveHome({ env }));
  const loaded = await loadConfig({ env, cwd, home: layout.home }).then(
    (config) => ({ config }),
    (error: unknown) => ({ error }),
  );
  return {
    env,
    cwd,
    layout,
    config() {
      if ("error" in loaded) throw loaded.error;
      return loaded.config;
    },
  };
}
