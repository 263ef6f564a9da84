// The sandbox's command line (what each profile option changes, what never goes on it) and real
// sandboxed workers, also for interpreters under a hidden directory (pyenv under /root). The escape
// attempts against a sandboxed session: tests/e2e/remote_workers.test.ts.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { PYTHON, rejection, requireBwrap, tempHome, waitFor } from "../../tests/harness/mod.ts";
import { processAlive } from "../core/process.ts";
import { resolveInterpreter } from "./interpreter.ts";
import { runtimeLaunch } from "./launch.ts";
import { sandboxEnv, sandboxLaunch } from "./sandbox.ts";
import { Worker } from "./worker.ts";

let tmp: ReturnType<typeof tempHome>;
beforeEach(() => {
  tmp = tempHome();
});
afterEach(() => tmp.remove());

const base = () => ({
  cwd: tmp.home,
  env: { PATH: "/usr/bin:/bin", HOME: "/root", SECRET_TOKEN: "s3cr3t", MY_OPT_IN: "value-1", PYTHONPATH: "/x", LC_ALL: "C" },
  interpreterPaths: ["/usr"],
  runtimeFile: "/etc/hostname",
  bwrap: "/usr/bin/bwrap",
});

describe("the bubblewrap command line", () => {
  test("default: no network, no capabilities, read-only root, the cwd writable, the runtime bound at /run/awrepl", () => {
    const { prefix, runtimePath } = sandboxLaunch({}, base());
    const argv = prefix.join(" ");
    expect(prefix[0]).toBe("/usr/bin/bwrap");
    expect(prefix.at(-1)).toBe("--");
    expect(argv).toContain("--unshare-all --unshare-user --disable-userns --cap-drop ALL --new-session --die-with-parent");
    expect(argv).not.toContain("--share-net");
    expect(argv).toContain("--ro-bind / /");
    expect(argv).toContain(`--bind ${tmp.home} ${tmp.home}`);
    expect(argv).toContain("--tmpfs /run");
    expect(argv).toContain("--ro-bind /dev/null /etc/shadow");
    expect(runtimePath).toBe("/run/awrepl/hostname");
    expect(argv).toContain(`--chdir ${tmp.home}`);
  });

  test("environment: the allowlist and the opt-ins, spawned with, never on the command line", () => {
    const { prefix, env } = sandboxLaunch({ env: ["MY_OPT_IN"] }, base());
    expect(env).toEqual({ PATH: "/usr/bin:/bin", HOME: "/root", MY_OPT_IN: "value-1", PYTHONPATH: "/x", LC_ALL: "C", TMPDIR: "/tmp", AWREPL_SANDBOX_NETWORK: "none" });
    expect(prefix.join(" ")).not.toContain("value-1");
    expect(prefix.join(" ")).not.toContain("s3cr3t");
    expect(prefix).not.toContain("--setenv");
    expect(sandboxEnv({ AWS_SECRET_ACCESS_KEY: "k", TERM: "xterm" })).toEqual({ TERM: "xterm", TMPDIR: "/tmp" });
  });

  test("network and extra writable paths widen it; bad values are refused by name", async () => {
    const extra = join(tmp.home, "out");
    mkdirSync(extra);
    const cwd = join(tmp.home, "cwd");
    mkdirSync(cwd);
    const argv = sandboxLaunch({ network: true, writable: [extra] }, { ...base(), cwd }).prefix.join(" ");
    expect(argv).toContain("--unshare-all --share-net");
    expect(argv).toContain(`--bind ${extra} ${extra}`);
    expect(() => sandboxLaunch({ writable: ["/nonexistent/dir"] }, base())).toThrow("The sandbox's writable path /nonexistent/dir does not exist");
    expect(() => sandboxLaunch({ writable: ["/"] }, base())).toThrow("cannot make / writable");
    expect(() => sandboxLaunch({}, { ...base(), cwd: "/" })).toThrow("cannot be /");
    expect(() => sandboxLaunch({ network: "yes" as unknown as boolean }, base())).toThrow('network setting must be true or false, not "yes"');
    expect(() => sandboxLaunch({ env: ["NOT A NAME"] }, base())).toThrow('--env takes an environment variable\'s name, not "NOT A NAME"');
  });

  test("inside a writable directory: credential stores hidden, code that runs later kept read-only", () => {
    mkdirSync(join(tmp.home, ".ssh"));
    mkdirSync(join(tmp.home, ".git", "hooks"), { recursive: true });
    mkdirSync(join(tmp.home, ".local", "share", "keyrings"), { recursive: true });
    writeFileSync(join(tmp.home, ".netrc"), "machine x password y");
    const argv = sandboxLaunch({}, base()).prefix.join(" ");
    expect(argv).toContain(`--tmpfs ${tmp.home}/.ssh`);
    expect(argv).toContain(`--remount-ro ${tmp.home}/.ssh`);
    expect(argv).toContain(`--ro-bind /dev/null ${tmp.home}/.netrc`);
    // .git whole: hooks, config, commondir, config.worktree, info alike; a mount point cannot be renamed.
    expect(argv).toContain(`--ro-bind ${tmp.home}/.git ${tmp.home}/.git`);
    // A deeper secret's parents pinned (bound onto themselves, before it), so they cannot be renamed away.
    expect(argv).toContain(`--bind ${tmp.home}/.local ${tmp.home}/.local --bind ${tmp.home}/.local/share ${tmp.home}/.local/share`);
    expect(argv.indexOf(`--bind ${tmp.home}/.local/share `)).toBeLessThan(argv.indexOf(`--tmpfs ${tmp.home}/.local/share/keyrings`));
    // Missing files are not bound (no empty file left behind); missing tool directories get an empty read-only stand-in.
    expect(argv).not.toContain(".bashrc");
    expect(argv).toContain(`--tmpfs ${tmp.home}/.vscode`);
    expect(argv).toContain(`--remount-ro ${tmp.home}/.vscode`);
  });

  test("awrepl's own state is hidden wherever it is, its parents pinned under a writable directory", () => {
    const state = join(tmp.home, "a", "state");
    mkdirSync(state, { recursive: true });
    const absentInside = join(tmp.home, "b", "default-state");
    const argv = sandboxLaunch({}, { ...base(), hide: [state, "/usr/share", "/var/lib/awrepl-test-absent", absentInside] }).prefix.join(" ");
    expect(argv).toContain(`--bind ${tmp.home}/a ${tmp.home}/a`);
    expect(argv).toContain(`--tmpfs ${state}`);
    expect(argv).toContain(`--remount-ro ${state}`);
    // Not under a writable path nor a hidden directory: hidden too (a socket on a read-only mount still answers).
    expect(argv).toContain("--tmpfs /usr/share");
    // Missing where the sandbox cannot write: nothing to hide; missing under a writable path: made
    // private first, so a cell cannot create it and plant a config there.
    expect(argv).not.toContain("awrepl-test-absent");
    expect(statSync(absentInside).mode & 0o777).toBe(0o700);
    expect(argv).toContain(`--tmpfs ${absentInside}`);
    expect(() => sandboxLaunch({ writable: [state] }, { ...base(), hide: [state] })).toThrow(`The sandbox cannot make ${state} writable: it is inside awrepl's own state`);
  });

  test("writable paths that would undo a protection are refused by name; --sandbox-git and --sandbox-home are the explicit ways", () => {
    mkdirSync(join(tmp.home, ".git", "hooks"), { recursive: true });
    writeFileSync(join(tmp.home, ".git", "config"), "[core]\n");
    expect(() => sandboxLaunch({ writable: [join(tmp.home, ".git")] }, base())).toThrow(`${tmp.home}/.git is protected in the sandbox`);
    const git = sandboxLaunch({ git: true }, base()).prefix.join(" ");
    expect(git).toContain(`--bind ${tmp.home}/.git ${tmp.home}/.git`); // writable, pinned
    expect(git).toContain(`--ro-bind ${tmp.home}/.git/hooks ${tmp.home}/.git/hooks`);
    expect(git).toContain(`--ro-bind ${tmp.home}/.git/config ${tmp.home}/.git/config`);
    const home = { ...base(), env: { ...base().env, HOME: tmp.home } };
    expect(() => sandboxLaunch({}, home)).toThrow(`The sandbox will not make ${tmp.home} writable: it is your home directory`);
    expect(sandboxLaunch({ home: true }, home).prefix).toContain("--chdir");
  });

  test("a protected name that is a symbolic link is refused: the cell could replace the link", () => {
    mkdirSync(join(tmp.home, "dotfiles"));
    writeFileSync(join(tmp.home, "dotfiles", "bashrc"), "# mine");
    symlinkSync("dotfiles/bashrc", join(tmp.home, ".bashrc"));
    expect(() => sandboxLaunch({}, base())).toThrow(`The sandbox cannot protect ${tmp.home}/.bashrc: it is a symbolic link (to dotfiles/bashrc)`);
  });

  test("a remote interpreter is refused: the sandbox runs a local one", async () => {
    const interpreter = await resolveInterpreter({ python: "ssh somehost python3", home: tmp.home });
    const err = await rejection(runtimeLaunch(tmp.home, interpreter, { sandbox: {}, cwd: tmp.home }));
    expect(err.code).toBe("usage");
    expect(err.message).toContain("is a command line");
  });
});

const pyenv = join(homedir(), ".pyenv", "versions");
const pythons = [PYTHON, join(pyenv, "3.9.18", "bin", "python3"), join(pyenv, "3.13.0", "bin", "python3")].filter((p) => existsSync(p));

describe("sandboxed workers", () => {
  for (const python of pythons) {
    test(`${python}: starts (its prefix bound when a hidden directory holds it), runs, and kill() leaves nothing`, async () => {
      requireBwrap();
      const interpreter = await resolveInterpreter({ python, home: tmp.home });
      // The state directory and the project apart: a writable path inside awrepl's state is refused.
      const cwd = join(tmp.home, "project");
      const state = join(tmp.home, "state");
      mkdirSync(cwd, { recursive: true });
      mkdirSync(state, { recursive: true, mode: 0o700 });
      const launch = await runtimeLaunch(state, interpreter, { sandbox: {}, cwd, env: process.env });
      expect(launch.kind).toBe("sandbox");
      expect(launch.argv.some((a) => a.startsWith("/run/awrepl/runtime-"))).toBe(true);
      const w = await Worker.start({ argv: launch.argv, env: launch.env, kind: launch.kind, cwd });
      let child = 0;
      try {
        let out = "";
        await w.request({ type: "execute", code: "import os, sys, subprocess\np = subprocess.Popen(['sleep', '600'])\nprint(os.getpid(), p.pid, sys.version_info[:2], os.getcwd())" }, {
          output: (_s, t) => (out += t),
        });
        const [pid, sleepPid] = out.split(" ");
        expect(pid).toBe("2"); // a pid namespace of its own: bwrap's reaper is 1
        expect(out).toContain(cwd);
        const facts = await w.info();
        expect(facts?.pid).toBe(2);
        const { hostPidOf } = await import("./facts.ts");
        child = hostPidOf(w.pid, Number(sleepPid)) ?? 0; // the sleep, as this machine numbers it
        expect(child).toBeGreaterThan(0);
      } finally {
        w.kill();
        await w.exited;
      }
      await waitFor(() => !processAlive(child), 5_000, "the sandbox's processes to end");
    });
  }
});
