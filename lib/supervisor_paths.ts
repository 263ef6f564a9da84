// Where a supervisor's files live, derived from the state directory alone so that every client and
// the supervisor agree without talking: socket, log, start-up lock.
import { statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { stateDir } from "./paths.ts";
import { socketPath } from "./transport.ts";
import pkg from "../package.json" with { type: "json" };

/** Bumped whenever a message changes shape; `hello` and `stop` never change. */
export const SUPERVISOR_PROTOCOL = 1;
export const AWREPL_VERSION: string = pkg.version;

/** True when running as the compiled awrepl executable (not `bun main.ts`, not a library under Node). */
export function isCompiled(): boolean {
  const here = import.meta.url;
  return here.includes("$bunfs") || here.includes("~BUN") || !/^(bun|node)(\.exe)?$/i.test(basename(process.execPath));
}

let build: string | undefined;
/**
 * Which build of awrepl this is: the executable's size and mtime, so that a rebuilt or reinstalled
 * binary of the same version still replaces a supervisor running the old code. "source" otherwise.
 */
export function buildId(): string {
  if (build === undefined) {
    try {
      const st = isCompiled() ? statSync(process.execPath) : null;
      build = st ? `${st.size}-${Math.round(st.mtimeMs)}` : "source";
    } catch {
      build = "unknown";
    }
  }
  return build;
}

export type SupervisorPaths = {
  home: string;
  socket: string;
  log: string;
  lock: string;
};

export function supervisorPaths(home: string): SupervisorPaths {
  return {
    home,
    socket: socketPath(home),
    log: join(home, "supervisor.log"),
    lock: join(home, "supervisor.lock"),
  };
}

/** Options every client call takes: which state directory (tests point at their own). */
export type ClientOptions = {
  /** Environment to resolve AWREPL_HOME from and to start the supervisor with. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** State directory; overrides `env`. */
  home?: string;
};

/** Absolute: the supervisor runs in another directory, so a relative AWREPL_HOME must not reach it. */
export function resolveHome(options: ClientOptions = {}): string {
  return resolve(options.home ?? stateDir(options.env ?? process.env));
}
