// `awrepl trust [PATH]`: allow a project's awrepl.jsonc to choose the interpreter (lib/settings/trust.ts
// says why that needs your word), `--revoke` to take it back.
import type { Command } from "commander";
import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import { usageError } from "../core/errors.ts";
import { ensurePrivateDir } from "../settings/home.ts";
import { revoke, trust } from "../settings/trust.ts";
import type { CliContext } from "./context.ts";
import { writeStream } from "./stdio.ts";

export function registerTrustCommand(program: Command, ctx: CliContext): void {
  program
    .command("trust")
    .description("allow the project file awrepl.jsonc (default: in this directory) to set the interpreter, or to be used at all where a sandboxed session could write")
    .argument("[path]", "the awrepl.jsonc file, or the directory holding it")
    .option("--revoke", "take the trust back")
    .option("--json", "print one JSON object: {file, trusted, sha256?} (with --revoke: {file, revoked})")
    .action(async (path: string | undefined, opts: { revoke?: boolean; json?: boolean }) => {
      const file = projectFile(ctx.cwd, path);
      const home = ensurePrivateDir(ctx.layout.home);
      if (opts.revoke) {
        const removed = revoke(home, file);
        if (opts.json) return void (await writeStream("stdout", `${JSON.stringify({ file, revoked: removed })}\n`));
        await writeStream("stdout", removed ? `No longer trusted: ${file}\n` : `${file} was not trusted\n`);
        return;
      }
      const { sha256 } = trust(home, file);
      if (opts.json) return void (await writeStream("stdout", `${JSON.stringify({ file, trusted: true, sha256 })}\n`));
      await writeStream("stdout", `Trusted ${file} (sha256 ${sha256.slice(0, 12)}): all of it is used (its "python" and "sandbox" too) until the file changes\n`);
    });
}

function projectFile(cwd: string, path: string | undefined): string {
  const target = resolve(cwd, path ?? ".");
  const st = statSync(target, { throwIfNoEntry: false });
  if (!st) throw usageError(`No such file or directory: ${target}`);
  const file = st.isDirectory() ? join(target, "awrepl.jsonc") : target;
  if (!statSync(file, { throwIfNoEntry: false })?.isFile()) throw usageError(`No awrepl.jsonc in ${target}`);
  return file;
}
