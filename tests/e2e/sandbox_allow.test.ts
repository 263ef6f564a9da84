// A sandbox that reaches only the hosts it allows (issue 24, "Network"; docs/limits.md), against real
// bubblewrap, a real HTTP and HTTPS server on 127.0.0.1 and the proxy in this process: urllib and pip
// through the proxy variables, a real TLS client through CONNECT, the refusals as the cell sees them,
// a program that ignores the proxy and cannot connect, and nothing left once the worker has ended.
// No traffic leaves the machine: every allowed host is 127.0.0.1, and refused ones are never dialled.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { createServer as createHttp, type Server } from "node:http";
import { createServer as createHttps } from "node:https";
import { join } from "node:path";
import { openProxies } from "../../lib/worker/net_proxy.ts";
import { PROXY_SOCKET_INSIDE } from "../../lib/worker/net_forwarder.ts";
import type { Worker } from "../../lib/worker/worker.ts";
import { cell, launchedWorkers, PYTHON, requireBwrap, tempHome, waitFor } from "../harness/mod.ts";

let tmp: ReturnType<typeof tempHome>;
let project: ReturnType<typeof tempHome>;
let dir: string;
let workers: ReturnType<typeof launchedWorkers>;
let servers: Server[];
let seen: string[];

beforeEach(() => {
  requireBwrap();
  tmp = tempHome();
  project = tempHome("awrepl-project-");
  dir = realpathSync(project.home);
  workers = launchedWorkers(tmp.home);
  servers = [];
  seen = [];
});
afterEach(async () => {
  await workers.stop();
  for (const s of servers) s.close();
  tmp.remove();
  project.remove();
});

async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as { port: number }).port;
}

/** An HTTP server that answers every path with its name, and serves `files` (path -> bytes) as they are. */
function httpServer(files: Record<string, Uint8Array> = {}): Promise<number> {
  return listen(
    createHttp((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      const file = files[req.url ?? ""];
      if (file) {
        if (req.url?.endsWith("/")) res.setHeader("Content-Type", "text/html");
        res.end(file);
      } else res.end(`hello ${req.url}`);
    }),
  );
}

function sandboxed(allow: string[]): Promise<Worker> {
  return workers.start({ sandbox: { allow } as never, cwd: dir, env: process.env });
}

/** The forwarders running (inside sandboxes): the processes whose command line is the forwarder's (python -c FORWARDER PORT SOCKET). */
function forwarders(): number[] {
  return readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      const argv = readFileSync(`/proc/${p}/cmdline`, "latin1").split("\0");
      return argv[1] === "-I" && argv[3] === "-c" && argv[6] === PROXY_SOCKET_INSIDE;
    } catch {
      return false;
    }
  }).map(Number);
}

describe("--sandbox-allow", () => {
  test("urllib reaches an allowed host through the proxy variables; other hosts and the metadata address are refused with the reason", async () => {
    const port = await httpServer();
    const w = await sandboxed([`127.0.0.1:${port}`]);
    const ok = await cell(w, `import os, urllib.request\nprint(os.environ["HTTPS_PROXY"], urllib.request.urlopen("http://127.0.0.1:${port}/through").read().decode())`);
    expect(ok.out.trim()).toBe(`http://127.0.0.1:3128 hello /through`);
    const refused = await cell(
      w,
      `
import urllib.request, urllib.error
for url in ["http://example.com/", "http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:${port + 1}/"]:
    try:
        urllib.request.urlopen(url)
    except urllib.error.HTTPError as e:
        print(e.code, e.reason)
`,
    );
    expect(refused.out.trim().split("\n")).toEqual([
      "403 awrepl sandbox: example.com:80 is not in the sandbox's allow list",
      "403 awrepl sandbox: 169.254.169.254:80 is not in the sandbox's allow list",
      `403 awrepl sandbox: 127.0.0.1:${port + 1} is not in the sandbox's allow list`,
    ]);
    expect(seen).toEqual(["GET /through"]);
  });

  test("a real TLS client through CONNECT (urllib over HTTPS_PROXY, the server's certificate checked)", async () => {
    const key = join(dir, "key.pem");
    const cert = join(dir, "cert.pem");
    const made = spawnSync(
      "openssl",
      ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
      { stdio: "pipe", timeout: 30_000 },
    );
    if (made.status !== 0) throw new Error(`this test needs openssl (apt-get install openssl): ${made.stderr}`);
    const port = await listen(createHttps({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => res.end(`secure ${req.url}`)) as unknown as Server);
    const w = await sandboxed([`127.0.0.1:${port}`]);
    const got = await cell(
      w,
      `import ssl, urllib.request\nctx = ssl.create_default_context(cafile=${JSON.stringify(cert)})\nprint(urllib.request.urlopen("https://127.0.0.1:${port}/tls", context=ctx).read().decode())`,
    );
    expect(got.out.trim()).toBe("secure /tls");
    const fronted = await cell(
      w,
      `
import http.client
c = http.client.HTTPConnection("127.0.0.1", 3128)
c.set_tunnel("169.254.169.254", 443)
try:
    c.request("GET", "/")
except OSError as e:
    print(e)
`,
    );
    expect(fronted.out.trim()).toBe("Tunnel connection failed: 403 awrepl sandbox: 169.254.169.254:443 is not in the sandbox's allow list");
  });

  test("pip downloads from an allowed index through the proxy", async () => {
    // A wheel is a zip with its metadata: made here, served as a simple index on 127.0.0.1.
    const wheel = execFileSync(PYTHON, [
      "-c",
      `
import io, sys, zipfile
b = io.BytesIO()
with zipfile.ZipFile(b, "w") as z:
    z.writestr("demo_allow/__init__.py", "X = 1\\n")
    z.writestr("demo_allow-1.0.dist-info/METADATA", "Metadata-Version: 2.1\\nName: demo-allow\\nVersion: 1.0\\n")
    z.writestr("demo_allow-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
    z.writestr("demo_allow-1.0.dist-info/RECORD", "")
sys.stdout.buffer.write(b.getvalue())
`,
    ]);
    const name = "demo_allow-1.0-py3-none-any.whl";
    const index = new TextEncoder().encode(`<html><body><a href="/files/${name}">${name}</a></body></html>`);
    const port = await httpServer({ "/simple/demo-allow/": index, [`/files/${name}`]: new Uint8Array(wheel) });
    const w = await sandboxed([`127.0.0.1:${port}`]);
    const out = join(dir, "wheels");
    mkdirSync(out);
    const pip = await cell(
      w,
      `import subprocess, sys\nr = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check", "--index-url", "http://127.0.0.1:${port}/simple/", "demo-allow", "-d", ${
        JSON.stringify(out)
      }], capture_output=True, text=True)\nprint(r.returncode, r.stderr[-500:])`,
      120_000,
    );
    expect(pip.out.trim()).toStartWith("0");
    expect(readdirSync(out)).toEqual([name]);
    expect(seen).toContain(`GET /files/${name}`);
  });

  test("a program that ignores the proxy cannot connect: 127.0.0.1 is the sandbox's own, other addresses have no route", async () => {
    const port = await httpServer();
    const w = await sandboxed([`127.0.0.1:${port}`]);
    const direct = await cell(
      w,
      `
import socket, urllib.request
for a in [("127.0.0.1", ${port}), ("10.255.255.1", 80)]:
    try:
        socket.create_connection(a, timeout=5)
    except OSError as e:
        print(type(e).__name__, e.errno)
try:
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open("http://127.0.0.1:${port}/")
except OSError as e:
    print("urllib without proxy:", type(e).__name__)
`,
    );
    expect(direct.out.trim().split("\n")).toEqual(["ConnectionRefusedError 111", "OSError 101", "urllib without proxy: URLError"]);
    expect(seen).toEqual([]);
  });

  test("the forwarder and the proxy start with the first worker and end with the last", async () => {
    const port = await httpServer();
    const allow = [`127.0.0.1:${port}`];
    const a = await sandboxed(allow);
    const b = await sandboxed(allow);
    expect(openProxies().length).toBe(1); // one listener for one list
    expect(forwarders().length).toBe(2); // one forwarder in each sandbox
    a.kill();
    await a.exited;
    expect(openProxies().length).toBe(1);
    expect((await cell(b, `import urllib.request\nprint(urllib.request.urlopen("http://127.0.0.1:${port}/b").read().decode())`)).out.trim()).toBe("hello /b");
    await b.close(2_000);
    expect(openProxies()).toEqual([]);
    await waitFor(() => forwarders().length === 0, 5_000, "the forwarders to end with their sandboxes");
  });

  test("the allow list is checked: a bad entry, or together with the whole network, fails the start", async () => {
    await expect(workers.start({ sandbox: { allow: ["http://pypi.org"] } as never, cwd: dir, env: process.env })).rejects.toThrow("--sandbox-allow takes host[:port]");
    await expect(workers.start({ sandbox: { allow: ["pypi.org"], network: true } as never, cwd: dir, env: process.env })).rejects.toThrow("exclude each other");
    writeFileSync(join(dir, "x"), ""); // the project is still ours to write
  });
});
