// `bun scripts/wheels.ts [--release=DIR] [--out=DIR] [--python=PY]`: the Python wheels, one per release
// target, made from a release directory's executables (`npm run release` calls buildReleaseWheels
// after writing them) into DIR/wheels/: awrepl-<version>-py3-none-<platform>.whl, each holding the
// client package (python/awrepl) and that target's executable as the script `awrepl` (`awrepl.exe` on
// Windows), plus a SHA256SUMS of the wheels. docs/packaging.md says what goes where and why.
//
// A wheel is built by setuptools (python/pyproject.toml, python/setup.py) through `pip wheel`, in a
// staging directory holding a copy of python/, the executable in bin/ and wheel-target.json (version,
// platform tag, executable), so the checkout is never written to. The platform tag is read from the
// executable (scripts/wheel-tags.ts): the glibc its symbol versions need, the macOS it was linked for.
//
// The Python that builds: --python or AWREPL_WHEEL_PYTHON when given (it must work), else the first of
// `python3` on PATH and /usr/bin/python3 that has pip, setuptools 61+ and wheel; the release says which.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { devNull, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { RELEASE_TARGETS } from "./release_targets.ts";
import { wheelPlatformTag } from "./wheel-tags.ts";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
export const PYTHON_SOURCE = join(root, "python");
export const VERSION: string = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;

type Target = (typeof RELEASE_TARGETS)[number];

/** The wheel's file name for a version and platform tag (PEP 427). */
export const wheelName = (version: string, platform: string) => `awrepl-${version}-py3-none-${platform}.whl`;

const FIND_BACKEND = `
import importlib.util, sys
try:
    import setuptools, wheel
except ImportError as e:
    sys.exit("lacks %s" % e.name)
if importlib.util.find_spec("pip") is None:
    sys.exit("lacks pip")
major = int(setuptools.__version__.split(".")[0])
if major < 61:
    sys.exit("has setuptools %s (61 or later is needed)" % setuptools.__version__)
print("setuptools %s, wheel %s" % (setuptools.__version__, wheel.__version__))
`;

/** Whether `python` can build the wheels: null when it can, else what it lacks. */
function backendProblem(python: string): string | null {
  const r = spawnSync(python, ["-c", FIND_BACKEND], { encoding: "utf8", timeout: 30_000 });
  if (r.error) return `cannot be run (${(r.error as NodeJS.ErrnoException).code ?? r.error.message})`;
  if (r.status !== 0) return (r.stderr.trim().split("\n").at(-1) ?? "").trim() || `exits ${r.status}`;
  return null;
}

/** The Python that builds the wheels (see the top of this file); throws naming every candidate tried. */
export function resolveWheelPython(explicit: string | undefined = process.env.AWREPL_WHEEL_PYTHON): string {
  const candidates = explicit ? [explicit] : ["python3", "/usr/bin/python3"];
  const problems: string[] = [];
  for (const python of candidates) {
    const problem = backendProblem(python);
    if (!problem) return python;
    problems.push(`${python} ${problem}`);
  }
  throw new Error(
    `no Python to build the wheels with: ${
      problems.join("; ")
    }. Install pip, setuptools 61+ and wheel (Debian: apt-get install python3-pip python3-setuptools python3-wheel; elsewhere: pip install setuptools wheel), or name a Python that has them with AWREPL_WHEEL_PYTHON`,
  );
}

/** Copies python/ (or `source`, shaped like it) into `stage`: pyproject.toml, setup.py and the awrepl package, without caches. */
function stageSource(stage: string, source: string): void {
  for (const f of ["pyproject.toml", "setup.py"]) copyFileSync(join(source, f), join(stage, f));
  const pkg = join(source, "awrepl");
  if (!existsSync(join(pkg, "__init__.py"))) throw new Error(`${pkg}/__init__.py is missing: the wheel needs the client package`);
  cpSync(pkg, join(stage, "awrepl"), { recursive: true, filter: (src) => !/(^|\/)__pycache__$|\.py[co]$/.test(src) });
  for (const f of ["README.md", "LICENSE"]) if (existsSync(join(root, f))) copyFileSync(join(root, f), join(stage, f));
}

export type BuiltWheel = { target: string; platform: string; wheel: string };

/**
 * Builds the wheel of one release target from its executable into `outDir`: the file's platform tag
 * is read from the executable, the package from python/. Returns the wheel's path.
 */
export function buildWheel(options: { target: Target; executable: string; outDir: string; python: string; source?: string }): BuiltWheel {
  const { target, executable, outDir, python } = options;
  const platform = wheelPlatformTag(target.target, executable);
  mkdirSync(outDir, { recursive: true });
  const stage = mkdtempSync(join(tmpdir(), "awrepl-wheel-"));
  try {
    stageSource(stage, options.source ?? PYTHON_SOURCE);
    const exe = `bin/${target.file.endsWith(".exe") ? "awrepl.exe" : "awrepl"}`;
    mkdirSync(join(stage, "bin"));
    copyFileSync(executable, join(stage, exe));
    chmodSync(join(stage, exe), 0o755);
    writeFileSync(join(stage, "wheel-target.json"), `${JSON.stringify({ version: VERSION, platform, executable: exe }, null, 2)}\n`);
    const wheel = join(outDir, wheelName(VERSION, platform));
    rmSync(wheel, { force: true });
    // pip as the PEP 517 frontend, with the installed setuptools (no PyPI: no build isolation, no
    // index) and no pip configuration of the user's (file or PIP_* variables).
    const args = ["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--no-cache-dir", "--disable-pip-version-check", "-w", outDir, stage];
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^PIP_/i.test(k)));
    const r = spawnSync(python, args, { encoding: "utf8", timeout: 600_000, env: { ...env, PIP_CONFIG_FILE: devNull, PIP_NO_INPUT: "1" } });
    if (r.status !== 0 || !existsSync(wheel)) {
      const output = `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? String(r.error) : ""}`.trim();
      throw new Error(`${python} -m pip wheel failed for ${target.target} (expected ${basename(wheel)}):\n${output}`);
    }
    return { target: target.target, platform, wheel };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

export type ReleaseWheels = { built: BuiltWheel[]; missing: string[]; failed: string[]; python: string };

/**
 * One wheel per release target whose executable is in `releaseDir` (a target without one gets no
 * wheel: listed in `missing`), into `outDir` (default releaseDir/wheels), with a SHA256SUMS of them.
 */
export function buildReleaseWheels(releaseDir: string, options: { outDir?: string; python?: string } = {}): ReleaseWheels {
  const outDir = options.outDir ?? join(releaseDir, "wheels");
  const python = resolveWheelPython(options.python);
  rmSync(outDir, { recursive: true, force: true });
  const result: ReleaseWheels = { built: [], missing: [], failed: [], python };
  for (const target of RELEASE_TARGETS) {
    const executable = join(releaseDir, target.file);
    if (!existsSync(executable)) {
      result.missing.push(target.target);
      continue;
    }
    try {
      result.built.push(buildWheel({ target, executable, outDir, python }));
    } catch (err) {
      result.failed.push(`${target.target}: ${(err as Error).message}`);
    }
  }
  if (result.built.length) {
    const sha256 = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");
    writeFileSync(join(outDir, "SHA256SUMS"), result.built.map((w) => `${sha256(w.wheel)}  ${basename(w.wheel)}\n`).join(""));
  }
  return result;
}

/** Prints what buildReleaseWheels did; returns the exit status (1 when a present executable failed). */
function reportReleaseWheels(r: ReleaseWheels, label = "wheels"): number {
  for (const w of r.built) console.log(`${label}: ${basename(w.wheel)}`);
  for (const t of r.missing) console.error(`${label}: no wheel for ${t} (its executable was not built)`);
  for (const f of r.failed) console.error(`${label}: FAILED ${f}`);
  console.log(`${label}: ${r.built.length}/${RELEASE_TARGETS.length} wheels (built with ${r.python})`);
  return r.failed.length ? 1 : 0;
}

/** Builds and reports the wheels of a release directory (`npm run release` calls it); the exit status. */
export function writeReleaseWheels(releaseDir: string, label = "wheels", options: { outDir?: string; python?: string } = {}): number {
  try {
    return reportReleaseWheels(buildReleaseWheels(releaseDir, options), label);
  } catch (err) {
    console.error(`${label}: FAILED: ${(err as Error).message}`);
    return 1;
  }
}

if (import.meta.main) {
  const opt = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  process.exit(writeReleaseWheels(resolve(opt("release") ?? join(root, "dist", "release")), "wheels", { outDir: opt("out"), python: opt("python") }));
}
