// A worker in a real container (README "Workers anywhere"): `--python "podman exec -i BOX python3"`,
// through the compiled binary. The image is made without a registry, from this machine's own Python
// (`podman import` of a minimal root file system), and the container cannot see the state directory:
// snapshots travel over the protocol. State across calls, snapshot -> daemon stop -> restore, a
// timeout on a C loop that leaves no Python behind in the container, and a failed stop snapshot that
// is said and never re-creates the session on this machine's interpreter.
//
// Podman needs three things on a machine like the CI's (Debian 12, root, a VM without
// CAP_SYS_RESOURCE): `default_ulimits = []` (a containers.conf of our own, through CONTAINERS_CONF),
// `runc` as the runtime (crun refuses hybrid cgroups here), and `--init` (no zombies pile up).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanupHome, run, start } from "../harness/mod.ts";

/** The container's interpreter: Debian's, copied into the image with its libraries. */
const CONTAINER_PYTHON = "/usr/bin/python3.11";

function podmanProblem(): string | null {
  if (process.platform !== "linux") return "podman tests are Linux-only";
  if (process.getuid?.() !== 0) return "the podman test runs rootful podman (root)";
  for (const tool of ["podman", "runc"]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) return `${tool} missing: apt-get install -y podman runc`;
  }
  if (!existsSync(CONTAINER_PYTHON)) return `${CONTAINER_PYTHON} missing (the image is built from this machine's Python)`;
  return null;
}

const problem = podmanProblem();
// CI installs podman and runc (.ci/run); elsewhere the tests below are skipped, and this says why.
if (problem) console.warn(`tests/e2e/podman_worker.test.ts: skipped: ${problem}`);
const id = `awrepl-e2e-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const scratch = mkdtempSync(join(tmpdir(), "awrepl-podman-"));
const conf = join(scratch, "containers.conf");
const env = { CONTAINERS_CONF: conf };
const podman = (...args: string[]) => execFileSync("podman", ["--runtime", "runc", ...args], { env: { ...process.env, ...env }, encoding: "utf8", timeout: 120_000 });
const pythonCommand = `podman --runtime runc exec -i ${id} ${CONTAINER_PYTHON}`;

/** A root file system holding only the interpreter, its standard library, its shared libraries, sh and sleep. */
function rootfsTar(out: string): void {
  const script = `
set -e
list=$(mktemp)
for f in ${CONTAINER_PYTHON} /usr/bin/dash /usr/bin/sh /usr/bin/sleep; do echo "$f"; done > "$list"
for bin in ${CONTAINER_PYTHON} /usr/bin/dash /usr/bin/sleep /usr/lib/python3.11/lib-dynload/*.so; do
  ldd "$bin" 2>/dev/null | awk '/=> \\//{print $3} /^[[:space:]]*\\/lib/{print $1}' >> "$list"
done
# Merged /usr: /lib64, /lib and /bin are links; name files by their /usr paths so the links stay links.
sed -e 's,^/lib64/,/usr/lib64/,' -e 's,^/lib/,/usr/lib/,' -e 's,^/bin/,/usr/bin/,' "$list" | sort -u |
  while read -r f; do echo "$f"; [ -L "$f" ] && readlink -f "$f"; done | sort -u > "$list.all"
echo /usr/lib/python3.11 >> "$list.all"
tar --exclude=__pycache__ --exclude=/usr/lib/python3.11/test -cf "${out}" -T "$list.all" /bin /lib /lib64 /etc/passwd /etc/group 2>/dev/null
rm -f "$list" "$list.all"`;
  execFileSync("sh", ["-c", script], { timeout: 60_000 });
}

beforeAll(() => {
  if (problem) return;
  writeFileSync(conf, "[containers]\ndefault_ulimits = []\n");
  rootfsTar(join(scratch, "rootfs.tar"));
  podman("import", join(scratch, "rootfs.tar"), `localhost/${id}:latest`);
  podman("run", "-d", "--init", "--name", id, `localhost/${id}:latest`, "/usr/bin/sleep", "infinity");
}, 120_000);

afterAll(() => {
  if (!problem) {
    try {
      podman("rm", "-f", "-t", "0", id);
    } finally {
      podman("rmi", "-f", `localhost/${id}:latest`);
    }
  }
  rmSync(scratch, { recursive: true, force: true });
});

/** The Python processes of the runtime left in the container (the ones this test's sessions started). */
function runtimesInContainer(): string[] {
  const out = podman(
    "exec",
    id,
    CONTAINER_PYTHON,
    "-c",
    "import os\nfor p in os.listdir('/proc'):\n    try:\n        c = open('/proc/%s/cmdline' % p, 'rb').read()\n    except Exception:\n        continue\n    if b'-u\\x00-c' in c: print(p)",
  );
  return out.split("\n").filter(Boolean);
}

async function withHome(fn: (home: string) => Promise<void>): Promise<void> {
  const parent = mkdtempSync(join(tmpdir(), "awrepl-e2e-podman-"));
  const home = join(parent, "home");
  mkdirSync(home, { mode: 0o700 });
  try {
    await fn(home);
  } finally {
    try {
      await cleanupHome(home);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  }
}

describe("a worker in a podman container", () => {
  test.skipIf(problem !== null)("state, snapshot -> daemon stop -> restore over the protocol, a C-loop timeout that leaves nothing in the container", () =>
    withHome(async (home) => {
      const go = (args: string[]) => run(args, { home, env });
      const inContainer = `open('/proc/1/cmdline', 'rb').read().startswith(b'/run/podman-init')`;
      const first = await go(["-s", "box", "--python", pythonCommand, "run", `import os\nx = 41\n${inContainer}, os.path.exists(${JSON.stringify(home)})`]);
      expect(first.stderr).toBe("");
      expect(first.stdout).toBe("(True, False)\n");
      expect((await go(["sessions"])).stdout).toMatch(/box +\d+ +host [0-9a-f]{12} /);
      const stop = await go(["daemon", "stop"]);
      expect([stop.code, stop.stderr]).toEqual([0, "Supervisor stopped\n"]);
      const back = await go(["-s", "box", "run", `x + 1, ${inContainer}`]);
      expect(back.stdout).toBe("(42, True)\n");
      expect(back.stderr).toStartWith(`awrepl: restored 2 name(s) from ${join(home, "snapshots", "box", "snapshot.pkl")}\n`);
      expect(back.stderr).toContain("came back from its snapshot of"); // how old it is, and that later cells are not in it
      // A C loop past its deadline: the session goes back to its snapshot; no runtime is left in the
      // container but the session's new worker and the supervisor's spare.
      const killed = await go(["-s", "box", "run", "--timeout", "500", "--json", "sum(range(10**13))"]);
      expect(killed.code).toBe(124);
      await go(["close", "box"]);
      await go(["daemon", "stop"]);
      const deadline = Date.now() + 5_000;
      let left = runtimesInContainer();
      while (left.length && Date.now() < deadline) {
        await Bun.sleep(100);
        left = runtimesInContainer();
      }
      expect(left).toEqual([]);
    }), 120_000);

  test.skipIf(problem !== null)("a stop whose snapshot fails: exit 1, and the session comes back in the container, never on this machine", () =>
    withHome(async (home) => {
      const go = (args: string[]) => run(args, { home, env });
      await go(["-s", "c", "--python", pythonCommand, "run", "import os\nx = 1"]);
      const cell = await start(["-s", "c", "run", "--timeout", "0", "print('go', flush=True)\nsum(range(10**13))"], { home, env });
      await cell.waitForStdout("go");
      await Bun.sleep(300);
      const stop = await go(["daemon", "stop"]);
      expect(stop.code).toBe(1);
      expect(stop.stderr).toContain("awrepl: session c: state NOT saved: its running cell did not stop");
      await cell.result;
      const r = await go(["-s", "c", "run", "import os\nos.path.exists('/run/podman-init'), 'x' in globals()"]);
      expect(r.stdout).toBe("(True, False)\n");
      expect(r.stderr).toContain("Its state was lost");
    }), 120_000);
});
