// The state directory: socket, supervisor log, runtime cache, snapshots, history, display files.
// AWREPL_HOME overrides it; otherwise $XDG_STATE_HOME/awrepl or ~/.local/state/awrepl (LOCALAPPDATA on
// Windows). It is created 0700 because the socket inside it must not be reachable by other users.
import { chmodSync, mkdirSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AWREPL_HOME) return env.AWREPL_HOME;
  if (process.platform === "win32") return join(env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local"), "awrepl");
  return join(env.XDG_STATE_HOME ?? join(homedir(), ".local", "state"), "awrepl");
}

/** Creates `dir` (and parents) if needed and makes sure it is private (0700). Returns `dir`. */
export function ensurePrivateDir(dir: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (process.platform !== "win32" && (statSync(dir).mode & 0o077) !== 0) chmodSync(dir, 0o700);
  return dir;
}

/** The state directory, created and private. */
export function ensureStateDir(env: NodeJS.ProcessEnv = process.env): string {
  return ensurePrivateDir(stateDir(env));
}

export const SESSION_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
