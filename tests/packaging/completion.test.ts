// `awrepl completion bash|zsh|fish`, loaded into the real shells (Debian's bash, zsh and fish: .ci/run
// installs them), with the compiled executable as `awrepl` on PATH and a state directory holding two
// running sessions (alpha, beta) and one saved one (gamma). bash is driven through its completion
// variables (COMP_WORDS, COMP_CWORD) and the generated function; fish by `complete -C`; zsh on a
// pseudo-terminal, a TAB typed and the candidates recorded (tests/packaging/zsh-complete.zsh).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { awreplBinary, cleanupHome, makeHome, ROOT, run, testEnv } from "../harness/mod.ts";

const ZSH_HARNESS = join(ROOT, "tests", "packaging", "zsh-complete.zsh");
const SHELLS = ["bash", "zsh", "fish"] as const;

let work: string;
let home: string;
let env: Record<string, string>;
let commands: string[];
const scripts: Record<string, string> = {};

async function awrepl(...args: string[]): Promise<string> {
  const r = await run(args, { home, cwd: work });
  if (r.code !== 0) throw new Error(`awrepl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "awrepl-completion-"));
  home = makeHome();
  mkdirSync(join(work, "bin"));
  symlinkSync(await awreplBinary(), join(work, "bin", "awrepl"));
  mkdirSync(join(work, "files", "sub"), { recursive: true });
  writeFileSync(join(work, "files", "cell.py"), "1\n");
  env = { ...(testEnv(home) as Record<string, string>), PATH: `${join(work, "bin")}:${process.env.PATH}`, HOME: work, TERM: "dumb" };
  await awrepl("-s", "alpha", "run", "a = 1");
  await awrepl("-s", "beta", "run", "b = 1");
  await awrepl("-s", "gamma", "run", "g = 1");
  await awrepl("-s", "gamma", "snapshot");
  await awrepl("close", "gamma", "--keep");
  for (const shell of SHELLS) {
    scripts[shell] = join(work, `awrepl.${shell}`);
    writeFileSync(scripts[shell] as string, await awrepl("completion", shell));
  }
  // The commands `awrepl --help` lists: what every shell must offer for the first word.
  const help = await awrepl("--help");
  const section = help.slice(help.indexOf("Commands:"), help.indexOf("Examples:"));
  commands = [...section.matchAll(/^  ([a-z][a-z-]*)/gm)].map((m) => m[1] as string).sort();
}, 60_000);

afterAll(async () => {
  if (home) await cleanupHome(home);
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Runs a shell synchronously (the state it completes from is already there). */
function shell(cmd: string[]): string {
  const r = Bun.spawnSync(cmd, { env, cwd: join(work, "files"), timeout: 30_000 });
  return r.stdout.toString();
}

/** The candidates a shell offers for `line` (the cursor at its end). */
const complete: Record<(typeof SHELLS)[number], (line: string, how?: string) => string[]> = {
  bash(line) {
    const words = line.split(" ");
    // bash splits "--session=x" at "=" (COMP_WORDBREAKS): mimic it.
    const split = words.flatMap((w) => (/^--[a-z-]+=/.test(w) ? [w.slice(0, w.indexOf("=")), "=", w.slice(w.indexOf("=") + 1)] : [w]));
    const quoted = split.map((w) => `'${w}'`).join(" ");
    const out = shell(["bash", "-c", `source '${scripts.bash}'; COMP_WORDS=(${quoted}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _awrepl; printf '%s\\n' "\${COMPREPLY[@]}"`]);
    return out.split("\n").filter(Boolean).sort();
  },
  zsh(line, how = "source") {
    const out = join(work, "zsh.out");
    rmSync(`${out}.fpath`, { recursive: true, force: true });
    const r = Bun.spawnSync(["zsh", "-f", ZSH_HARNESS, scripts.zsh as string, out, line, how], { env, cwd: join(work, "files"), timeout: 30_000 });
    if (r.exitCode !== 0) throw new Error(`zsh-complete.zsh: ${r.stderr}`);
    const words = readFileSync(out, "utf8").split("\n").filter((w) => w && w !== "__awrepl_completion_done__");
    return [...new Set(words)].sort();
  },
  fish(line) {
    const out = shell(["fish", "--no-config", "-c", `source '${scripts.fish}'; complete -C '${line}'`]);
    return out.split("\n").filter(Boolean).map((l) => l.split("\t")[0] as string).sort();
  },
};

for (const name of SHELLS) {
  describe(`${name} completion`, () => {
    const c = (line: string) => complete[name](line);
    test(`${name} is installed (.ci/run installs it)`, () => {
      expect(Bun.which(name)).not.toBeNull();
    });
    test("the subcommands `awrepl --help` lists, and a prefix of one", () => {
      expect(commands).toContain("completion");
      expect(c("awrepl ")).toEqual(commands);
      expect(c("awrepl r")).toEqual(commands.filter((x) => x.startsWith("r")));
      expect(c("awrepl -s alpha r")).toEqual(commands.filter((x) => x.startsWith("r"))); // an option's value is no command
    });
    test("running and saved session names after -s/--session, on either side of the command, and for close", () => {
      expect(c("awrepl -s ")).toEqual(["alpha", "beta", "gamma"]);
      expect(c("awrepl -s a")).toEqual(["alpha"]);
      expect(c("awrepl run -s ")).toEqual(["alpha", "beta", "gamma"]);
      expect(c("awrepl close ")).toEqual(["alpha", "beta", "gamma"]);
      const eq = c("awrepl --session=");
      expect(eq.map((w) => w.replace(/^--session=/, ""))).toEqual(["alpha", "beta", "gamma"]);
    });
    test("a command's options, daemon's subcommands, completion's shells, files for -f", () => {
      expect(c("awrepl run --t")).toEqual(["--timeout", "--traceback"]);
      expect(c("awrepl daemon ")).toEqual(["logs", "status", "stop"]);
      expect(c("awrepl daemon status --j")).toEqual(["--json"]);
      expect(c("awrepl completion ")).toEqual(["bash", "fish", "zsh"]);
      expect(c("awrepl run -f ce")).toEqual(["cell.py"]);
    });
  });
}

test("zsh: the script also works autoloaded from a directory on $fpath (as the README installs it)", () => {
  expect(complete.zsh("awrepl -s ", "fpath")).toEqual(["alpha", "beta", "gamma"]);
  expect(complete.zsh("awrepl daemon ", "fpath")).toEqual(["logs", "status", "stop"]);
});

test("__complete sessions never starts a supervisor: it lists the saved names, or nothing", async () => {
  const empty = makeHome();
  try {
    const r = await run(["__complete", "sessions"], { home: empty });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    expect((await run(["daemon", "status", "--json"], { home: empty })).stdout.trim()).toBe("null");
  } finally {
    await cleanupHome(empty);
  }
  // The supervisor snapshots every session when it stops: all three names are saved ones now.
  await awrepl("daemon", "stop");
  expect((await awrepl("__complete", "sessions")).split("\n").filter(Boolean)).toEqual(["alpha", "beta", "gamma"]);
  expect((await awrepl("daemon", "status", "--json")).trim()).toBe("null");
});

test("completion with another shell, and __complete with another word, are usage errors", async () => {
  const r = await run(["completion", "tcsh"], { home });
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('completion takes bash, zsh or fish, not "tcsh"');
  const w = await run(["__complete", "names"], { home });
  expect(w.code).toBe(2);
  expect(w.stderr).toContain('__complete takes sessions, not "names"');
});
