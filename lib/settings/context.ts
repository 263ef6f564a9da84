// Settings resolved once at a command's edge and passed down: the caller's environment and directory,
// the state directory's layout, and the config (files + environment), read on first use and kept.
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
  /** Config files + environment, loaded once on first use (flags are laid on top by each command). */
  config(): Config;
};

export function resolveSettings(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): Settings {
  const layout = homeLayout(resolveHome({ env }));
  let config: Config | undefined;
  return {
    env,
    cwd,
    layout,
    config() {
      config ??= loadConfig({ env, cwd, home: layout.home });
      return config;
    },
  };
}
