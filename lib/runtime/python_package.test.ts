import { afterEach, beforeEach, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { PYTHON, ROOT, tempHome } from "../../tests/harness/common.ts";
import { AWREPL_VERSION } from "../core/version.ts";
import { kernelBootLine, pythonPackage, pythonPackageDir, VERSION_FILE } from "./python_package.ts";

let tmp: ReturnType<typeof tempHome>;
beforeEach(() => {
  tmp = tempHome();
});
afterEach(() => tmp.remove());

/** python/awrepl as it is on disk: its modules and py.typed, no bytecode caches. */
function packageOnDisk(): Record<string, string> {
  const python = join(ROOT, "python");
  const files: Record<string, string> = {};
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory() && entry.name !== "__pycache__") visit(path);
      else if (entry.isFile() && (entry.name.endsWith(".py") || entry.name === "py.typed")) files[relative(python, path)] = readFileSync(path, "utf8");
    }
  };
  visit(join(python, "awrepl"));
  return files;
}

/** Runs `code` in a real Python from `/`, without PYTHONPATH: only what `code` puts on sys.path is found. */
function python(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const env = { ...process.env };
  delete env.PYTHONPATH;
  const r = spawnSync(PYTHON, args, { cwd: "/", env, encoding: "utf8", timeout: 60_000 });
  return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
}

test("the embedded package is python/awrepl's modules and py.typed, byte for byte, plus the version file", () => {
  const { files, hash } = pythonPackage();
  const { [VERSION_FILE]: version, ...rest } = files;
  expect(rest).toEqual(packageOnDisk());
  expect(Object.keys(rest)).toContain("awrepl/kernel/_install.py");
  expect(Object.keys(rest)).toContain("awrepl/py.typed");
  expect(version).toBe(`${AWREPL_VERSION}\n`);
  expect(hash).toMatch(/^[0-9a-f]{16}$/);
});

test("written once under its hash, private, complete, with no temporary copy left; a second call writes nothing", () => {
  const dir = pythonPackageDir(tmp.home);
  const { files, hash } = pythonPackage();
  expect(dir).toBe(join(tmp.home, "python", hash));
  for (const [path, text] of Object.entries(files)) expect(readFileSync(join(dir, path), "utf8")).toBe(text);
  expect(statSync(join(tmp.home, "python")).mode & 0o777).toBe(0o700);
  expect(readdirSync(join(tmp.home, "python"))).toEqual([hash]);
  const before = statSync(join(dir, "awrepl", "__init__.py")).mtimeMs;
  expect(pythonPackageDir(tmp.home)).toBe(dir);
  expect(statSync(join(dir, "awrepl", "__init__.py")).mtimeMs).toBe(before);
  expect(readdirSync(join(tmp.home, "python"))).toEqual([hash]);
});

test("a state directory that does not exist yet is made private first", () => {
  const home = join(tmp.home, "nested", "state");
  const dir = pythonPackageDir(home);
  expect(statSync(home).mode & 0o777).toBe(0o700);
  expect(readFileSync(join(dir, VERSION_FILE), "utf8")).toBe(`${AWREPL_VERSION}\n`);
});

test("a real Python imports the written copy: this version, the kernel's installer finding the copy's directory", () => {
  const dir = pythonPackageDir(tmp.home);
  const code = `import sys; sys.path.insert(0, ${JSON.stringify(dir)}); import awrepl, awrepl.kernel._install as i; print(awrepl.__version__); print(i.package_parent())`;
  const r = python(["-c", code]);
  expect(r.stderr).toBe("");
  expect(r.stdout).toBe(`${AWREPL_VERSION}\n${dir}\n`);
});

test("the boot line runs the kernel module's main() from the directory, whatever characters its path holds", () => {
  // A directory holding a package whose kernel main() prints its arguments: the line's quoting is what is tested.
  const dir = join(tmp.home, `it's "quoted" \\ and spaced é`);
  mkdirSync(join(dir, "awrepl", "kernel"), { recursive: true });
  for (const init of ["awrepl/__init__.py", "awrepl/kernel/__init__.py"]) writeFileSync(join(dir, init), "");
  writeFileSync(join(dir, "awrepl/kernel/__main__.py"), "import sys\ndef main():\n    print(sys.path[0]); print(sys.argv[1:]); return 3\n");
  const r = python(["-c", kernelBootLine(dir), "install", "--session", "s"]);
  expect(r.stderr).toBe("");
  expect(r.stdout).toBe(`${dir}\n['install', '--session', 's']\n`);
  expect(r.status).toBe(3);
});
