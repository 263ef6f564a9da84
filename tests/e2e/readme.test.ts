// The README's examples, run as written (issue 21, items 11 and 13). Every fenced block of README.md is
// extracted at test time and classified (tests/e2e/readme_blocks.ts says how, and the markers a block
// may carry): a block is run, or marked not-run with a reason, and the first test fails on any block
// that is neither, so a new example cannot slip by unrun.
//
// - Shell blocks and `$ ` transcripts run in bash against the compiled binary: `awrepl` on PATH is
//   dist/awrepl (and `python3` the test's interpreter), with a private HOME=<tmp>/home, AWREPL_HOME its
//   ~/.local/state/awrepl, and the working directory <tmp>/project holding the files of examples/. The
//   blocks under one heading share that place (and its supervisor), in README order, as a reader
//   following that section would. A plain block runs with `set -e` (every command must succeed); a
//   transcript's shown output is compared with what its commands print (stdout and stderr together, as
//   a terminal shows them, <tmp> written as /tmp/readme, the block's placeholders applied).
// - The completion install lines run one by one, each on a fresh empty HOME, under sh and under the
//   shell they install for; then the file they wrote is loaded into that shell.
// - The TypeScript block runs under Node (after TypeScript's transpileModule strips its types: Node 20
//   runs no TypeScript), Bun and Deno, and is type-checked by tsc. `awrepl` resolves through a temporary
//   node_modules/awrepl shaped like the npm package: its "bun" export is this checkout's lib/mod.ts (a
//   symbolic link to lib/), its default export a bundle of lib/mod.ts made for this test as
//   `npm run build:lib` makes dist/lib/mod.js (with runtime.py beside it), so the shared dist/ is not
//   touched. attach() finds dist/awrepl through AWREPL_BIN.
// - Blocks marked not-run that are configuration files (JSON, TOML, YAML) are still parsed.
// No process is left behind: each place's supervisor is stopped, and a process still carrying its
// AWREPL_HOME or HOME, or working in one of its directories, fails the test; temporary directories are
// removed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import ts from "typescript";
import { awreplBinary, bwrapAvailable, cleanupHome, isLive, killPids, listProcs, makeHome, type Proc, PYTHON, pythonHas, ROOT, testEnv, waitForNone, withAnyEnv } from "../harness/mod.ts";
import { type Block, type Classified, classify, compareOutput, extractBlocks, type Options, parseTranscript } from "./readme_blocks.ts";

const README = readFileSync(join(ROOT, "README.md"), "utf8");
const EXAMPLES = join(ROOT, "examples");
const BUN = join(ROOT, "node_modules", ".bin", "bun");
const DENO = join(ROOT, "node_modules", ".bin", "deno");
const TSC = join(ROOT, "node_modules", ".bin", "tsc");
/** What the README's shown paths use for the temporary directory of a section. */
const SHOWN_ROOT = "/tmp/readme";

const { blocks, strayMarkers } = extractBlocks(README);
const classified: Classified[] = [];
const unclassified: string[] = [];
for (const block of blocks) {
  try {
    classified.push(classify(block));
  } catch (err) {
    unclassified.push((err as Error).message);
  }
}
const runnable = classified.filter((c): c is Extract<Classified, { run: true }> => c.run);
const where = (b: Block) => `README.md line ${b.line}`;

type Done = { code: number | null; signal: string | null; stdout: string; stderr: string; timedOut: boolean };

/** Runs a command in its own process group, killed whole (SIGKILL) if it outlives `timeoutMs`. */
function exec(argv: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<Done> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(argv[0] as string, argv.slice(1), { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-(child.pid as number), "SIGKILL");
      } catch {
        // Gone already.
      }
    }, opts.timeoutMs);
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    const finish = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      clearTimeout(grace);
      resolvePromise({ code, signal, stdout, stderr, timedOut });
    };
    // A process left running in the background holds the pipes open after the command exits: stop
    // reading 5 s after the exit, so the leftover check finds it rather than the timeout.
    let grace: ReturnType<typeof setTimeout> | undefined;
    child.on("exit", (code, signal) => {
      grace = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        finish(code, signal);
      }, 5_000);
    });
    child.on("close", finish);
  });
}

function describeRun(what: string, r: Done): string {
  return `${what}: ${r.timedOut ? "timed out" : `exit ${r.code ?? r.signal}`}\n--- stdout:\n${r.stdout}\n--- stderr:\n${r.stderr}`;
}

/** Live processes (this one aside) whose working directory is inside `dir`. */
function workingIn(dir: string, procs = listProcs()): Proc[] {
  const cwdOf = (pid: number) => {
    try {
      return readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      return "";
    }
  };
  return procs.filter((p) => p.pid !== process.pid && isLive(p) && `${cwdOf(p.pid)}/`.startsWith(`${dir}/`));
}

/** Fails with a block's requirement that this machine lacks (CI installs them all): never a skip. */
function requireNeeds(options: Options, block: Block): void {
  for (const need of options.needs) {
    if (need === "bwrap") {
      const check = bwrapAvailable();
      if (!check.ok) throw new Error(`${where(block)} needs a working bubblewrap: ${check.reason}`);
    } else if (!pythonHas(need)) {
      throw new Error(`${where(block)} needs the Python module ${need} in ${PYTHON} (.ci/run installs it)`);
    }
  }
}

/**
 * A section's place: <root>/bin (awrepl, python3), HOME=<root>/home, AWREPL_HOME=<home>/.local/state/awrepl,
 * the working directory <root>/project with the files of examples/.
 */
class Place {
  readonly root = mkdtempSync(join(tmpdir(), "awrepl-readme-"));
  readonly home = join(this.root, "home");
  readonly state = join(this.home, ".local", "state", "awrepl");
  readonly cwd = join(this.root, "project");
  readonly bin = join(this.root, "bin");
  env: NodeJS.ProcessEnv = {};

  async init(): Promise<void> {
    mkdirSync(dirname(this.state), { recursive: true });
    mkdirSync(this.state, { mode: 0o700 });
    chmodSync(this.state, 0o700);
    mkdirSync(this.cwd);
    mkdirSync(this.bin);
    mkdirSync(join(this.root, "scripts"));
    symlinkSync(await awreplBinary(), join(this.bin, "awrepl"));
    symlinkSync(PYTHON, join(this.bin, "python3"));
    for (const name of readdirSync(EXAMPLES)) {
      if (statSync(join(EXAMPLES, name)).isFile()) copyFileSync(join(EXAMPLES, name), join(this.cwd, name));
    }
    this.env = this.envFor(this.home);
  }

  /** The environment of a command here, with HOME set to `home`. */
  envFor(home: string): NodeJS.ProcessEnv {
    return testEnv(this.state, {
      HOME: home,
      PATH: `${this.bin}:${process.env.PATH ?? "/usr/bin:/bin"}`,
      BASH_ENV: undefined,
      ENV: undefined,
      XDG_CONFIG_HOME: undefined,
      XDG_DATA_HOME: undefined,
      XDG_STATE_HOME: undefined,
      XDG_CACHE_HOME: undefined,
      ZDOTDIR: undefined,
    });
  }

  /** What a command printed, with this place's directory written as the README shows it. */
  shown(text: string): string {
    return text.replaceAll(this.root, SHOWN_ROOT);
  }

  /** Runs a bash script file in the project directory. */
  async bash(name: string, script: string, timeoutMs = 90_000): Promise<Done> {
    const file = join(this.root, "scripts", name);
    writeFileSync(file, script);
    return exec(["bash", "--norc", "--noprofile", file], { cwd: this.cwd, env: this.env, timeoutMs });
  }

  async setup(options: Options, block: Block): Promise<void> {
    for (const cmd of options.setup) {
      const r = await exec(["bash", "--norc", "--noprofile", "-c", cmd], { cwd: this.cwd, env: this.env, timeoutMs: 30_000 });
      if (r.code !== 0) throw new Error(describeRun(`${where(block)}: setup ${cmd}`, r));
    }
  }

  /** Stops the supervisor, proves no process of this place is left, removes the directory. */
  async cleanup(): Promise<void> {
    try {
      await cleanupHome(this.state);
    } finally {
      // Everything carrying this place's HOME or AWREPL_HOME, or working in one of its directories (the
      // fresh homes of the completion lines, a sandboxed worker that lost its environment).
      const mine = () => {
        const procs = listProcs();
        const found = new Map(withAnyEnv([["HOME", this.home], ["AWREPL_HOME", this.state]], procs).map((p) => [p.pid, p]));
        for (const p of workingIn(this.root, procs)) found.set(p.pid, p);
        return [...found.values()];
      };
      const left = await waitForNone(mine, 5_000);
      killPids(left.map((p) => p.pid));
      rmSync(this.root, { recursive: true, force: true });
      if (left.length) throw new Error(`processes left behind by the README's examples: ${left.map((p) => `${p.pid} ${p.comm}`).join(", ")}`);
    }
  }
}

test("every README block is run here, or marked not-run with a reason", () => {
  expect(unclassified).toEqual([]);
  expect(strayMarkers.map((line) => `README.md line ${line}: an example marker that is not right before a code block`)).toEqual([]);
  const table = classified.map((c) => `  line ${String(c.block.line).padStart(4)}  ${(c.block.info || "-").padEnd(10)} ${c.run ? `run: ${c.kind}` : `not run: ${c.reason}`}`);
  console.log(`README.md: ${classified.length} blocks, ${runnable.length} run, ${classified.length - runnable.length} not run\n${table.join("\n")}`);
  expect(blocks.length).toBeGreaterThan(0);
  for (const c of classified) if (!c.run) expect(c.reason.length).toBeGreaterThan(10);
  // The kinds the README needs all occur, so a broken classifier cannot pass by running nothing.
  for (const kind of ["shell", "transcript", "completion-install", "library"]) expect(runnable.some((c) => c.kind === kind)).toBe(true);
});

test("the configuration blocks marked not-run parse (JSON, TOML, YAML)", () => {
  let parsed = 0;
  for (const c of classified) {
    if (c.run) continue;
    const parse = { json: JSON.parse, toml: Bun.TOML.parse, yaml: Bun.YAML.parse }[c.block.info];
    if (!parse) continue;
    expect(() => parse(c.block.body), `${where(c.block)} (${c.block.info})`).not.toThrow();
    parsed++;
  }
  expect(parsed).toBeGreaterThan(0);
});

// Shell blocks and transcripts, one place per heading.
const sections = new Map<string, Extract<Classified, { run: true }>[]>();
for (const c of runnable) {
  if (c.kind !== "shell" && c.kind !== "transcript") continue;
  sections.set(c.block.heading, [...(sections.get(c.block.heading) ?? []), c]);
}

for (const [heading, members] of sections) {
  describe(`README ${heading || "(top)"}`, () => {
    let place: Place;
    beforeAll(async () => {
      place = new Place(); // assigned first, so afterAll removes it also when init fails
      await place.init();
    }, 120_000);
    afterAll(async () => {
      await place?.cleanup();
    }, 60_000);

    for (const c of members) {
      const title = `${where(c.block)}: ${c.kind} ${JSON.stringify(c.block.body.split("\n")[0]?.slice(0, 60))}`;
      test(title, async () => {
        requireNeeds(c.options, c.block);
        await place.setup(c.options, c.block);
        if (c.kind === "shell") {
          // set -e: every line must succeed; the ERR trap names the line that did not.
          const script = `set -e\ntrap 'printf "README example: this command failed (exit %d): %s\\n" "$?" "$BASH_COMMAND" >&2' ERR\n${c.block.body}\n`;
          const r = await place.bash(`line-${c.block.line}.sh`, script);
          if (r.code !== 0 || r.timedOut) throw new Error(describeRun(`${where(c.block)} failed`, r));
          return;
        }
        const steps = parseTranscript(c.block.body, c.block.line + 1);
        const marker = (i: number) => `@@readme-step ${i} %d@@`;
        const script = ["exec 2>&1", ...steps.flatMap((s, i) => [s.command, `printf '\\n${marker(i)}\\n' "$?"`])].join("\n");
        const r = await place.bash(`line-${c.block.line}.sh`, `${script}\n`);
        const pieces = r.stdout.split(/\n@@readme-step \d+ (\d+)@@\n/);
        const problems: string[] = [];
        steps.forEach((step, i) => {
          if (2 * i + 1 >= pieces.length) {
            problems.push(`line ${step.line}: $ ${step.command}\n  did not finish (${describeRun("the transcript", r)})`);
            return;
          }
          const actual = place.shown(pieces[2 * i] as string);
          const diff = compareOutput(step.shown, actual, c.options);
          if (diff) problems.push(`line ${step.line}: $ ${step.command}\n  (exit ${pieces[2 * i + 1]}) ${diff}`);
        });
        if (r.timedOut) problems.push(describeRun("the transcript", r));
        expect(problems.join("\n\n")).toBe("");
      }, 120_000);
    }
  });
}

// The completion install lines: each on a fresh HOME, under sh and under its own shell, then loaded.
const loaders: Record<string, (file: string) => string[]> = {
  bash: (file) => ["bash", "--norc", "--noprofile", "-c", 'source "$1" && complete -p awrepl', "bash", file],
  zsh: (file) => ["zsh", "-f", "-c", 'fpath=("$1" $fpath); autoload -Uz compinit && compinit -u -D && print -r -- "$_comps[awrepl]"', "zsh", dirname(file)],
  fish: (file) => ["fish", "--no-config", "-c", 'source $argv[1]; and complete -C "awrepl "', file],
};
const loaded: Record<string, (out: string) => boolean> = {
  bash: (out) => /^complete .*awrepl$/m.test(out),
  zsh: (out) => out.trim() === "_awrepl",
  fish: (out) => /^run\t/m.test(out) && /^completion\t/m.test(out),
};
const shellOf: Record<string, (line: string) => string[]> = {
  sh: (line) => ["sh", "-c", line],
  bash: (line) => ["bash", "--norc", "--noprofile", "-c", line],
  zsh: (line) => ["zsh", "-f", "-c", line],
  fish: (line) => ["fish", "--no-config", "-c", line],
};

for (const c of runnable.filter((c) => c.kind === "completion-install")) {
  describe(`README ${where(c.block)}: completion install lines`, () => {
    let place: Place;
    beforeAll(async () => {
      place = new Place();
      await place.init();
    }, 120_000);
    afterAll(async () => {
      await place?.cleanup();
    }, 60_000);
    const lines = c.block.body.split("\n").filter((l) => l.trim() && !l.trim().startsWith("#"));
    test("there is a line for bash, zsh and fish", () => {
      const shells = lines.map((l) => /awrepl completion (\w+)/.exec(l)?.[1]);
      for (const shell of ["bash", "zsh", "fish"]) expect(shells).toContain(shell);
    });
    for (const line of lines) {
      const shell = /awrepl completion (\w+)/.exec(line)?.[1] ?? "?";
      test(`${shell}: ${line.replace(/\s+#.*$/, "")}`, async () => {
        const targets = [...line.replace(/\s#.*$/, "").matchAll(/>>?\s*(\S+)/g)].map((m) => m[1] as string);
        const target = targets.at(-1);
        expect(target, `the line writes a file: ${line}`).toStartWith("~/");
        expect(Bun.which(shell), `${shell} is installed (.ci/run installs it)`).not.toBeNull();
        for (const runner of ["sh", shell]) {
          const fresh = mkdtempSync(join(place.root, "fresh-home-"));
          expect(readdirSync(fresh)).toEqual([]);
          const env = place.envFor(fresh);
          const install = await exec((shellOf[runner] as (l: string) => string[])(line), { cwd: fresh, env, timeoutMs: 30_000 });
          if (install.code !== 0 || install.stderr) throw new Error(describeRun(`${runner} -c ${line}`, install));
          const file = join(fresh, (target as string).slice(2));
          expect(existsSync(file), `${runner}: ${file} written`).toBe(true);
          const load = await exec((loaders[shell] as (f: string) => string[])(file), { cwd: fresh, env, timeoutMs: 30_000 });
          expect(loaded[shell]?.(load.stdout) ? "" : describeRun(`loading ${file} into ${shell}`, load)).toBe("");
          if (shell === "fish") {
            // fish's own autoloading from ~/.config/fish/completions, as a fish user gets it.
            const auto = await exec(["fish", "-c", 'complete -C "awrepl "'], { cwd: fresh, env, timeoutMs: 30_000 });
            expect(loaded.fish?.(auto.stdout) ? "" : describeRun("fish autoloading the completion", auto)).toBe("");
          }
        }
      }, 60_000);
    }
  });
}

// The library block under Node, Bun and Deno, and tsc.
for (const c of runnable.filter((c) => c.kind === "library")) {
  describe(`README ${where(c.block)}: the library example`, () => {
    let work: string;
    let project: string;
    let binary: string;
    beforeAll(async () => {
      binary = await awreplBinary();
      work = mkdtempSync(join(tmpdir(), "awrepl-readme-lib-"));
      // node_modules/awrepl, shaped like the npm package (scripts/npm-packages.ts): "bun" takes the
      // TypeScript sources, everything else the bundle. The bundle is made as scripts/build-lib.ts makes
      // dist/lib/mod.js, into this test's directory.
      const pkg = join(work, "awrepl");
      const out = join(pkg, "dist", "lib");
      const built = await exec([BUN, "build", join(ROOT, "lib", "mod.ts"), "--target=node", "--conditions=bun", "--format=esm", "--outdir", out], { cwd: ROOT, env: process.env, timeoutMs: 60_000 });
      if (built.code !== 0) throw new Error(describeRun("bundling lib/mod.ts", built));
      copyFileSync(join(ROOT, "runtime.py"), join(out, "runtime.py"));
      symlinkSync(join(ROOT, "lib"), join(pkg, "lib"));
      const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version as string;
      writeFileSync(
        join(pkg, "package.json"),
        JSON.stringify({ name: "awrepl", version, type: "module", exports: { ".": { types: "./lib/mod.ts", bun: "./lib/mod.ts", default: "./dist/lib/mod.js" } } }),
      );
      project = join(work, "project");
      mkdirSync(join(project, "node_modules"), { recursive: true });
      symlinkSync(pkg, join(project, "node_modules", "awrepl"));
      writeFileSync(join(project, "package.json"), JSON.stringify({ name: "readme-example", private: true, type: "module", dependencies: { awrepl: version } }));
      writeFileSync(join(project, "example.ts"), `${c.block.body}\n`);
      // Node 20 runs no TypeScript: the types are stripped and nothing else changes (target ESNext: no
      // syntax is lowered, so what Node cannot parse, such as `await using` on Node 20, fails here).
      const js = ts.transpileModule(c.block.body, { compilerOptions: { target: ts.ScriptTarget.ESNext, module: ts.ModuleKind.ESNext } }).outputText;
      writeFileSync(join(project, "example.mjs"), js);
    }, 120_000);
    afterAll(() => {
      if (work) rmSync(work, { recursive: true, force: true });
    });

    const refuse = "http://127.0.0.1:9";
    const runtimes: Record<string, () => string[]> = {
      node: () => ["node", "example.mjs"],
      bun: () => [BUN, "example.ts"],
      // The permissions the README lists for Deno.
      deno: () => [DENO, "run", "--allow-read", "--allow-write", "--allow-run", "--allow-env", "--allow-net", "--allow-sys", "example.ts"],
    };
    for (const [runtime, argv] of Object.entries(runtimes)) {
      test(`runs under ${runtime}`, async () => {
        if (runtime === "node") {
          const v = await exec(["node", "--version"], { cwd: project, env: process.env, timeoutMs: 10_000 });
          expect(Number(/^v(\d+)/.exec(v.stdout)?.[1])).toBeGreaterThanOrEqual(20);
        }
        const state = makeHome();
        let r: Done;
        try {
          r = await exec(argv(), {
            cwd: project,
            timeoutMs: 90_000,
            env: testEnv(state, {
              AWREPL_BIN: binary,
              DENO_DIR: join(work, "deno-dir"),
              DENO_NO_UPDATE_CHECK: "1",
              DENO_NO_PROMPT: "1",
              // Nothing is fetched: the import resolves from node_modules.
              HTTPS_PROXY: refuse,
              HTTP_PROXY: refuse,
              https_proxy: refuse,
              http_proxy: refuse,
              NO_PROXY: "127.0.0.1,localhost",
              no_proxy: "127.0.0.1,localhost",
            }),
          });
        } finally {
          await cleanupHome(state);
          const left = await waitForNone(() => workingIn(work), 5_000);
          killPids(left.map((p) => p.pid));
          expect(left.map((p) => `${p.pid} ${p.comm}`)).toEqual([]);
        }
        if (r.code !== 0 || r.timedOut) throw new Error(describeRun(`the example under ${runtime}`, r));
        expect(r.stderr).toBe("");
        if (c.options.stdout !== null) expect(r.stdout).toBe(c.options.stdout);
      }, 120_000);
    }

    test("type-checks (tsc --strict, against lib/mod.ts)", async () => {
      writeFileSync(
        join(project, "tsconfig.json"),
        JSON.stringify({
          extends: join(ROOT, "tsconfig.json"),
          compilerOptions: { typeRoots: [join(ROOT, "node_modules", "@types")] },
          files: ["example.ts"],
          include: [],
        }),
      );
      const r = await exec([TSC, "--noEmit", "-p", project], { cwd: project, env: process.env, timeoutMs: 90_000 });
      expect(r.stdout + r.stderr).toBe("");
      expect(r.code).toBe(0);
    }, 120_000);
  });
}
