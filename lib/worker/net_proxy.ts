// The proxy a sandbox with an allow list reaches the network through (docs/limits.md, "Network"). It
// runs in the host process (the supervisor, or the CLI for an ephemeral run), listening on a Unix
// socket that is bound into the sandbox, where a forwarder (net_forwarder.ts) makes it 127.0.0.1:3128
// on the sandbox's own loopback. It understands two requests: `CONNECT host:port` (HTTPS, any TLS or
// TCP tunnel) and a plain request with an absolute URI (`GET http://host/path`). The host and port
// named there are what is checked and what is connected to (the name resolved here, once, and the
// checked address dialled: no second lookup to rebind); a plain request's Host header must name the
// same authority as its URI (no domain fronting), and it is sent on as one request (Connection: close).
// Everything else is refused with a status line that says why, which urllib and pip show as is.
//
// No proxy implementation is in the offline dependencies (node_modules has none; the usual npm ones do
// not resolve-then-check addresses), so this is a small one on node:net. One listener per allow list
// and host process, counted: acquired by each worker that uses it, closed with the last (acquire()).
import { lookup } from "node:dns/promises";
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { connect, createServer, isIP, type Server, type Socket } from "node:net";
import { dirname, join } from "node:path";
import { processAlive } from "../core/process.ts";
import { shortHash, shortSocketDir } from "../settings/home.ts";
import type { NetAllowList } from "../protocol/limits.ts";
import { addressAllowed, type AllowEntry, matching, normalHost, parseAllowList } from "./net_allow.ts";

/** What a worker's launch says about its proxy: the list, and the socket the sandbox has bound in. */
export type NetProxySpec = { allow: NetAllowList; socket: string };

const MAX_HEAD_BYTES = 64 * 1024;
const HEAD_TIMEOUT_MS = 30_000;
const CONNECT_TIMEOUT_MS = 10_000;
const MAX_SOCKET_PATH = 100;
/** Connections open at once through one listener (each holds two of the host's file descriptors). */
const MAX_CONNECTIONS = 256;

/** The socket for `allow` in this process: beside the supervisor's socket, named by pid and list (a spare of the same list shares it). */
export function proxySocketPath(socketDir: string, allow: NetAllowList): string {
  const name = `net-${process.pid}-${shortHash(JSON.stringify([...allow].sort()))}.sock`;
  const path = join(socketDir, name);
  return Buffer.byteLength(path) <= MAX_SOCKET_PATH ? path : join(shortSocketDir(), name);
}

type Listener = { server: Server; users: number; ready: Promise<void>; connections: Set<Socket> };
const listeners = new Map<string, Listener>();
let swept = false;

/** One use of the proxy: the listener stays open until every lease is released. */
export type ProxyLease = { release(): void };

/** Starts (or shares) the listener of `spec`, resolved once it listens. */
export async function acquireNetProxy(spec: NetProxySpec): Promise<ProxyLease> {
  let l = listeners.get(spec.socket);
  if (!l) {
    const entries = parseAllowList(spec.allow);
    if (!swept) sweepStale(dirname(spec.socket));
    swept = true;
    mkdirSync(dirname(spec.socket), { recursive: true, mode: 0o700 });
    rmSync(spec.socket, { force: true });
    const connections = new Set<Socket>();
    const server = createServer((client) => {
      // A cell opening connections without end must not take the host's file descriptors with it.
      if (connections.size >= MAX_CONNECTIONS) return refuse(client, 503, `more than ${MAX_CONNECTIONS} connections at once`);
      connections.add(client);
      client.once("close", () => connections.delete(client));
      handle(client, entries);
    });
    const ready = new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(spec.socket, () => {
        server.off("error", reject);
        resolve();
      });
    });
    l = { server, users: 0, ready, connections };
    listeners.set(spec.socket, l);
  }
  const listener = l;
  listener.users++;
  try {
    await listener.ready;
  } catch (err) {
    listeners.delete(spec.socket);
    throw new Error(`The sandbox's network proxy could not listen on ${spec.socket}: ${(err as Error).message}`, { cause: err });
  }
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      if (--listener.users > 0) return;
      listeners.delete(spec.socket);
      listener.server.close();
      for (const c of listener.connections) c.destroy();
      rmSync(spec.socket, { force: true });
    },
  };
}

/** The listeners open in this process (tests: the last worker's end closed its proxy). */
export function openProxies(): string[] {
  return [...listeners.keys()];
}

/** Sockets of proxies whose process is gone. */
function sweepStale(dir: string): void {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const m = /^net-(\d+)-[0-9a-f]+\.sock$/.exec(name);
    if (m && Number(m[1]) !== process.pid && !processAlive(Number(m[1]))) rmSync(join(dir, name), { force: true });
  }
}

/** One client connection: its request head, the decision, then bytes both ways. */
function handle(client: Socket, entries: AllowEntry[]): void {
  let head = Buffer.alloc(0);
  const timer = setTimeout(() => refuse(client, 408, "no complete request within 30 s"), HEAD_TIMEOUT_MS);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end < 0) {
      if (head.length > MAX_HEAD_BYTES) finish(() => refuse(client, 431, "request head over 64 KiB"));
      return;
    }
    finish(() => void route(client, entries, head.subarray(0, end).toString("latin1"), head.subarray(end + 4)));
  };
  const finish = (next: () => void) => {
    clearTimeout(timer);
    client.off("data", onData);
    client.pause();
    next();
  };
  client.on("data", onData);
  client.on("error", () => client.destroy());
  client.once("close", () => clearTimeout(timer));
}

async function route(client: Socket, entries: AllowEntry[], head: string, rest: Buffer): Promise<void> {
  const [requestLine = "", ...headerLines] = head.split("\r\n");
  const m = /^([A-Z]+) (\S+) HTTP\/(1\.[01])$/.exec(requestLine);
  if (!m) return refuse(client, 400, "not an HTTP/1.x proxy request");
  const [, method = "", target = "", version = "1.1"] = m;
  if (method === "CONNECT") {
    const authority = parseAuthority(target);
    if (!authority) return refuse(client, 400, `CONNECT needs host:port, not ${JSON.stringify(target)}`);
    const upstream = await open(client, entries, authority.host, authority.port);
    if (!upstream) return;
    client.write(`HTTP/${version} 200 Connection established\r\n\r\n`);
    if (rest.length) upstream.write(rest);
    return splice(client, upstream);
  }
  const url = URL.canParse(target) ? new URL(target) : null;
  if (!url) return refuse(client, 400, `a proxy request needs an absolute http:// URI, not ${JSON.stringify(target.slice(0, 100))}`);
  if (url.protocol !== "http:") return refuse(client, 400, `only http:// is forwarded as a plain request (use CONNECT for ${url.protocol}//)`);
  const port = Number(url.port || 80);
  const hostHeader = headerLines.find((l) => /^host:/i.test(l))?.slice(5).trim();
  if (hostHeader !== undefined && !sameAuthority(hostHeader, url.hostname, port)) {
    return refuse(client, 403, `the Host header ${JSON.stringify(hostHeader)} does not name the request's host ${url.host}`);
  }
  const upstream = await open(client, entries, url.hostname, port);
  if (!upstream) return;
  // One request, in origin form, without the hop-by-hop headers; the upstream closes after its answer.
  const hop = /^(proxy-connection|proxy-authorization|connection|keep-alive|te|trailer|upgrade):/i;
  const kept = headerLines.filter((l) => !hop.test(l));
  if (hostHeader === undefined) kept.unshift(`Host: ${url.host}`);
  upstream.write(`${method} ${url.pathname}${url.search} HTTP/${version}\r\n${[...kept, "Connection: close"].join("\r\n")}\r\n\r\n`);
  if (rest.length) upstream.write(rest);
  splice(client, upstream);
}

/** Checks `host:port`, resolves it, checks the address, connects; refuses the client (and returns null) otherwise. */
async function open(client: Socket, entries: AllowEntry[], rawHost: string, port: number): Promise<Socket | null> {
  const host = normalHost(rawHost);
  const matched = matching(entries, host, port);
  if (!matched.length) {
    refuse(client, 403, `${host}:${port} is not in the sandbox's allow list`);
    return null;
  }
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  } catch (err) {
    refuse(client, 502, `${host} could not be resolved (${(err as NodeJS.ErrnoException).code ?? "error"})`);
    return null;
  }
  const refused = addresses.find((a) => !addressAllowed(matched, a));
  if (refused !== undefined || !addresses.length) {
    refuse(client, 403, `${host} resolves to ${refused ?? "nothing"}, a private, loopback or link-local address that was not named in the allow list`);
    return null;
  }
  const address = addresses[0] as string;
  return await new Promise<Socket | null>((resolve) => {
    const upstream = connect({ host: address, port });
    const timer = setTimeout(() => upstream.destroy(new Error("timed out")), CONNECT_TIMEOUT_MS);
    upstream.once("connect", () => {
      clearTimeout(timer);
      resolve(upstream);
    });
    upstream.once("error", (err) => {
      clearTimeout(timer);
      refuse(client, 502, `${host}:${port} (${address}) could not be reached: ${(err as NodeJS.ErrnoException).code ?? err.message}`);
      resolve(null);
    });
  });
}

/** Bytes both ways until either side ends (a half-close is passed on). */
function splice(client: Socket, upstream: Socket): void {
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.pipe(upstream);
  upstream.pipe(client);
  const end = () => {
    client.destroy();
    upstream.destroy();
  };
  client.once("close", end);
  upstream.once("close", end);
  client.on("error", end);
  upstream.on("error", end);
  client.resume();
}

/** A refusal: the status line says why (urllib and pip show it), and so does the body. */
function refuse(client: Socket, status: number, why: string): void {
  const reason = `awrepl sandbox: ${why}`.replace(/[\r\n]/g, " ");
  const body = `${reason}\n`;
  client.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/** `host:port` or `[v6]:port` of a CONNECT. */
function parseAuthority(target: string): { host: string; port: number } | null {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+):(\d{1,5})$/.exec(target);
  if (!m) return null;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1] as string, port } : null;
}

function sameAuthority(header: string, host: string, port: number): boolean {
  const a = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(header.trim());
  if (!a) return false;
  return normalHost(a[1] as string) === normalHost(host) && Number(a[2] ?? 80) === port;
}
