// Run by `bun build` and by Bun's transpiler, not at run time (python_package.ts imports it
// `with { type: "macro" }`): the Python client package, python/awrepl/**, as an object of relative
// path → text, inlined into the module that asks for it. A macro rather than one text import per file:
// a module added to the package is embedded without anyone keeping a list.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** What belongs to the package: its modules and its PEP 561 marker (never __pycache__ or editor files). */
export const PACKAGE_FILE = /(\.py|^py\.typed)$/;

/** The files of python/awrepl, keyed by their path below python/ ("awrepl/kernel/_kernel.py"), sorted. */
export function pythonPackageFiles(): Record<string, string> {
  const python = join(import.meta.dir, "..", "..", "python");
  const files: Record<string, string> = {};
  const visit = (rel: string) => {
    for (const entry of readdirSync(join(python, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        if (entry.name !== "__pycache__" && !entry.name.startsWith(".")) visit(path);
      } else if (entry.isFile() && PACKAGE_FILE.test(entry.name)) files[path] = readFileSync(join(python, path), "utf8");
    }
  };
  visit("awrepl");
  return files;
}
