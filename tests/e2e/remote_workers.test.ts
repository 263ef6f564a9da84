// Workers anywhere, end to end: named sessions whose worker runs over a real OpenSSH server
// (tests/harness/sshd.ts, on 127.0.0.1 with its own keys), through the compiled binary; and sessions
// in the bubblewrap sandbox through the library (ReplSession's `sandbox` option): what a cell inside
// can and cannot reach, and that a timeout leaves nothing behind. Every far-side process carries the
// fixture's marker, so "nothing left over there" is checked by pid and by marker.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ReplSession } from "../../lib/session/session.ts";
import { hostPidOf } from "../../lib/worker/facts.ts";
import { goneWithin, processesOf, PYTHON, rejection, requireBwrap, requireSshd, run, running, start, startSshd, tempHome, type TestSshd, withHome } from "../harness/mod.ts";

let sshd: TestSshd;

beforeAll(async () => {
  requireSshd();
  sshd = await startSshd();
});
afterAll(async () => {
  await sshd?.stop(); // throws if anything was left on the far side
});

/** Runs awrepl with the session's worker over ssh. */
function ssh(home: string, args: string[], timeoutMs?: number) {
  return run(args, { home, env: { AWREPL_PYTHON: sshd.python(PYTHON) }, timeoutMs });
}

/** Far-side pids a cell prints: its python and a `sleep` it started. */
const FAR_PIDS = "import os, subprocess\n_child = subprocess.Popen(['sleep', '600'])\nprint(os.getpid(), _child.pid)";

function pidsOf(stdout: string): [number, number] {
  const [python, child] = stdout.trim().split(" ").map(Number);
  return [python as number, child as number];
}

/** The local ssh client of the session's worker: the first ssh this home's supervisor started. */
function sessionSsh(home: string): number {
  const ssh = processesOf(home)
    .filter((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("ssh\0"))
    .map((pid) => ({ pid, started: Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[19]) }))
    .sort((a, b) => a.started - b.started);
  if (!ssh[0]) throw new Error("no local ssh process for this home");
  return ssh[0].pid;
}

describe("a named session over ssh", () => {
  test("keeps state across calls; `sessions` shows the far worker's own pid, host, cwd and RSS", () =>
    withHome(async (home) => {
      expect((await ssh(home, ["-s", "far", "run", "x = 41"])).code).toBe(0);
      const r = await ssh(home, ["-s", "far", "run", "import os\nx += 1\nprint(os.getpid(), os.getcwd())\nx"]);
      expect(r.code).toBe(0);
      const [farPid, farCwd] = r.stdout.trim().split("\n")[0]?.split(" ") ?? [];
      expect(r.stdout.trim().split("\n").at(-1)).toBe("42");
      const list = await ssh(home, ["sessions", "--json"]);
      const row = (JSON.parse(list.stdout) as { name: string; pid: number; host: string; cwd: string; rss_bytes: number }[]).find((s) => s.name === "far");
      expect(row?.pid).toBe(Number(farPid)); // the python over there, not the local ssh client
      expect(row?.cwd).toBe(farCwd as string); // the far side's directory (the ssh user's home)
      expect(row?.host).toBe(readFileSync("/proc/sys/kernel/hostname", "utf8").trim());
      expect(row?.rss_bytes).toBeGreaterThan(1 << 20);
    }));

  test("an interrupt travels in band and stops the far cell; the session keeps its state", () =>
    withHome(async (home) => {
      await ssh(home, ["-s", "far", "run", "kept = 'yes'"]);
      const cell = await start(["-s", "far", "run", "import time\nprint('started', flush=True)\ntime.sleep(60)"], { home, env: { AWREPL_PYTHON: sshd.python(PYTHON) } });
      await cell.waitForStdout("started");
      const t0 = performance.now();
      expect((await ssh(home, ["-s", "far", "interrupt"])).code).toBe(0);
      const r = await cell.result;
      expect(r.code).toBe(130);
      expect(performance.now() - t0).toBeLessThan(10_000);
      expect((await ssh(home, ["-s", "far", "run", "kept"])).stdout.trim()).toBe("'yes'");
    }));

  test("--timeout on a C loop: the far python and its child are gone within 5 s; the session serves on", () =>
    withHome(async (home) => {
      const [python, child] = pidsOf((await ssh(home, ["-s", "far", "run", FAR_PIDS])).stdout);
      expect(running(python) && running(child)).toBe(true);
      const r = await ssh(home, ["-s", "far", "run", "--timeout", "1000", "sum(range(10**12))"]);
      expect(r.code).toBe(124);
      const t0 = performance.now();
      expect(await goneWithin(python, 5_000)).not.toBeNull();
      expect(await goneWithin(child, 5_000)).not.toBeNull();
      console.log(`ssh, C-loop timeout: far python and child gone ${(performance.now() - t0).toFixed(0)} ms after the result`);
      const next = await ssh(home, ["-s", "far", "run", "1 + 1"]);
      expect(next.code).toBe(0);
      expect(next.stdout.trim()).toBe("2");
    }));

  test("close ends the far worker's children", () =>
    withHome(async (home) => {
      const [python, child] = pidsOf((await ssh(home, ["-s", "far", "run", FAR_PIDS])).stdout);
      expect((await ssh(home, ["close", "far"])).code).toBe(0);
      const t0 = performance.now();
      expect(await goneWithin(child, 5_000)).not.toBeNull();
      expect(await goneWithin(python, 5_000)).not.toBeNull();
      console.log(`ssh, close: far python and child gone ${(performance.now() - t0).toFixed(0)} ms after close returned`);
    }));

  test("a partition (the local ssh stopped): the far side ends itself; the next call fails fast, named, or runs in a fresh worker", () =>
    withHome(async (home) => {
      const [python, child] = pidsOf((await ssh(home, ["-s", "far", "run", FAR_PIDS])).stdout);
      const local = sessionSsh(home);
      process.kill(local, "SIGSTOP");
      try {
        const t0 = performance.now();
        const pythonGone = await goneWithin(python, 15_000);
        expect(pythonGone).not.toBeNull();
        expect(await goneWithin(child, 5_000)).not.toBeNull();
        console.log(`ssh partition: the far side ended itself ${(performance.now() - t0).toFixed(0)} ms after the local ssh stopped (heartbeat 5 s)`);
        // The host may not have declared the loss yet (its heartbeat and the far side's run the same
        // 5 s): the call then went into the silence and fails named, in seconds; else it runs afresh.
        const t1 = performance.now();
        const next = await ssh(home, ["-s", "far", "run", "--json", "1 + 1"], 30_000);
        const ms = performance.now() - t1;
        const result = JSON.parse(next.stdout) as { status: string; value: string | null; exception: string | null; notice?: string | null };
        const said = `${result.exception ?? ""} ${result.notice ?? ""} ${next.stderr}`;
        expect(said).not.toContain("is it a Python interpreter");
        if (result.status === "ok") {
          expect(result.value).toBe("2");
          expect(said).toContain("no answer to the heartbeat");
        } else {
          expect(result.status).toBe("died");
          expect(said).toContain("no answer to the heartbeat");
          const again = await ssh(home, ["-s", "far", "run", "1 + 1"]);
          expect(again.stdout.trim()).toBe("2");
        }
        expect(ms).toBeLessThan(15_000);
        console.log(`ssh partition: the next call ended in ${ms.toFixed(0)} ms (${result.status}): ${said.trim().split("\n")[0]}`);
      } finally {
        try {
          process.kill(local, "SIGCONT");
        } catch {
          // killed by the supervisor already
        }
      }
    }));
});

describe("a cell that closes the worker's file descriptors (issue 15 item 8)", () => {
  test("closerange(3, 1024) leaves the session working; closing every fd is a death reported at once, even with --timeout 0", () =>
    withHome(async (home) => {
      expect((await run(["-s", "fds", "run", "kept = 1"], { home })).code).toBe(0);
      const usual = await run(["-s", "fds", "run", "import os\nos.closerange(3, 1024)\nkept + 1"], { home });
      expect(usual.code).toBe(0);
      expect(usual.stdout.trim()).toBe("2");
      const t0 = performance.now();
      const all = await run(["-s", "fds", "run", "--timeout", "0", "--json", "import os, time\nos.closerange(3, os.sysconf('SC_OPEN_MAX'))\ntime.sleep(600)"], { home, timeoutMs: 20_000 });
      const ms = performance.now() - t0;
      const result = JSON.parse(all.stdout) as { status: string; stderr: string };
      expect(result.status).toBe("died");
      expect(all.code).toBe(125);
      expect(ms).toBeLessThan(10_000); // not the cell's 600 s: said as soon as the channel closed
      const next = await run(["-s", "fds", "run", "1 + 1"], { home });
      expect(next.code).toBe(0);
      expect(next.stdout.trim()).toBe("2");
    }));
});

describe("a sandboxed session (library)", () => {
  let tmp: ReturnType<typeof tempHome>;
  let cwd: string;
  let session: ReplSession;
  let listener: ReturnType<typeof createServer>;
  let port = 0;

  beforeAll(async () => {
    requireBwrap();
    tmp = tempHome();
    cwd = join(tmp.home, "project");
    mkdirSync(cwd);
    // A service on the host's loopback the sandbox must not reach.
    listener = createServer((s) => s.end("hello from the host\n"));
    port = await new Promise<number>((r) => listener.listen(0, "127.0.0.1", () => r((listener.address() as { port: number }).port)));
    process.env.AWREPL_TEST_SECRET_TOKEN = "s3cr3t-value";
    process.env.AWREPL_TEST_OPT_IN = "opted-in";
    session = await ReplSession.start("sandboxed", { python: PYTHON, home: join(tmp.home, "state"), cwd, sandbox: { env: ["AWREPL_TEST_OPT_IN"] }, timeoutMs: 10_000 });
  });
  afterAll(async () => {
    await session?.close();
    listener?.close();
    delete process.env.AWREPL_TEST_SECRET_TOKEN;
    delete process.env.AWREPL_TEST_OPT_IN;
    tmp?.remove();
  });

  const py = async (code: string) => {
    const r = await session.execute(code);
    if (r.status !== "ok") throw new Error(`${r.exception}\n${r.stderr}`);
    return r.value;
  };

  test("the network is refused: the host's loopback and the internet", async () => {
    const attempt = (host: string, p: number) =>
      `import socket\ns = socket.socket()\ns.settimeout(3)\ntry:\n    s.connect((${JSON.stringify(host)}, ${p})); r = 'connected'\nexcept OSError as e:\n    r = type(e).__name__\nr`;
    expect(await py(attempt("127.0.0.1", port))).toBe("'ConnectionRefusedError'");
    expect(await py(attempt("1.1.1.1", 443))).not.toBe("'connected'");
    expect(await py("import socket\nsorted(n for _, n in socket.if_nameindex())")).toBe("['lo']");
  });

  test("writes outside the cwd are refused or stay in the sandbox's private /tmp; the cwd is writable", async () => {
    const write = (path: string) => `try:\n    open(${JSON.stringify(path)}, 'w').write('x'); r = 'written'\nexcept OSError as e:\n    r = e.strerror\nr`;
    for (const path of ["/usr/awrepl-escape", "/etc/awrepl-escape", "/var/lib/awrepl-escape", "/home/awrepl-escape"]) {
      expect(await py(write(path))).toBe("'Read-only file system'");
    }
    // $HOME and /tmp are private inside (the test's state directory lives under the host's /tmp):
    // writable, and nothing written there reaches the host.
    const home = process.env.HOME ?? "/root";
    for (const path of [join(tmp.home, "outside.txt"), join(home, "awrepl-escape")]) {
      expect(await py(write(path))).toBe("'written'");
      expect(existsSync(path)).toBe(false);
    }
    expect(await py(write(join(cwd, "inside.txt")))).toBe("'written'");
    expect(readFileSync(join(cwd, "inside.txt"), "utf8")).toBe("x");
  });

  const read = (path: string) => `import os\ntry:\n    open(os.path.expanduser(${JSON.stringify(path)}), 'rb').read(1); r = 'read'\nexcept OSError as e:\n    r = e.strerror\nr`;

  test("secrets are unreadable: the home directories, /etc/shadow, ssh host keys", async () => {
    expect(await py(read("/etc/shadow"))).toBe("'Permission denied'");
    // $HOME (and /root, /home) are empty inside, whatever the host keeps there (dotfiles, tokens).
    const hostHome = readdirSync(process.env.HOME ?? "/root").filter((n) => n.startsWith(".") && n !== ".pyenv" && n !== ".local");
    expect(hostHome.length).toBeGreaterThan(0);
    expect(await py(`import os\nsorted(set(os.listdir(os.path.expanduser('~'))) & set(${JSON.stringify(hostHome)}))`)).toBe("[]");
    expect(await py(read("~/.ssh/id_ed25519"))).toBe("'No such file or directory'");
    for (const key of readdirSync("/etc/ssh").filter((n) => /^ssh_host_.*_key$/.test(n))) expect(await py(read(`/etc/ssh/${key}`))).toBe("'Permission denied'");
  });

  test("a project that is $HOME is refused unless allowed (home: true); then its credential stores are hidden again inside the writable cwd", async () => {
    const home = join(tmp.home, "alice");
    mkdirSync(join(home, ".ssh"), { recursive: true });
    mkdirSync(join(home, ".aws"));
    writeFileSync(join(home, ".ssh", "id_ed25519"), "PRIVATE KEY");
    writeFileSync(join(home, ".aws", "credentials"), "aws_secret_access_key = x");
    writeFileSync(join(home, ".netrc"), "machine example.com password hunter2");
    writeFileSync(join(home, "notes.txt"), "mine");
    const refused = await rejection(ReplSession.start("home-cwd", { python: PYTHON, home: join(tmp.home, "state"), cwd: home, env: { HOME: home }, sandbox: {} }));
    expect(refused.message).toContain(`The sandbox will not make ${home} writable: it is your home directory`);
    expect(refused.message).toContain("--sandbox-home");
    const s = await ReplSession.start("home-cwd", { python: PYTHON, home: join(tmp.home, "state"), cwd: home, env: { HOME: home }, sandbox: { home: true } });
    try {
      const value = async (code: string) => (await s.execute(code)).value;
      expect(await value(read("~/notes.txt"))).toBe("'read'");
      expect(await value(read("~/.ssh/id_ed25519"))).toBe("'No such file or directory'");
      expect(await value(read("~/.aws/credentials"))).toBe("'No such file or directory'");
      expect(await value(read("~/.netrc"))).toBe("'Permission denied'");
    } finally {
      await s.close();
    }
  });

  test("the environment is the allowlist plus the opt-ins, in the cell and in /proc/1/environ", async () => {
    expect(await py("import os\n'AWREPL_TEST_SECRET_TOKEN' in os.environ")).toBe("False");
    expect(await py("import os\nos.environ.get('AWREPL_TEST_OPT_IN')")).toBe("'opted-in'");
    expect(await py("open('/proc/1/environ', 'rb').read().count(b's3cr3t-value')")).toBe("0");
    expect(await py("open('/proc/1/cmdline', 'rb').read().count(b'opted-in')")).toBe("0");
  });

  test("a C-loop timeout kills everything in the sandbox; the next call gets a fresh one", async () => {
    const report = await session.workerFacts();
    const python = report?.hostPid ?? 0;
    expect(python).toBeGreaterThan(0);
    const nsChild = Number(await py("import subprocess\n_p = subprocess.Popen(['sleep', '600'])\n_p.pid"));
    const child = hostPidOf(python, nsChild) ?? 0;
    expect(child).toBeGreaterThan(0);
    const r = await session.execute("sum(range(10**12))", { timeoutMs: 1_000 });
    expect(r.status).toBe("timeout");
    const t0 = performance.now();
    expect(await goneWithin(python, 5_000)).not.toBeNull();
    expect(await goneWithin(child, 5_000)).not.toBeNull();
    console.log(`sandbox, C-loop timeout: python and child gone ${(performance.now() - t0).toFixed(0)} ms after the result`);
    expect(await py("1 + 1")).toBe("2");
  });
});
