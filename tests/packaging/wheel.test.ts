// The Python wheel (scripts/wheels.ts; docs/packaging.md), built by the release's own function from the
// local executable (dist/awrepl) and installed the way users install it: `pip install` of the wheel
// file into a fresh venv, offline (--no-index, no pip configuration, a proxy that refuses everything).
// Then, with only the venv's bin and /usr/bin:/bin on PATH and a private AWREPL_HOME: `awrepl` is the
// venv's script, `awrepl --self-test` and `python -m awrepl --self-test` pass, `import awrepl` loads the
// installed package, the original package's README examples (fixtures/original_readme.py) and this
// README's Python section run; `pip uninstall` leaves the venv exactly as it was. Also: the wheel's
// tags, metadata, file modes and RECORD hashes, the tags pip calls compatible here, and the glibc the
// tag is derived from against what objdump reads. Debian's python3 gets all of it; pyenv's 3.9 and 3.13
// (when installed) the install, the examples and the uninstall. Skipped, saying so, only when
// `python3 -m venv` cannot work (no ensurepip: Debian's python3-venv).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { devNull, homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { RELEASE_TARGETS } from "../../scripts/build.ts";
import { macosTagFor, readElfNeeds, readMachOMinimum, wheelPlatformTag } from "../../scripts/wheel-tags.ts";
import { buildReleaseWheels, buildWheel, type ReleaseWheels, resolveWheelPython, VERSION, wheelName } from "../../scripts/wheels.ts";
import { extractBlocks } from "../e2e/readme_blocks.ts";
import { awreplBinary, cleanupHome, makeHome, ROOT } from "../harness/mod.ts";
import { NATIVE_FILE } from "./release.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";
type Target = (typeof RELEASE_TARGETS)[number];
const NATIVE = RELEASE_TARGETS.find((t) => t.file === NATIVE_FILE);
const FIXTURE = join(ROOT, "tests", "packaging", "fixtures", "original_readme.py");
/** The README's section whose `python` blocks this test runs (the README test marks them not-run). */
const README_SECTION = "## Library API (Python)";

const venvMissing = spawnSync(SYSTEM_PYTHON, ["-c", "import venv, ensurepip"], { stdio: "ignore", timeout: 60_000 }).status !== 0;
if (venvMissing) console.warn(`wheel.test.ts: skipped: ${SYSTEM_PYTHON} -m venv cannot create a venv (no ensurepip; Debian: apt-get install python3-venv)`);
if (!NATIVE) console.warn(`wheel.test.ts: skipped: no release target for ${process.platform}-${process.arch}`);

type Done = { code: number | null; stdout: string; stderr: string };

/** Runs a command without blocking the test process, killed after `timeoutMs`. */
function exec(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}): Promise<Done> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 120_000);
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

/** spawnSync, as a Done. */
function execSync(cmd: string, args: string[], maxBuffer = 64 * 1024 * 1024): Done {
  const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 120_000, maxBuffer });
  return { code: r.status, stdout: r.stdout ?? "", stderr: `${r.stderr ?? ""}${r.error ? String(r.error) : ""}` };
}

const show = (what: string, r: Done) => `${what}: exit ${r.code}\n--- stdout:\n${r.stdout}\n--- stderr:\n${r.stderr}`;

function expectOk(what: string, r: Done): Done {
  if (r.code !== 0) throw new Error(show(what, r));
  return r;
}

/** Every path under `dir` (files, directories, links), relative to it, sorted. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const visit = (rel: string) => {
    for (const name of readdirSync(join(dir, rel))) {
      const path = rel ? `${rel}/${name}` : name;
      out.push(path);
      if (lstatSync(join(dir, path)).isDirectory()) visit(path);
    }
  };
  visit("");
  return out.sort();
}

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/** What the wheel holds, read by Python's zipfile: the WHEEL and METADATA headers, each entry's mode, RECORD checked. */
const READ_WHEEL = `
import base64, email.parser, hashlib, json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
record = next(n for n in names if n.endswith(".dist-info/RECORD"))
headers = lambda n: [[k, v] for k, v in email.parser.Parser().parsestr(z.read(n).decode()).items()]
bad = []
listed = set()
for line in z.read(record).decode().splitlines():
    path, digest, size = line.rsplit(",", 2)
    listed.add(path)
    if path == record:
        continue
    data = z.read(path)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if digest != want or int(size) != len(data):
        bad.append(path)
print(json.dumps({
    "wheel": headers(info),
    "metadata": headers(meta),
    "entries": {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist()},
    "recordBad": bad,
    "unlisted": sorted(set(names) - listed),
}))
`;

type WheelContents = { wheel: [string, string][]; metadata: [string, string][]; entries: Record<string, number>; recordBad: string[]; unlisted: string[] };

let work: string;
let release: ReleaseWheels;
let wheel: string;
let binary: string;

const HAS_WHEEL_TESTS = !venvMissing && NATIVE !== undefined;

describe.skipIf(!HAS_WHEEL_TESTS)("the wheel built by the release step", () => {
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "awrepl-wheel-test-"));
    // A release directory holding only this platform's executable (a copy: a rebuild of dist/awrepl
    // while this runs changes nothing here); the other targets "failed".
    const dir = join(work, "release");
    mkdirSync(dir);
    binary = join(dir, (NATIVE as Target).file);
    copyFileSync(await awreplBinary(), binary);
    release = buildReleaseWheels(dir, { python: SYSTEM_PYTHON });
    wheel = release.built[0]?.wheel ?? "";
  }, 300_000);

  test("one wheel for the executable built, none (said) for the targets without one", () => {
    expect(release.failed).toEqual([]);
    expect(release.built.map((w) => w.target)).toEqual([(NATIVE as Target).target]);
    expect(release.missing.sort()).toEqual(RELEASE_TARGETS.filter((t) => t !== NATIVE).map((t) => t.target).sort());
    const dir = join(work, "release", "wheels");
    expect(readdirSync(dir).sort()).toEqual(["SHA256SUMS", wheelName(VERSION, release.built[0]?.platform ?? "")].sort());
    expect(readFileSync(join(dir, "SHA256SUMS"), "utf8")).toBe(`${sha256(wheel)}  ${wheelName(VERSION, release.built[0]?.platform ?? "")}\n`);
  });

  test("the glibc the tag is derived from is the highest GLIBC_ version objdump reads", () => {
    const objdump = Bun.which("objdump", { PATH: "/usr/bin:/bin" });
    if (!objdump) throw new Error("objdump is missing (Debian: binutils; .ci/run installs it)");
    const symbols = expectOk("objdump -T", execSync(objdump, ["-T", binary], 256 * 1024 * 1024)).stdout;
    const versions = [...new Set([...symbols.matchAll(/\bGLIBC_2\.(\d+)/g)].map((m) => Number(m[1])))].sort((a, b) => a - b);
    const highest = versions.at(-1) as number;
    expect(highest).toBeGreaterThan(0);
    const needs = readElfNeeds(binary);
    expect(needs.glibc).toEqual([2, highest]);
    const arch = process.arch === "x64" ? "x86_64" : "aarch64";
    expect(release.built[0]?.platform.split(".")[0]).toBe(`manylinux_2_${highest}_${arch}`);
    if (highest === 17) expect(release.built[0]?.platform).toBe(`manylinux_2_17_${arch}.manylinux2014_${arch}`);
    // The libraries it links, as objdump -p lists them.
    const linked = [...expectOk("objdump -p", execSync(objdump, ["-p", binary])).stdout.matchAll(/^\s*NEEDED\s+(\S+)/gm)].map((m) => m[1] as string);
    expect(needs.needed.sort()).toEqual(linked.sort());
  });

  test("the wheel's tags, metadata, script mode and RECORD", () => {
    const r = expectOk("reading the wheel", execSync(SYSTEM_PYTHON, ["-c", READ_WHEEL, wheel]));
    const c = JSON.parse(r.stdout) as WheelContents;
    const platform = release.built[0]?.platform as string;
    const header = (h: [string, string][], key: string) => h.filter(([k]) => k === key).map(([, v]) => v);
    expect(header(c.wheel, "Wheel-Version")).toEqual(["1.0"]);
    expect(header(c.wheel, "Tag")).toEqual(platform.split(".").map((p) => `py3-none-${p}`));
    expect(header(c.metadata, "Name")).toEqual(["awrepl"]);
    expect(header(c.metadata, "Version")).toEqual([VERSION]);
    expect(header(c.metadata, "Requires-Python")).toEqual([">=3.9"]);
    expect(header(c.metadata, "Requires-Dist")).toEqual([]);
    expect(c.recordBad).toEqual([]);
    expect(c.unlisted).toEqual([]);
    const script = `awrepl-${VERSION}.data/scripts/awrepl`;
    expect(c.entries[script]).toBe(0o755);
    // Only the package, the script and the metadata; the package as python/awrepl has it, no caches.
    const tops = [...new Set(Object.keys(c.entries).map((n) => n.split("/")[0]))].sort();
    expect(tops).toEqual(["awrepl", `awrepl-${VERSION}.data`, `awrepl-${VERSION}.dist-info`]);
    const packaged = Object.keys(c.entries).filter((n) => n.startsWith("awrepl/")).map((n) => n.slice("awrepl/".length)).sort();
    const source = tree(join(ROOT, "python", "awrepl")).filter((n) => !/(^|\/)__pycache__(\/|$)|\.pyc$/.test(n) && statSync(join(ROOT, "python", "awrepl", n)).isFile());
    expect(packaged).toEqual(source);
    for (const needed of ["__init__.py", "__main__.py", "py.typed"]) expect(packaged).toContain(needed);
  });

  for (const [label, python] of interpreters()) {
    describe(`installed with pip into a venv of ${label}`, () => installedTests(python, label === "Debian's python3"));
  }

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });
});

/** Debian's python3, then pyenv's 3.9 and 3.13 where they are installed. */
function interpreters(): [string, string][] {
  const list: [string, string][] = [["Debian's python3", SYSTEM_PYTHON]];
  const pyenv = join(process.env.PYENV_ROOT ?? join(homedir(), ".pyenv"), "versions");
  for (const minor of ["3.9", "3.13"]) {
    const version = existsSync(pyenv) ? readdirSync(pyenv).filter((v) => v.startsWith(`${minor}.`)).sort().at(-1) : undefined;
    const python = version ? join(pyenv, version, "bin", "python3") : "";
    if (python && existsSync(python)) list.push([`Python ${version}`, python]);
    else console.warn(`wheel.test.ts: no pyenv Python ${minor} here: its venv tests are not run`);
  }
  return list;
}

function installedTests(basePython: string, full: boolean): void {
  let venv: string;
  let project: string;
  let before: string[];
  const bin = (name: string) => join(venv, "bin", name);

  /** The environment of everything run in the venv: its PATH, its own AWREPL_HOME, nothing of ours. */
  const envFor = (home: string): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!/^(PIP_|AWREPL_|PYTHON|VIRTUAL_ENV$|npm_)/i.test(k)) env[k] = v;
    const refuse = "http://127.0.0.1:9";
    return {
      ...env,
      PATH: `${join(venv, "bin")}:/usr/bin:/bin`,
      HOME: join(work, "home"),
      AWREPL_HOME: home,
      AWREPL_E2E_HOME: home,
      NO_COLOR: "1",
      PIP_CONFIG_FILE: devNull,
      PIP_NO_INDEX: "1",
      PIP_DISABLE_PIP_VERSION_CHECK: "1",
      PIP_NO_CACHE_DIR: "1",
      HTTPS_PROXY: refuse,
      https_proxy: refuse,
      HTTP_PROXY: refuse,
      http_proxy: refuse,
    };
  };

  /** Runs `argv` in the venv's environment with a fresh AWREPL_HOME, stopping its supervisor after. */
  const inVenv = async (argv: string[], timeoutMs = 120_000): Promise<Done> => {
    const home = makeHome();
    try {
      const r = await exec(argv[0] as string, argv.slice(1), { env: envFor(home), cwd: project, timeoutMs });
      // A failure shows the supervisor's log too (the home is removed after this).
      const log = join(home, "supervisor.log");
      if (r.code !== 0 && existsSync(log)) r.stderr += `\n--- ${log}:\n${readFileSync(log, "utf8").slice(-4000)}`;
      return r;
    } finally {
      await cleanupHome(home);
    }
  };

  beforeAll(async () => {
    venv = mkdtempSync(join(work, "venv-"));
    project = mkdtempSync(join(work, "project-"));
    mkdirSync(join(work, "home"), { recursive: true });
    expectOk(`${basePython} -m venv`, await exec(basePython, ["-m", "venv", venv], { env: envFor(work), timeoutMs: 180_000 }));
    before = tree(venv);
    expect(before).not.toContain("bin/awrepl");
  }, 240_000);

  test("pip install --no-index puts the executable on the venv's PATH as `awrepl`", async () => {
    const r = expectOk("pip install", await inVenv([bin("python"), "-m", "pip", "install", "--no-index", wheel], 240_000));
    expect(r.stdout).toContain(`Successfully installed awrepl-${VERSION}`);
    expect(statSync(bin("awrepl")).mode & 0o777).toBe(0o755);
    expect(sha256(bin("awrepl"))).toBe(sha256(binary));
    const found = expectOk("command -v awrepl", await inVenv(["/bin/sh", "-c", "command -v awrepl"]));
    expect(found.stdout.trim()).toBe(bin("awrepl"));
    // The tags pip calls compatible with this interpreter and machine include every tag of the wheel.
    if (full) {
      const debug = expectOk("pip debug", await inVenv([bin("python"), "-m", "pip", "debug", "--verbose"]));
      const compatible = new Set([...debug.stdout.matchAll(/^\s+(\S+-\S+-\S+)$/gm)].map((m) => m[1]));
      for (const p of (release.built[0]?.platform as string).split(".")) expect(compatible.has(`py3-none-${p}`)).toBe(true);
    }
  }, 300_000);

  if (full) {
    test("awrepl --self-test passes", async () => {
      const r = expectOk("awrepl --self-test", await inVenv(["awrepl", "--self-test"]));
      expect(r.stdout).toMatch(/SELF-TEST: awrepl ok \((\d+)\/\1\)/);
    }, 180_000);
  }

  test("python -m awrepl --self-test passes", async () => {
    const r = expectOk("python -m awrepl --self-test", await inVenv(["python", "-m", "awrepl", "--self-test"]));
    expect(r.stdout).toMatch(/SELF-TEST: awrepl ok \((\d+)\/\1\)/);
  }, 180_000);

  test("import awrepl loads the installed package, which finds the installed executable", async () => {
    const code = "import awrepl, os, sysconfig; print(os.path.dirname(awrepl.__file__)); print(sysconfig.get_path('purelib'))";
    const r = expectOk("python -c import awrepl", await inVenv(["python", "-c", code]));
    const [pkg, purelib] = r.stdout.trim().split("\n");
    expect(pkg).toBe(join(purelib as string, "awrepl"));
  }, 60_000);

  test("the original README's Python examples run as written", async () => {
    const r = expectOk("original README examples", await inVenv(["python", FIXTURE], 180_000));
    expect(r.stdout.trim().split("\n")).toEqual(["3", "", "original README examples: ok"]);
  }, 240_000);

  if (full) {
    test("this README's Python section runs", async () => {
      const blocks = extractBlocks(readFileSync(join(ROOT, "README.md"), "utf8")).blocks.filter((b) => b.heading === README_SECTION && b.info === "python");
      expect(blocks.length).toBeGreaterThan(0);
      for (const block of blocks) {
        const file = join(project, `readme-${block.line}.py`);
        writeFileSync(file, `${block.body}\n`);
        expectOk(`README.md line ${block.line}`, await inVenv(["python", file], 180_000));
      }
    }, 300_000);
  }

  test("pip uninstall leaves the venv as it was before the install", async () => {
    expectOk("pip uninstall", await inVenv([bin("python"), "-m", "pip", "uninstall", "-y", "awrepl"]));
    expect(existsSync(bin("awrepl"))).toBe(false);
    const after = tree(venv);
    expect({ added: after.filter((p) => !before.includes(p)), removed: before.filter((p) => !after.includes(p)) }).toEqual({ added: [], removed: [] });
  }, 120_000);
}

// The tag derivation on inputs this machine has no executable for: Mach-O headers built here.
describe("wheel platform tags", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "awrepl-wheel-tags-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A thin 64-bit Mach-O header with one LC_BUILD_VERSION (macOS, minos) or LC_VERSION_MIN_MACOSX command. */
  const machO = (name: string, cpu: number, minos: [number, number], legacyCommand = false): string => {
    const cmd = Buffer.alloc(legacyCommand ? 16 : 24);
    const version = (minos[0] << 16) | (minos[1] << 8);
    if (legacyCommand) {
      cmd.writeUInt32LE(0x24, 0);
      cmd.writeUInt32LE(16, 4);
      cmd.writeUInt32LE(version, 8);
    } else {
      cmd.writeUInt32LE(0x32, 0);
      cmd.writeUInt32LE(24, 4);
      cmd.writeUInt32LE(1, 8); // PLATFORM_MACOS
      cmd.writeUInt32LE(version, 12);
    }
    const header = Buffer.alloc(32);
    header.writeUInt32LE(0xfeedfacf, 0);
    header.writeUInt32LE(cpu, 4);
    header.writeUInt32LE(2, 12); // MH_EXECUTE
    header.writeUInt32LE(1, 16);
    header.writeUInt32LE(cmd.length, 20);
    const path = join(dir, name);
    writeFileSync(path, Buffer.concat([header, cmd]));
    return path;
  };

  test("macOS: the minimum OS the Mach-O records, for its CPU", () => {
    expect(wheelPlatformTag("bun-darwin-arm64", machO("arm", 0x0100000c, [11, 0]))).toBe("macosx_11_0_arm64");
    expect(wheelPlatformTag("bun-darwin-x64", machO("x64", 0x01000007, [10, 13]))).toBe("macosx_10_13_x86_64");
    expect(readMachOMinimum(machO("legacy", 0x01000007, [10, 9], true), "x86_64")).toEqual([10, 9]);
    // From 11 on pip only knows <major>_0: an x.y minimum rounds up, never claiming an older OS.
    expect(macosTagFor([13, 1], "arm64")).toBe("macosx_14_0_arm64");
    expect(() => wheelPlatformTag("bun-darwin-arm64", machO("wrong-cpu", 0x01000007, [11, 0]))).toThrow(/not arm64/);
  });

  /** The first bytes of a PE image for x86-64: an MZ header pointing at a PE signature and machine. */
  const pe = (name: string): string => {
    const image = Buffer.alloc(0x80 + 6);
    image.write("MZ", 0, "latin1");
    image.writeUInt32LE(0x80, 0x3c);
    image.write("PE\0\0", 0x80, "latin1");
    image.writeUInt16LE(0x8664, 0x84);
    const path = join(dir, name);
    writeFileSync(path, image);
    return path;
  };

  // The release step's wheel for a macOS and the Windows target, from stand-ins carrying only the
  // headers their tags are read from: the tag, the script's name and mode.
  test.skipIf(venvMissing)("the macOS and Windows wheels: their tag and script", () => {
    const out = join(dir, "wheels");
    const targets = { mac: RELEASE_TARGETS.find((t) => t.target === "bun-darwin-arm64"), win: RELEASE_TARGETS.find((t) => t.target === "bun-windows-x64") };
    const mac = buildWheel({ target: targets.mac as Target, executable: machO("mac-exe", 0x0100000c, [13, 0]), outDir: out, python: SYSTEM_PYTHON });
    const win = buildWheel({ target: targets.win as Target, executable: pe("win-exe"), outDir: out, python: SYSTEM_PYTHON });
    expect(mac.wheel).toBe(join(out, wheelName(VERSION, "macosx_13_0_arm64")));
    expect(win.wheel).toBe(join(out, wheelName(VERSION, "win_amd64")));
    for (const [w, script] of [[mac.wheel, "awrepl"], [win.wheel, "awrepl.exe"]] as const) {
      const c = JSON.parse(expectOk("reading the wheel", execSync(SYSTEM_PYTHON, ["-c", READ_WHEEL, w])).stdout) as WheelContents;
      expect(Object.keys(c.entries).filter((n) => n.includes(".data/"))).toEqual([`awrepl-${VERSION}.data/scripts/${script}`]);
      expect(c.entries[`awrepl-${VERSION}.data/scripts/${script}`]).toBe(0o755);
      expect(c.wheel.filter(([k]) => k === "Tag").map(([, v]) => v)).toEqual([`py3-none-${w === mac.wheel ? "macosx_13_0_arm64" : "win_amd64"}`]);
      expect(c.recordBad).toEqual([]);
    }
  }, 120_000);

  test("a Python that cannot build wheels is refused, naming it and what it lacks", () => {
    expect(() => resolveWheelPython("/nonexistent/python3")).toThrow("no Python to build the wheels with: /nonexistent/python3 cannot be run (ENOENT)");
    const bare = join(dir, "python-without-wheel");
    writeFileSync(bare, `#!/bin/sh\nexec ${SYSTEM_PYTHON} -I -c 'import sys; sys.modules["wheel"] = None; exec(sys.argv[1])' "$2"\n`, { mode: 0o755 });
    expect(() => resolveWheelPython(bare)).toThrow(`${bare} lacks wheel`);
  });

  test("an executable of the wrong format names the file and what it is not", () => {
    const script = join(dir, "stand-in");
    writeFileSync(script, "#!/bin/sh\necho hi\n" + " ".repeat(64));
    expect(() => wheelPlatformTag("bun-linux-x64", script)).toThrow(`${script} is not an ELF executable`);
    expect(() => wheelPlatformTag("bun-darwin-x64", script)).toThrow(`${script} is not a thin 64-bit Mach-O executable`);
    expect(() => wheelPlatformTag("bun-windows-x64", script)).toThrow(`${script} is not a Windows executable`);
    expect(() => wheelPlatformTag("bun-plan9-x64", script)).toThrow("no wheel platform tag is known for the release target bun-plan9-x64");
  });

  test.skipIf(process.platform !== "linux" || process.arch !== "x64")("linux: an ELF for another machine is refused", async () => {
    // The x86-64 executable under the arm64 target's name.
    const exe = await awreplBinary();
    expect(() => wheelPlatformTag("bun-linux-arm64", exe)).toThrow(`${exe} is an ELF for machine 62, not aarch64 (183)`);
  }, 300_000);
});
