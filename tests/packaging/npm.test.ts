// The npm packages (scripts/npm-packages.ts), packed with `npm pack` and installed the way users install
// them: from a registry (tests/packaging/registry.ts: a local one on 127.0.0.1 that serves these
// tarballs, stand-ins for the other platforms' packages and jsonc-parser packed from node_modules, and
// refuses everything else) into temporary projects: npm install, npx, npm install -g, and the library
// under Node, Bun and Deno (from node_modules and as npm:awrepl). Nothing reaches the internet: every
// child gets a proxy that refuses at once (NO_PROXY lets 127.0.0.1 through), a private npm cache and
// DENO_DIR, and the test checks that the registry was asked for nothing it does not serve. The
// packages are made from a test release (tests/packaging/release.ts: the real executable of
// `npm run build` for this platform), as the release step makes them from dist/release/.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RELEASE_TARGETS } from "../../scripts/build.ts";
import { alive, awreplBinary, cleanupHome, PYTHON, ROOT, waitFor } from "../harness/mod.ts";
import { npmPack, type Registry, standInPlatformPackages, startRegistry } from "./registry.ts";
import { makeTestRelease, NATIVE_FILE } from "./release.ts";

const VERSION: string = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version;
const NATIVE = `${process.platform}-${process.arch}`;
const PLATFORMS = RELEASE_TARGETS.map((t) => `${t.npm.os}-${t.npm.cpu}`);
const BUN = join(ROOT, "node_modules", ".bin", "bun");
const DENO = join(ROOT, "node_modules", ".bin", "deno");
const SMOKE = join(ROOT, "tests", "packaging", "smoke.mjs");

let work: string;
let registry: Registry;
let tarballs: { top: string; platform: string };
let project: string; // npm install awrepl
let bare: string; // npm install --omit=optional awrepl

type Result = { code: number | null; signal: string | null; stdout: string; stderr: string };
type RunOptions = { cwd?: string; env?: Record<string, string>; detached?: boolean; timeoutMs?: number; onStdout?: (text: string, pid: number) => void };

/**
 * The environment of every child: no npm_* variables of the `npm test` running us, a private npm
 * cache and user config, a private DENO_DIR, no update checks, and a proxy that refuses everything
 * but 127.0.0.1.
 */
function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^npm_/i.test(k) && !/^AWREPL_/.test(k)) env[k] = v;
  const refuse = "http://127.0.0.1:9";
  return {
    ...env,
    npm_config_registry: registry.url,
    NPM_CONFIG_REGISTRY: registry.url, // Deno reads this one
    npm_config_cache: join(work, "npm-cache"),
    npm_config_userconfig: join(work, "npmrc"),
    npm_config_update_notifier: "false",
    npm_config_audit: "false",
    npm_config_fund: "false",
    DENO_DIR: join(work, "deno-dir"),
    DENO_NO_UPDATE_CHECK: "1",
    DENO_NO_PROMPT: "1",
    HTTPS_PROXY: refuse,
    https_proxy: refuse,
    HTTP_PROXY: refuse,
    http_proxy: refuse,
    NO_PROXY: "127.0.0.1,localhost",
    no_proxy: "127.0.0.1,localhost",
    AWREPL_PYTHON: PYTHON,
    ...extra,
  };
}

/** Runs a command without blocking this process (the registry answers from it). */
function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<Result> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? work, env: childEnv(opts.env), detached: opts.detached, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 120_000);
    child.stdout.on("data", (d) => {
      stdout += d;
      opts.onStdout?.(stdout, child.pid as number);
    });
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

/** A PATH with no node on it (nor anything else): after the relink a call needs only /bin/sh's builtins. */
const NO_NODE_PATH = "/nonexistent";

/** A new project with awrepl installed from the registry: node_modules/.bin/awrepl as npm links it. */
async function installedProject(name: string): Promise<string> {
  const dir = newProject(name);
  const r = await run("npm", ["install", "--prefer-offline", "awrepl"], { cwd: dir });
  if (r.code !== 0) throw new Error(`npm install in ${dir} failed: ${r.stderr}`);
  return dir;
}

function newProject(name: string): string {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `test-${name}`, version: "1.0.0", private: true }));
  return dir;
}

/** A private state directory, removed afterwards with proof that no process of it is left. */
async function withHome<T>(fn: (home: string) => Promise<T>): Promise<T> {
  const home = mkdtempSync(join(work, "home-"));
  try {
    return await fn(home);
  } finally {
    await cleanupHome(home);
  }
}

const listTarball = (tgz: string) => Bun.spawnSync(["tar", "-tzf", tgz]).stdout.toString().trim().split("\n").map((l) => l.replace(/^package\//, "")).sort();

beforeAll(async () => {
  if (!NATIVE_FILE) return;
  work = mkdtempSync(join(tmpdir(), "awrepl-npm-test-"));
  const release = await makeTestRelease(join(work, "release"));
  const out = join(work, "npm");
  const made = Bun.spawnSync([BUN, join(ROOT, "scripts", "npm-packages.ts"), "--pack", `--only=${NATIVE}`, `--release=${release}`, `--out=${out}`], { cwd: ROOT });
  if (made.exitCode !== 0) throw new Error(`npm-packages failed: ${made.stderr}`);
  rmSync(release, { recursive: true, force: true });
  tarballs = { top: join(out, `awrepl-${VERSION}.tgz`), platform: join(out, `awrepl-${NATIVE}-${VERSION}.tgz`) };
  const extra = join(work, "extra");
  mkdirSync(extra);
  // The package's own dependencies, if any, packed from this checkout's node_modules.
  const deps = Object.keys((JSON.parse(readFileSync(join(out, "awrepl", "package.json"), "utf8")) as { dependencies?: object }).dependencies ?? {});
  registry = startRegistry([
    tarballs.top,
    tarballs.platform,
    ...standInPlatformPackages(extra, VERSION, NATIVE),
    ...deps.map((d) => npmPack(join(ROOT, "node_modules", d), extra)),
  ]);
  writeFileSync(join(work, "npmrc"), "");
  project = newProject("project");
  const install = await run("npm", ["install", "awrepl"], { cwd: project });
  if (install.code !== 0) throw new Error(`npm install failed: ${install.stderr}`);
  bare = newProject("bare");
  const omit = await run("npm", ["install", "--omit=optional", "awrepl"], { cwd: bare });
  if (omit.code !== 0) throw new Error(`npm install --omit=optional failed: ${omit.stderr}`);
}, 300_000);

afterAll(() => {
  registry?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe.skipIf(!NATIVE_FILE)("npm packages", () => {
  test("npm pack: awrepl holds the launcher and the library, not the CLI or tests; the platform package holds the executable", () => {
    const top = listTarball(tarballs.top);
    for (
      const f of ["package.json", "README.md", "bin/awrepl", "bin/package.json", "dist/lib/mod.js", "dist/lib/runtime.py", "dist/types/lib/mod.d.ts", "lib/mod.ts", "runtime.py", "lib/client/start.ts"]
    ) {
      expect(top).toContain(f);
    }
    expect(top.filter((f) => f.startsWith("lib/cli/") || f.endsWith(".test.ts") || f.startsWith("tests/") || f === "main.ts")).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(project, "node_modules", "awrepl", "package.json"), "utf8"));
    expect(manifest.optionalDependencies).toEqual(Object.fromEntries(PLATFORMS.map((p) => [`@awrepl/${p}`, VERSION])));
    // Only what the library imports (Bun's run of the sources below proves nothing is missing):
    // commander is the CLI's, inside the executable.
    expect(Object.keys(manifest.dependencies ?? {})).not.toContain("commander");
    expect(manifest.scripts).toBeUndefined(); // no install scripts
    expect(listTarball(tarballs.platform)).toEqual(["README.md", "bin/awrepl", "package.json"]);
    const platform = JSON.parse(readFileSync(join(project, "node_modules", "@awrepl", NATIVE, "package.json"), "utf8"));
    expect([platform.os, platform.cpu]).toEqual([[process.platform], [process.arch]]);
  });

  test("npm install awrepl installs this platform's package and no other, and asks the registry for nothing else", () => {
    expect(existsSync(join(project, "node_modules", "@awrepl", NATIVE, "bin", "awrepl"))).toBe(true);
    for (const other of PLATFORMS.filter((p) => p !== NATIVE)) {
      expect(existsSync(join(project, "node_modules", "@awrepl", other))).toBe(false);
      expect(registry.requests.filter((r) => r.includes(`/@awrepl/${other}/-/`))).toEqual([]);
    }
    expect(registry.refused).toEqual([]);
  });

  test("npx awrepl --self-test passes; afterwards node_modules/.bin/awrepl runs the executable without Node", async () => {
    await withHome(async (home) => {
      const r = await run("npx", ["awrepl", "--self-test"], { cwd: project, env: { AWREPL_HOME: home } });
      expect(r.stdout).toContain("SELF-TEST: awrepl ok");
      expect(r.code).toBe(0);
    });
    // npx ran it through node_modules/.bin/awrepl, which now points at bin/awrepl-direct (a /bin/sh
    // script that execs the executable, and JavaScript that runs the launcher when Node reads it); the
    // package's own bin/awrepl stays the JavaScript launcher (for pnpm's shims, yarn 2+, Windows).
    const link = join(project, "node_modules", ".bin", "awrepl");
    expect(readlinkSync(link)).toBe(join("..", "awrepl", "bin", "awrepl-direct"));
    expect(lstatSync(join(project, "node_modules", "awrepl", "bin", "awrepl")).isFile()).toBe(true);
    expect(readFileSync(join(project, "node_modules", "awrepl", "bin", "awrepl"), "utf8")).toStartWith("#!/usr/bin/env node");
    const v = await run(link, ["--version"], { env: { PATH: NO_NODE_PATH } }); // no node to run a launcher
    expect(v.stderr).toBe("");
    expect(v.stdout.trim()).toBe(VERSION);
    expect(v.code).toBe(0);
    expect(registry.refused).toEqual([]);
  }, 120_000);

  test("8 parallel first runs right after npm install, 5 times: every one runs (none gets a link re-pointed under it)", async () => {
    // The kernel picks node from the launcher's #! line, then node opens the link's path again: a run
    // that another run's relink overtook between the two used to load the executable as JavaScript
    // (SyntaxError, exit 1: 9 of 40).
    const failures: string[] = [];
    const ends: { direct: boolean; bin: string[]; package: string[] }[] = [];
    await withHome(async (home) => {
      for (let round = 0; round < 5; round++) {
        const dir = await installedProject(`parallel-${round}`);
        const link = join(dir, "node_modules", ".bin", "awrepl");
        expect(realpathSync(link)).toBe(realpathSync(join(dir, "node_modules", "awrepl", "bin", "awrepl"))); // a first run
        const runs = await Promise.all(Array.from({ length: 8 }, () => run(link, ["--version"], { env: { AWREPL_HOME: home }, timeoutMs: 60_000 })));
        for (const [i, r] of runs.entries()) {
          if (r.code !== 0 || r.stdout.trim() !== VERSION || r.stderr !== "") {
            failures.push(`round ${round} run ${i}: exit ${r.code} ${r.signal ?? ""}, stdout ${JSON.stringify(r.stdout)}, stderr ${JSON.stringify(r.stderr.slice(0, 300))}`);
          }
        }
        // And the relink they raced to do happened: the next call needs no Node; no temporary file is left.
        const after = await run(link, ["--version"], { env: { AWREPL_HOME: home, PATH: NO_NODE_PATH } });
        ends.push({
          direct: after.stdout.trim() === VERSION,
          bin: readdirSync(join(dir, "node_modules", ".bin")).sort(),
          package: readdirSync(join(dir, "node_modules", "awrepl", "bin")).sort(),
        });
        rmSync(dir, { recursive: true, force: true });
      }
    });
    expect(failures).toEqual([]);
    expect(ends).toEqual(Array(5).fill({ direct: true, bin: ["awrepl"], package: ["awrepl", "awrepl-direct", "package.json"] }));
  }, 300_000);

  test("Node reading the re-pointed link (what the loser of that race does) runs the launcher", async () => {
    const dir = await installedProject("node-reads-link");
    const link = join(dir, "node_modules", ".bin", "awrepl");
    await withHome(async (home) => {
      expect((await run(link, ["--version"], { env: { AWREPL_HOME: home } })).code).toBe(0); // the relink
      expect(readlinkSync(link)).toBe(join("..", "awrepl", "bin", "awrepl-direct"));
      const r = await run("node", [link, "--version"], { env: { AWREPL_HOME: home } });
      expect(r.stderr).toBe("");
      expect(r.stdout.trim()).toBe(VERSION);
      expect(r.code).toBe(0);
    });
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  test("after the relink: a removed platform package is explained; a moved project still runs and is relinked", async () => {
    const dir = await installedProject("relinked");
    const link = join(dir, "node_modules", ".bin", "awrepl");
    await withHome(async (home) => {
      expect((await run(link, ["--version"], { env: { AWREPL_HOME: home } })).code).toBe(0); // the relink
      // Moved: the direct script's executable path is stale, so the launcher runs it and points it anew.
      const moved = `${dir}-moved`;
      renameSync(dir, moved);
      const movedLink = join(moved, "node_modules", ".bin", "awrepl");
      const m = await run(movedLink, ["--version"], { env: { AWREPL_HOME: home } });
      expect(m.stderr).toBe("");
      expect(m.stdout.trim()).toBe(VERSION);
      expect(m.code).toBe(0);
      expect(readFileSync(join(moved, "node_modules", "awrepl", "bin", "awrepl-direct"), "utf8")).toContain(join(moved, "node_modules", "@awrepl", NATIVE, "bin", "awrepl"));
      expect((await run(movedLink, ["--version"], { env: { AWREPL_HOME: home, PATH: NO_NODE_PATH } })).stdout.trim()).toBe(VERSION);
      // The platform package removed: the launcher's explanation, not a bare "No such file or directory".
      rmSync(join(moved, "node_modules", "@awrepl", NATIVE), { recursive: true, force: true });
      const r = await run(movedLink, ["--version"], { env: { AWREPL_HOME: home } });
      expect(r.stderr).toContain(`the package @awrepl/${NATIVE}, which holds the awrepl executable for ${NATIVE}, is not installed`);
      expect(r.code).toBe(125);
      // Without node on PATH there is no launcher to ask: the script names what is missing itself.
      const bare = await run(movedLink, ["--version"], { env: { AWREPL_HOME: home, PATH: NO_NODE_PATH } });
      expect(bare.stderr).toContain(`awrepl: ${join(moved, "node_modules", "@awrepl", NATIVE, "bin", "awrepl")} is missing`);
      expect(bare.stderr).toContain("npm install");
      expect(bare.code).toBe(125);
      rmSync(moved, { recursive: true, force: true });
    });
  }, 120_000);

  test("npm install -g: the global command runs the executable; npm uninstall -g removes it", async () => {
    const prefix = join(work, "global");
    const g = await run("npm", ["install", "-g", "--prefix", prefix, "awrepl"]);
    expect(g.stderr).not.toContain("ERR");
    expect(g.code).toBe(0);
    const bin = join(prefix, "bin", "awrepl");
    const first = await run(bin, ["--version"]);
    expect(first.stdout.trim()).toBe(VERSION);
    // The first run re-pointed the global command at the script that runs the executable directly,
    // inside the package (so npm still owns the link: uninstall removes it, an upgrade may replace it).
    expect(realpathSync(bin)).toBe(realpathSync(join(prefix, "lib", "node_modules", "awrepl", "bin", "awrepl-direct")));
    expect((await run(bin, ["--version"], { env: { PATH: NO_NODE_PATH } })).stdout.trim()).toBe(VERSION);
    const again = await run("npm", ["install", "-g", "--prefix", prefix, "awrepl"]); // over the re-pointed link
    expect(again.stderr).not.toContain("EEXIST");
    expect(again.code).toBe(0);
    const u = await run("npm", ["uninstall", "-g", "--prefix", prefix, "awrepl"]);
    expect(u.code).toBe(0);
    expect(existsSync(bin)).toBe(false);
    rmSync(prefix, { recursive: true, force: true });
  }, 120_000);

  for (const runtime of ["node", "bun", "deno"] as const) {
    test(`the library under ${runtime}: ReplSession, SessionPool and attach run cells`, async () => {
      copyFileSync(SMOKE, join(project, "smoke.mjs")); // "awrepl" resolves from the script's directory
      const cmd = { node: ["node"], bun: [BUN], deno: [DENO, "run", "-A"] }[runtime];
      const r = await withHome((home) => run(cmd[0] as string, [...cmd.slice(1), "smoke.mjs"], { cwd: project, env: { AWREPL_HOME: home } }));
      expect(r.stderr).not.toContain("Error");
      const report = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}");
      expect(report.failures).toBeUndefined();
      expect(report.ok).toBe(true);
      expect(report.daemonStopped).toBe(true); // attach started a supervisor: the platform package's executable
      // Bun runs the TypeScript sources (the "bun" condition); Node and Deno the JavaScript build.
      const entry = runtime === "bun" ? "node_modules/awrepl/lib/mod.ts" : "node_modules/awrepl/dist/lib/mod.js";
      expect(report.resolved).toEndWith(entry);
      expect(r.code).toBe(0);
    }, 120_000);
  }

  test("the library under Deno as npm:awrepl (Deno's own npm cache, from the registry), with the README's permissions", async () => {
    const dir = join(work, "deno-npm"); // no package.json here: Deno resolves npm: itself
    mkdirSync(dir, { recursive: true });
    copyFileSync(SMOKE, join(dir, "smoke.mjs"));
    // The permissions the README lists, not -A.
    const allow = ["--allow-read", "--allow-write", "--allow-run", "--allow-env", "--allow-net", "--allow-sys"];
    // --no-config, --no-lock: a deno.json in a directory above (/tmp/deno.json, left by anyone) would
    // otherwise be this script's config, and its deno.lock pin tarball URLs of an earlier run's registry.
    const r = await withHome((home) => run(DENO, ["run", "--no-config", "--no-lock", ...allow, "smoke.mjs"], { cwd: dir, env: { AWREPL_HOME: home, AWREPL_SMOKE_ENTRY: `npm:awrepl@${VERSION}` } }));
    const report = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}");
    expect(report.failures).toBeUndefined();
    expect(report.ok).toBe(true);
    expect(report.resolved).toContain("awrepl");
    expect(r.code).toBe(0);
    expect(registry.refused).toEqual([]);
  }, 120_000);

  test("a TypeScript consumer type-checks against the package's declarations (nodenext, strict, lib check on)", async () => {
    writeFileSync(
      join(project, "check.mts"),
      [
        `import { ReplSession, SessionPool, attach, type ExecResult } from "awrepl";`,
        `const s = await ReplSession.start("t", { timeoutMs: 1000 });`,
        `const r: ExecResult = await s.execute("1");`,
        `const value: string | null = r.value;`,
        `// @ts-expect-error -- not an option`,
        `await ReplSession.start("t", { timeoutMillis: 1 });`,
        `console.log(value, await attach("t"), new SessionPool());`,
      ].join("\n"),
    );
    const tsc = await run(join(ROOT, "node_modules", ".bin", "tsc"), [
      "--noEmit",
      "--strict",
      "--module",
      "nodenext",
      "--moduleResolution",
      "nodenext",
      "--target",
      "es2022",
      "--types",
      "node",
      "--typeRoots",
      join(ROOT, "node_modules", "@types"),
      "check.mts",
    ], { cwd: project });
    expect(tsc.stdout + tsc.stderr).toBe("");
    expect(tsc.code).toBe(0);
  }, 120_000);

  test("without the platform package: the launcher and the library name what is missing; AWREPL_BIN stands in", async () => {
    const launcher = join(bare, "node_modules", "awrepl", "bin", "awrepl");
    const r = await run("node", [launcher, "--version"]);
    expect(r.code).toBe(125);
    expect(r.stderr).toContain(`the package @awrepl/${NATIVE}, which holds the awrepl executable for ${NATIVE}, is not installed`);
    expect(r.stderr).toContain("--omit=optional");
    const riscv = join(work, "riscv.cjs");
    writeFileSync(riscv, `Object.defineProperty(process, "arch", { value: "riscv64" });\n`);
    const u = await run("node", ["-r", riscv, launcher, "--version"]);
    expect(u.code).toBe(125);
    expect(u.stderr).toContain(`there is no awrepl executable for ${process.platform}-riscv64 (there is one for ${PLATFORMS.join(", ")})`);
    // The library: attach needs an executable for the supervisor.
    const script = `import { attach } from "awrepl";\nconst s = await attach("t", { home: process.env.AWREPL_HOME });\nconsole.log((await s.execute("6 * 7")).value);\nawait s.close();\n`;
    writeFileSync(join(bare, "attach.mjs"), script);
    await withHome(async (home) => {
      const missing = await run("node", ["attach.mjs"], { cwd: bare, env: { AWREPL_HOME: home } });
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain(`install @awrepl/${NATIVE}`);
      expect(missing.stderr).toContain("AWREPL_BIN");
      const withBin = await run("node", ["attach.mjs"], { cwd: bare, env: { AWREPL_HOME: home, AWREPL_BIN: await awreplBinary() } });
      expect(withBin.stdout.trim()).toBe("42");
      expect(withBin.code).toBe(0);
    });
  }, 120_000);

  test("Ctrl-C through the launcher (SIGINT to the foreground group) interrupts the cell, and nothing outlives it", async () => {
    await withHome(async (home) => {
      let pid = 0;
      let sent = false;
      const launcher = join(project, "node_modules", "awrepl", "bin", "awrepl"); // by path: it stays a launcher
      const r = await run("node", [launcher, "-s", "sig", "run", "import time\nprint('started', flush=True)\ntime.sleep(60)"], {
        detached: true,
        env: { AWREPL_HOME: home },
        timeoutMs: 60_000,
        onStdout: (text, p) => {
          pid = p;
          if (!sent && text.includes("started")) {
            sent = true;
            process.kill(-p, "SIGINT");
          }
        },
      });
      expect(sent).toBe(true);
      expect(r.stderr).toContain("KeyboardInterrupt");
      expect(r.code).toBe(130);
      // The launcher's whole process group is gone (the client with it), not only the launcher.
      await waitFor(() => !alive(-pid), 5_000, "the launcher's process group to end");
    });
  }, 90_000);
});
