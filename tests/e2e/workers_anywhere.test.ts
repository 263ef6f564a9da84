// The same promises for every kind of worker, through the compiled binary (issue 11): a local
// interpreter, one behind a real OpenSSH server whose side does NOT see the state directory (the
// fixture's `hide` variant: snapshots and display images must travel over the protocol), and one in
// `--sandbox` (bubblewrap). For each: state across calls, a display image file, snapshot -> daemon stop
// -> restore, and the failed-snapshot case (exit 1, said, and the next call never on the host's
// default interpreter). Then the sandbox from the command line: no network, no write outside the cwd,
// ~/.ssh and /etc/shadow unreadable, the environment minus secrets.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ExecResult } from "../../lib/protocol/result.ts";
import { cleanupHome, isolationAvailable, PYTHON, requireBwrap, run, start, startSshd, type TestSshd } from "../harness/mod.ts";
import { exec, run as mcpRun, withMcp } from "./mcp_client.ts";

/** A 1x1 PNG. */
const PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

type Kind = {
  name: "local" | "ssh" | "sandbox";
  /** Global options that create the session this way. */
  args: string[];
  /** A Python expression, true exactly when the cell runs where this kind runs it. */
  here: string;
  /** Per-kind environment of the awrepl commands. */
  env: Record<string, string>;
  stop(): Promise<void>;
};

/** A home whose parent the ssh fixture can hide (the far side then has no such path at all). */
function makeHiddenHome(): { parent: string; home: string } {
  const parent = mkdtempSync(join(tmpdir(), "awrepl-e2e-hidden-"));
  const home = join(parent, "home");
  mkdirSync(home, { mode: 0o700 });
  return { parent, home };
}

async function kindOf(name: Kind["name"], parent: string): Promise<Kind> {
  if (name === "local") return { name, args: [], here: "'AWREPL_SSHD_FIXTURE' not in os.environ and os.getpid() != 2", env: {}, stop: async () => {} };
  if (name === "sandbox") {
    requireBwrap();
    // AWREPL_E2E_HOME marks the sandboxed worker for the leftover check (the sandbox drops everything else).
    return { name, args: ["--sandbox", "--env", "AWREPL_E2E_HOME"], here: "os.getpid() == 2", /* pid 2 of its own pid namespace */ env: {}, stop: async () => {} };
  }
  const sshd: TestSshd = await startSshd({ hide: [parent] });
  return {
    name,
    args: ["--python", sshd.python(PYTHON)],
    // The far side: sshd's marker in its environment, and no state directory there.
    here: `os.environ.get('AWREPL_SSHD_FIXTURE') == ${JSON.stringify(sshd.dir)} and not os.path.exists(${JSON.stringify(parent)} + '/home')`,
    env: {},
    stop: async () => {
      // Everything of the far side ends with the session (exit now, then the transport): none left in 5 s.
      const left: number[] = [];
      const deadline = Date.now() + 5_000;
      while (Date.now() < deadline) {
        left.splice(0, left.length, ...sshd.farProcesses().map((p) => p.pid));
        if (left.length === 0) break;
        await Bun.sleep(50);
      }
      await sshd.stop();
      expect(left).toEqual([]);
    },
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** Runs `fn` with a hidden-parent home and a kind; cleans both up, the home first (it stops the supervisor). */
async function withKind(name: Kind["name"], fn: (home: string, kind: Kind, cwd: string) => Promise<void>): Promise<void> {
  if (name === "ssh") {
    const why = isolationAvailable("hide");
    if (!why.ok) throw new Error(`the ssh tests need a real sshd that can hide the state directory: ${why.reason}`);
  }
  const { parent, home } = makeHiddenHome();
  const cwd = join(parent, "project");
  mkdirSync(cwd);
  const kind = await kindOf(name, parent);
  try {
    await fn(home, kind, cwd);
  } finally {
    try {
      await cleanupHome(home);
    } finally {
      await kind.stop();
      rmSync(parent, { recursive: true, force: true });
    }
  }
}

function runner(home: string, kind: Kind, cwd: string) {
  const go = (args: string[], input?: string) => run(args, { home, cwd, env: kind.env, input });
  const ok = async (args: string[]) => {
    const r = await go(args);
    if (r.code !== 0) throw new Error(`awrepl ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
    return r.stdout;
  };
  const json = async (args: string[]) => {
    const r = await go([...args, "--json"]);
    return { ...(JSON.parse(r.stdout) as ExecResult), code: r.code, stderr: r.stderr };
  };
  return { go, ok, json };
}

for (const name of ["local", "ssh", "sandbox"] as const) {
  describe(`a ${name} worker`, () => {
    test("state across calls, a display image file, snapshot -> daemon stop -> restore, on the same kind of worker", () =>
      withKind(name, async (home, kind, cwd) => {
        const { ok, json } = runner(home, kind, cwd);
        await ok(["-s", "w", ...kind.args, "run", "import os, base64, awrepl\nx = 41"]);
        expect(await ok(["-s", "w", "run", `x + 1, ${kind.here}`])).toBe("(42, True)\n");
        // The image travels in band; the supervisor writes it into this machine's state directory.
        const shown = await json(["-s", "w", "run", `awrepl.emit({'image/png': ${JSON.stringify(PNG_B64)}})`]);
        const path = shown.display[0]?.["image/png"] as string;
        expect(path.startsWith(join(home, "display"))).toBe(true);
        expect(readFileSync(path).equals(Buffer.from(PNG_B64, "base64"))).toBe(true);
        // An explicit snapshot PATH is a path on this machine, whatever the worker's.
        const mine = join(cwd, "..", "mine.pkl");
        expect(await ok(["-s", "w", "snapshot", mine])).toStartWith(`Saved 3 name(s) to ${mine}`);
        expect(existsSync(mine)).toBe(true);
        const stop = await run(["daemon", "stop"], { home });
        expect(stop.stderr).toBe("Supervisor stopped\n");
        expect(stop.code).toBe(0);
        expect(existsSync(join(home, "snapshots", "w", "snapshot.pkl"))).toBe(true);
        const back = await json(["-s", "w", "run", `x + 1, ${kind.here}`]);
        expect(back.value).toBe("(42, True)");
        expect(back.restored?.restored).toEqual(["base64", "os", "x"]);
        // restore PATH from this machine into the worker.
        await ok(["-s", "w", "run", "x = 0"]);
        expect(await ok(["-s", "w", "restore", mine])).toStartWith(`Restored 3 name(s) from ${mine}`);
        expect(await ok(["-s", "w", "run", "x"])).toBe("41\n");
      }), 120_000);

    test("a stop whose snapshot fails: exit 1, said, and the next call runs on the same kind of worker, never the host's default", () =>
      withKind(name, async (home, kind, cwd) => {
        const { ok, go } = runner(home, kind, cwd);
        await ok(["-s", "f", ...kind.args, "run", "import os\nx = 1"]);
        const cell = await start(["-s", "f", "run", "--timeout", "0", "print('go', flush=True)\nsum(range(10**13))"], { home, cwd });
        await cell.waitForStdout("go");
        await Bun.sleep(300);
        const stop = await run(["daemon", "stop"], { home });
        expect(stop.code).toBe(1);
        expect(stop.stderr).toContain("awrepl: session f: state NOT saved: its running cell did not stop");
        expect(stop.stderr).toContain("it has no earlier snapshot: its state is lost");
        await cell.result;
        // No --python, no --sandbox: the saved spec decides.
        const r = await go(["-s", "f", "run", `import os\n'x' in globals(), ${kind.here}`]);
        expect(r.stdout).toBe("(False, True)\n");
        expect(r.stderr).toContain("Its state was lost; this call ran in a fresh worker made as the session was created.");
      }), 120_000);
  });
}

describe("--sandbox from the command line", () => {
  test("no network, no write outside the cwd, ~/.ssh and /etc/shadow unreadable, secrets not in the environment; --env opts in", () =>
    withKind("sandbox", async (home, kind, cwd) => {
      // A $HOME outside /tmp (the sandbox's /tmp is private anyway), so the $HOME hiding itself is what is tested.
      const secretHome = mkdtempSync(process.getuid?.() === 0 ? "/var/lib/awrepl-e2e-home-" : join(home, "..", "fakehome-"));
      cleanups.push(async () => rmSync(secretHome, { recursive: true, force: true }));
      mkdirSync(join(secretHome, ".ssh"), { recursive: true });
      writeFileSync(join(secretHome, ".ssh", "id_ed25519"), "PRIVATE KEY");
      const outside = join(home, "..", "outside.txt");
      const probe = [
        "import os, socket, json",
        "def attempt(f):",
        "    try:",
        "        f()",
        "        return 'ALLOWED'",
        "    except OSError as e:",
        "        return type(e).__name__ + ': ' + (e.strerror or '')",
        "res = {",
        "  'tcp': attempt(lambda: socket.create_connection(('1.1.1.1', 443), timeout=3)),",
        "  'local_tcp': attempt(lambda: socket.create_connection(('127.0.0.1', 22), timeout=3)),",
        `  'write_outside': attempt(lambda: open(${JSON.stringify(outside)}, 'w').write('x')),`,
        "  'write_usr': attempt(lambda: open('/usr/awrepl-escape', 'w').write('x')),",
        "  'write_srv': attempt(lambda: open('/srv/awrepl-escape', 'w').write('x')),",
        "  'write_cwd': attempt(lambda: open('inside.txt', 'w').write('ok')),",
        `  'ssh_key': attempt(lambda: open(${JSON.stringify(join(secretHome, ".ssh", "id_ed25519"))}).read()),`,
        "  'shadow': attempt(lambda: open('/etc/shadow').read()),",
        "  'secret': os.environ.get('AWS_SECRET_ACCESS_KEY'),",
        "  'token': os.environ.get('GITHUB_TOKEN'),",
        "  'pid1_env_has_secret': b'AWS_SECRET' in open('/proc/1/environ', 'rb').read(),",
        "}",
        "print(json.dumps(res))",
      ].join("\n");
      const r = await run(["-s", "box", "--sandbox", "--env", "AWREPL_E2E_HOME", "--env", "GITHUB_TOKEN", "run", "-"], {
        home,
        cwd,
        input: probe,
        env: { AWS_SECRET_ACCESS_KEY: "aws-secret", GITHUB_TOKEN: "opted-in", HOME: secretHome },
      });
      expect(r.stderr).toBe("");
      const res = JSON.parse(r.stdout) as Record<string, unknown>;
      expect(res.tcp).toMatch(/^OSError: Network is unreachable/);
      expect(res.local_tcp).toMatch(/Connection refused|Network is unreachable/);
      // The test's directories are under /tmp, which is the sandbox's own private tmpfs: a write there
      // lands in it and never reaches this machine's file; anywhere else is read-only.
      expect(existsSync(outside)).toBe(false);
      expect(res.write_usr).toBe("OSError: Read-only file system");
      expect(res.write_srv).toBe("OSError: Read-only file system");
      expect(res.write_cwd).toBe("ALLOWED");
      expect(res.ssh_key).toBe("FileNotFoundError: No such file or directory");
      expect(res.shadow).toBe("PermissionError: Permission denied");
      expect(res.secret).toBeNull();
      expect(res.token).toBe("opted-in");
      expect(res.pid1_env_has_secret).toBe(false);
      expect(readFileSync(join(cwd, "inside.txt"), "utf8")).toBe("ok");
      // --sandbox-net keeps the network (its own session); --sandbox-write adds a writable path.
      const extra = join(home, "..", "extra");
      mkdirSync(extra);
      const net = await run(
        ["-s", "netbox", "--sandbox", "--sandbox-net", "--sandbox-write", extra, "--env", "AWREPL_E2E_HOME", "run", `open(${JSON.stringify(join(extra, "w.txt"))}, 'w').write('ok')`],
        { home, cwd },
      );
      expect(net.stdout).toBe("2\n");
      expect(readFileSync(join(extra, "w.txt"), "utf8")).toBe("ok");
      // The sessions listing says where each runs.
      expect(await (await run(["sessions"], { home })).stdout).toMatch(/box +\d+ +sandbox/);
      // Asking the live session to drop its sandbox: said, not done.
      const asked = await run(["-s", "box", "--no-sandbox", "run", "os.getpid()"], { home, cwd });
      expect(asked.stdout).toBe("2\n");
      expect(asked.stderr).toContain("Session box keeps its sandbox (sandbox: no network, env AWREPL_E2E_HOME GITHUB_TOKEN); --no-sandbox was not applied.");
    }), 120_000);

  test("awrepl mcp --sandbox: the sessions an MCP host creates run sandboxed", () =>
    withKind("sandbox", async (home, _kind, cwd) =>
      withMcp(
        home,
        ["--sandbox", "--env", "AWREPL_E2E_HOME", "--session", "agent"],
        async ({ client }) => {
          const r = exec(
            await mcpRun(
              client,
              "import os, socket\ntry:\n    socket.create_connection(('1.1.1.1', 443), timeout=3)\n    net = 'ALLOWED'\nexcept OSError as e:\n    net = e.strerror\nos.getpid(), net",
            ),
          );
          expect(r.value).toBe("(2, 'Network is unreachable')");
          expect((await run(["sessions"], { home })).stdout).toMatch(/agent +\d+ +sandbox/);
        },
        { cwd },
      )), 120_000);

  test("flag mistakes are usage errors naming the flag and value", () =>
    withKind("local", async (home, kind, cwd) => {
      const { go } = runner(home, kind, cwd);
      for (
        const [args, says] of [
          [["--sandbox-net", "run", "1"], "--sandbox-net shapes a sandbox: add --sandbox"],
          [["--sandbox", "--env", "A=B", "run", "1"], '--env needs an environment variable name, not "A=B"'],
          [["--sandbox", "--sandbox-write", "/nonexistent/dir", "run", "1"], "--sandbox-write /nonexistent/dir: no such file or directory"],
          [["--no-sandbox", "--sandbox-net", "run", "1"], "--sandbox-net cannot go with --no-sandbox"],
          [["--sandbox", "--python", "ssh host python3", "run", "1"], "The sandbox runs a local interpreter"],
        ] as const
      ) {
        const r = await go([...args]);
        expect({ args, code: r.code }).toEqual({ args, code: 2 });
        expect(r.stderr).toContain(says);
      }
    }), 60_000);
});
