import { describe, expect, test } from "bun:test";
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { peerCheckAvailable, peerProblem } from "./peer.ts";
import { BWRAP_FLOOR_FLAGS, descendants, PYTHON, requireBwrap, within } from "../../tests/harness/mod.ts";

// Connects to argv[1] and holds the connection until the server closes it, so the peer is alive
// (and its /proc entry readable) while the server looks at it.
const PYTHON_CLIENT = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nwhile s.recv(1024): pass\n";

type Accepted = { problem: string | null; socket: Socket };
type Listening = { path: string; server: Server; nextPeer(): Promise<Accepted> };

/** A server on `s.sock` in a fresh directory; checks each peer as it is accepted, as the supervisor would. */
async function withServer(fn: (listening: Listening) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "awrepl-peer-"));
  const path = join(dir, "s.sock");
  const waiting: ((a: Accepted) => void)[] = [];
  const accepted: Socket[] = [];
  const server = createServer((socket) => {
    accepted.push(socket);
    socket.on("error", () => {});
    waiting.shift()?.({ problem: peerProblem(socket), socket });
  });
  try {
    await within(new Promise<void>((resolve, reject) => server.once("error", reject).listen(path, resolve)), 5_000, `listening on ${path}`);
    const nextPeer = () => within(new Promise<Accepted>((resolve) => waiting.push(resolve)), 10_000, `a client on ${path}`);
    await fn({ path, server, nextPeer });
  } finally {
    for (const socket of accepted) socket.destroy();
    await within(new Promise<void>((resolve) => server.close(() => resolve())), 5_000, "closing the server").catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs `argv` to completion (killed after the test either way); resolves with its exit code. */
async function withChild(argv: string[], fn: (child: ChildProcess, exited: Promise<number | null>) => Promise<void>): Promise<void> {
  const [command, ...args] = argv as [string, ...string[]];
  const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => resolve(code));
  });
  try {
    await fn(child, exited);
    const code = await within(exited, 10_000, `${command} exiting`);
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await within(exited, 5_000, `${command} dying after SIGKILL`).catch(() => {});
    }
  }
}

describe("peerProblem", () => {
  test("the check is on under Bun on Linux", () => {
    expect(peerCheckAvailable()).toBe(process.platform === "linux");
  });

  test("a client in this process may be served", () =>
    withServer(async ({ path, nextPeer }) => {
      const peer = nextPeer();
      const client = createConnection(path);
      client.on("error", () => {});
      try {
        expect((await peer).problem).toBeNull();
      } finally {
        client.destroy();
      }
    }));

  test("a client in a child process of the same namespaces may be served", () =>
    withServer(async ({ path, nextPeer }) => {
      const peer = nextPeer();
      await withChild([PYTHON, "-c", PYTHON_CLIENT, path], async () => {
        const { problem, socket } = await peer;
        expect(problem).toBeNull();
        socket.end();
      });
    }));

  test("a client inside bubblewrap is refused, naming its pid as seen from here", () => {
    const bwrap = requireBwrap();
    return withServer(async ({ path, nextPeer }) => {
      const dir = join(path, "..");
      const peer = nextPeer();
      const argv = [bwrap, ...BWRAP_FLOOR_FLAGS, "--bind", dir, dir, "--", "/usr/bin/python3", "-c", PYTHON_CLIENT, path];
      await withChild(argv, async (child) => {
        const { problem, socket } = await peer;
        expect(problem).toContain("another pid and user namespace");
        // Our pid namespace is the sandbox's parent, so the kernel translates the peer's pid into ours:
        // the python under bwrap, not its pid 1 inside.
        const pid = Number(/\(pid (\d+)\)/.exec(problem ?? "")?.[1]);
        expect(descendants(child.pid ?? -1).map((p) => p.pid)).toContain(pid);
        socket.end();
      });
    });
  });

  test.skipIf(process.geteuid?.() !== 0)("a client running as another uid is refused", () =>
    withServer(async ({ path, nextPeer }) => {
      chmodSync(join(path, ".."), 0o755);
      chmodSync(path, 0o777);
      const peer = nextPeer();
      const argv = ["/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "/usr/bin/python3", "-c", PYTHON_CLIENT, path];
      await withChild(argv, async () => {
        const { problem, socket } = await peer;
        expect(problem).toContain("uid 65534");
        socket.end();
      });
    }));

  test("a socket with no file descriptor is not checked", () => {
    expect(peerProblem(new Socket())).toBeNull();
  });
});
