// Which awrepl this is: the package version, the client <-> supervisor protocol version, and which
// build of the executable (so a rebuilt binary of the same version is told apart in the log).
import { statFile } from "./fastio.ts";
import pkg from "../../package.json" with { type: "json" };

/** Bumped whenever a client <-> supervisor message changes shape (docs/supervisor-protocol.md, "Versions"). */
export const SUPERVISOR_PROTOCOL = 4;
export const AWREPL_VERSION: string = pkg.version;

/**
 * True when running as the compiled awrepl executable (not `bun main.ts`, not the library under Node,
 * Deno or Bun). The compiled executable's modules (chunks included) live in Bun's embedded file
 * system: file:///$bunfs/root/... (B:/~BUN/... on Windows). The name of process.execPath says nothing:
 * Deno is `deno`, a Node may be `nodejs` or `node20`.
 */
export function isCompiled(): boolean {
  const here = import.meta.url;
  return here.includes("$bunfs") || here.includes("~BUN");
}

let build: string | undefined;
/**
 * Which build of awrepl this is: the executable's size and mtime, so that a rebuilt or reinstalled
 * binary of the same version still replaces a supervisor running the old code. "source" otherwise.
 */
export function buildId(): string {
  if (build === undefined) {
    try {
      // fastio, not node:fs: the CLI's hello carries the build (lib/core/fastio.ts says what node:fs costs).
      if (!isCompiled()) build = "source";
      else {
        const st = statFile(process.execPath);
        build = st ? `${st.size}-${Math.round(st.mtimeMs)}` : "unknown";
      }
    } catch {
      build = "unknown";
    }
  }
  return build;
}
