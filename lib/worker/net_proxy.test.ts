// The proxy against a real HTTP server on 127.0.0.1, spoken to over its real Unix socket with raw
// HTTP/1.1 (what the sandbox's forwarder carries): CONNECT tunnels, plain requests, and each refusal.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { join, resolve } from "node:path";
import { deadline } from "../core/deadline.ts";
import { tempHome } from "../../tests/harness/common.ts";
import { acquireNetProxy, openProxies, type ProxyLease } from "./net_proxy.ts";

let tmp: ReturnType<typeof tempHome>;
let server: Server;
let port: number;
let seen: { method?: string; url?: string; host?: string; connection?: string }[];
let leases: ProxyLease[];

beforeEach(async () => {
  tmp = tempHome();
  seen = [];
  leases = [];
  server = createServer((req, res) => {
    seen.push({ method: req.method, url: req.url, host: req.headers.host, connection: req.headers.connection });
    res.end(`hello ${req.url}`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as { port: number }).port;
});
afterEach(() => {
  for (const l of leases) l.release();
  server.close();
  tmp.remove();
});

async function proxy(allow: string[]): Promise<string> {
  const socket = join(tmp.home, "net.sock");
  leases.push(await acquireNetProxy({ allow, socket }));
  return socket;
}

/** Sends `request` over the proxy's socket; what comes back until the proxy or the server closes. */
function exchange(socket: string, request: string, then?: string): Promise<string> {
  const answer = new Promise<string>((resolve, reject) => {
    const c = connect(socket);
    let got = "";
    c.on("data", (d) => {
      got += d.toString("latin1");
      if (then && got.startsWith("HTTP/1.1 200 Connection established\r\n\r\n") && !got.includes("hello")) c.write(then);
    });
    c.on("close", () => resolve(got));
    c.on("error", reject);
    c.write(request);
  });
  return deadline(answer, 10_000, "the proxy's answer");
}

describe("the sandbox's proxy", () => {
  test("CONNECT to an allowed host:port is a tunnel to it", async () => {
    const socket = await proxy([`127.0.0.1:${port}`]);
    const got = await exchange(socket, `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`, `GET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(got).toStartWith("HTTP/1.1 200 Connection established\r\n\r\n");
    expect(got).toContain("hello /tunnel");
  });

  test("a plain request with an absolute URI goes on as one origin-form request that closes", async () => {
    const socket = await proxy([`127.0.0.1:${port}`]);
    const got = await exchange(socket, `GET http://127.0.0.1:${port}/plain?q=1 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nProxy-Connection: keep-alive\r\n\r\n`);
    expect(got).toStartWith("HTTP/1.1 200");
    expect(got).toContain("hello /plain?q=1");
    expect(seen).toEqual([{ method: "GET", url: "/plain?q=1", host: `127.0.0.1:${port}`, connection: "close" }]);
  });

  test("a loopback name named in the list is reached (named explicitly)", async () => {
    const socket = await proxy([`localhost:${port}`]);
    const got = await exchange(socket, `CONNECT localhost:${port} HTTP/1.1\r\n\r\n`, `GET /named HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(got).toContain("hello /named");
  });

  test("refused with 403 and the reason in the status line: a host not in the list, another port, the metadata address, a fronted Host", async () => {
    const socket = await proxy([`127.0.0.1:${port}`]);
    const cases: [string, string][] = [
      [`CONNECT pypi.org:443 HTTP/1.1\r\n\r\n`, "HTTP/1.1 403 awrepl sandbox: pypi.org:443 is not in the sandbox's allow list"],
      [`CONNECT 127.0.0.1:${port + 1} HTTP/1.1\r\n\r\n`, `HTTP/1.1 403 awrepl sandbox: 127.0.0.1:${port + 1} is not in the sandbox's allow list`],
      [`CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n`, "HTTP/1.1 403 awrepl sandbox: 169.254.169.254:80 is not in the sandbox's allow list"],
      [`GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n`, "HTTP/1.1 403 awrepl sandbox: 169.254.169.254:80 is not in the sandbox's allow list"],
      [`GET http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: evil.example\r\n\r\n`, `HTTP/1.1 403 awrepl sandbox: the Host header "evil.example" does not name the request's host 127.0.0.1:${port}`],
      [`GET /relative HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, "HTTP/1.1 400 awrepl sandbox: a proxy request needs an absolute http:// URI"],
      [`hello\r\n\r\n`, "HTTP/1.1 400 awrepl sandbox: not an HTTP/1.x proxy request"],
    ];
    for (const [request, status] of cases) expect((await exchange(socket, request)).split("\r\n")[0]).toStartWith(status);
    expect(seen).toEqual([]); // nothing reached the server
  });

  test("connections past 256 at once are refused with 503, and the listener goes on", async () => {
    const socket = await proxy([`127.0.0.1:${port}`]);
    const idle = await Promise.all(Array.from({ length: 256 }, () =>
      deadline(
        new Promise<Socket>((ok, fail) => {
          const c = connect(socket, () => ok(c));
          c.on("error", fail);
        }),
        10_000,
        "an idle connection",
      )));
    try {
      await Bun.sleep(50); // the proxy has accepted them all
      expect((await exchange(socket, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")).split("\r\n")[0]).toBe("HTTP/1.1 503 awrepl sandbox: more than 256 connections at once");
    } finally {
      for (const c of idle) c.destroy();
    }
    await Bun.sleep(50);
    expect(await exchange(socket, `GET http://127.0.0.1:${port}/after HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)).toContain("hello /after");
  });

  test("the listener is shared by its users and closed with the last one", async () => {
    const socket = join(tmp.home, "shared.sock");
    const a = await acquireNetProxy({ allow: [`127.0.0.1:${port}`], socket });
    const b = await acquireNetProxy({ allow: [`127.0.0.1:${port}`], socket });
    a.release();
    expect(openProxies()).toContain(socket);
    expect(await exchange(socket, `GET http://127.0.0.1:${port}/still HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)).toContain("hello /still");
    b.release();
    expect(openProxies()).not.toContain(socket);
    expect(existsSync(socket)).toBe(false);
  });

  test("names are resolved by the proxy: a wildcard that resolves to a private or metadata address is refused, the exact name is reached", async () => {
    // A proxy in a mount namespace of its own whose /etc/hosts says where the names point (root: unshare, mount).
    if (process.getuid?.() !== 0) throw new Error("this test needs root (unshare --mount, mount --bind over /etc/hosts)");
    const hosts = join(tmp.home, "hosts");
    writeFileSync(hosts, "127.0.0.1 localhost\n169.254.169.254 meta.corp.example\n10.0.0.7 private.corp.example\n127.0.0.1 named.corp.example\n");
    const socket = join(tmp.home, "ns.sock");
    const script = join(tmp.home, "proxy.ts");
    const allow = [`*.corp.example:${port}`, `named.corp.example:${port}`];
    writeFileSync(
      script,
      `import { acquireNetProxy } from ${JSON.stringify(resolve(import.meta.dir, "net_proxy.ts"))};\nawait acquireNetProxy({ allow: ${JSON.stringify(allow)}, socket: ${
        JSON.stringify(socket)
      } });\nconsole.log("ready");\n`,
    );
    const child = spawn("unshare", ["--mount", "--propagation", "private", "--", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$1" "$2"', hosts, process.execPath, script], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      let err = "";
      child.stderr.on("data", (d) => (err += d));
      await deadline(
        new Promise<void>((ok, fail) => {
          child.stdout.on("data", (d) => String(d).includes("ready") && ok());
          child.once("exit", (code) => fail(new Error(`the proxy in its namespace exited ${code}: ${err}`)));
        }),
        20_000,
        "the proxy in its own mount namespace",
      );
      const status = async (host: string) => (await exchange(socket, `CONNECT ${host}:${port} HTTP/1.1\r\n\r\n`, "GET /ns HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).split("\r\n")[0];
      expect(await status("meta.corp.example")).toBe(
        "HTTP/1.1 403 awrepl sandbox: meta.corp.example resolves to 169.254.169.254, a private, loopback or link-local address that was not named in the allow list",
      );
      expect(await status("private.corp.example")).toStartWith("HTTP/1.1 403 awrepl sandbox: private.corp.example resolves to 10.0.0.7");
      expect(await status("named.corp.example")).toBe("HTTP/1.1 200 Connection established");
      expect(seen.map((s) => s.url)).toEqual(["/ns"]);
    } finally {
      const gone = new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(null) : child.once("exit", r)));
      child.kill("SIGKILL");
      await deadline(gone, 5_000, "the namespaced proxy's exit");
    }
  });
});
