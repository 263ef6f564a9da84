// The Python client package (python/awrepl, the Jupyter kernel included), embedded in the compiled
// executable by a build-time macro (python_package_macro.ts), so `awrepl kernel install` works where
// pip never installed it. Written on first use to <state>/python/<sha256 prefix>/awrepl/... (a private
// temporary directory renamed into place: a reader sees all of it or nothing), and never removed:
// a kernelspec puts that directory on sys.path, so it must outlive the command that wrote it. A new
// build with other Python sources gets a directory of its own; an old kernelspec keeps its old one.
// Only `awrepl kernel` loads this module (its text stays off every other command's start).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { AWREPL_VERSION } from "../core/version.ts";
import { ensurePrivateDir } from "../settings/home.ts";
import { pythonPackageFiles } from "./python_package_macro.ts" with { type: "macro" };

export type PythonPackage = {
  /** Path below the sys.path entry ("awrepl/kernel/_kernel.py") → the file's text. */
  files: Readonly<Record<string, string>>;
  /** The first 16 hex digits of a sha256 over every path and text: the directory's name. */
  hash: string;
};

/** Beside the package's __init__.py in the written copy only (a wheel or a checkout has none). */
export const VERSION_FILE = "awrepl/_version.txt";

let loaded: PythonPackage | null = null;

/** The embedded package (the macro's object, inlined when this module is bundled or transpiled). */
export function pythonPackage(): PythonPackage {
  if (loaded) return loaded;
  // The version file says which awrepl this copy is (awrepl/__init__.py reads it before any installed distribution's metadata).
  const files: Record<string, string> = { ...(pythonPackageFiles() as unknown as Record<string, string>), [VERSION_FILE]: `${AWREPL_VERSION}\n` };
  const sha = createHash("sha256");
  for (const path of Object.keys(files).sort()) sha.update(path).update("\0").update(files[path] as string).update("\0");
  loaded = { files, hash: sha.digest("hex").slice(0, 16) };
  return loaded;
}

/** The file whose presence says a package directory is complete (it is the last thing a rename makes visible, with the rest). */
const MARKER = join("awrepl", "__init__.py");

/**
 * The directory to put on sys.path, `<home>/python/<hash>`, holding `awrepl/`: written once. Two
 * commands writing it at the same moment each build their own temporary copy; the first rename wins
 * and the other copy is dropped.
 */
export function pythonPackageDir(home: string): string {
  const pkg = pythonPackage();
  const root = ensurePrivateDir(join(ensurePrivateDir(home), "python"));
  const dir = join(root, pkg.hash);
  if (existsSync(join(dir, MARKER))) return dir;
  const tmp = mkdtempSync(join(root, `.${pkg.hash}-`));
  try {
    for (const [path, text] of Object.entries(pkg.files)) {
      const file = join(tmp, path);
      mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
      writeFileSync(file, text, { mode: 0o600 });
    }
    try {
      renameSync(tmp, dir);
    } catch (err) {
      // Another writer's rename came first (ENOTEMPTY, EEXIST): its copy is the same bytes.
      if (!existsSync(join(dir, MARKER))) throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

/**
 * `python -c` code that runs the kernel module's main() from `dir` with the arguments that follow it
 * (`install ...`); python/awrepl/kernel/_install.py writes the same line into a kernelspec.
 */
export function kernelBootLine(dir: string): string {
  // A JSON string is a Python string literal (the same escapes), whatever the path holds.
  return `import sys; sys.path.insert(0, ${JSON.stringify(dir)}); from awrepl.kernel.__main__ import main; sys.exit(main())`;
}
