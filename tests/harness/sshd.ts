// A real OpenSSH server for tests (Debian `openssh-server`, `openssh-client`): its own host key,
// sshd_config, authorized key, client key, known_hosts and ssh_config in a private temporary
// directory, listening on 127.0.0.1 (a free port) — or inside a network namespace the fixture makes,
// reached over a veth pair it can take down (a real partition). `python()` gives the command line to
// pass as `--python` / AWREPL_PYTHON.
//
// Variants:
// - `hide: [dir, ...]`: sshd runs in a private mount namespace (`unshare -m --propagation private`)
//   with an empty read-only tmpfs over each dir, so the far side does NOT see what is in them. Make
//   the test's AWREPL_HOME a child of a private directory and hide that directory (not AWREPL_HOME
//   itself): then the path does not exist on the far side, as on another machine (ENOENT), and
//   snapshots have to travel over the protocol. Needs root.
// - `netns: true`: sshd runs in a fresh network namespace; `partition()` / `heal()` take the host
//   side of the veth down and up. Needs root.
// - `proxy: true`: ssh connects through a TCP relay in this process; `partition()` stops relaying in
//   both directions (bytes are held, nothing is closed), `heal()` resumes. No root needed.
//
// Every process of the far side carries `AWREPL_SSHD_FIXTURE=<dir>` (sshd_config SetEnv), so
// `farProcesses()` finds them even after they are reparented; `stop()` kills the server, every
// connection's sshd and every far-side process, waits (bounded) until none is left, and removes the
// directory. Every wait has a deadline.
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve, sep } from "node:path";
import { sleep } from "./common.ts";
import { descendants, isLive, killPids, listProcs, nsOf, type Proc, waitForNone, withEnv, within } from "./procs.ts";

export const SSHD = "/usr/sbin/sshd";
export const HOST_ALIAS = "awrepl-test";
export const SSHD_MARKER = "AWREPL_SSHD_FIXTURE";

export type Availability = { ok: true } | { ok: false; reason: string };

function onPath(name: string): string | null {
  for (const d of (process.env.PATH ?? "/usr/bin:/bin").split(":")) if (d && existsSync(join(d, name))) return join(d, name);
  return null;
}

/** Can this machine run the fixture at all? (bun:test: `test.skipIf(!sshdAvailable().ok)`.) */
export function sshdAvailable(): Availability {
  if (process.platform !== "linux") return { ok: false, reason: "the sshd fixture is Linux-only (it reads /proc)" };
  if (!existsSync(SSHD)) return { ok: false, reason: `${SSHD} missing: apt-get install -y openssh-server` };
  for (const tool of ["ssh", "ssh-keygen"]) if (!onPath(tool)) return { ok: false, reason: `${tool} missing: apt-get install -y openssh-client` };
  return { ok: true };
}

/**
 * Throws the reason the sshd fixture cannot run here. Tests over ssh call it first: CI installs
 * openssh-server, so a machine without it fails them with the reason rather than skipping silently.
 */
export function requireSshd(): void {
  const a = sshdAvailable();
  if (!a.ok) throw new Error(`the ssh tests need a real sshd: ${a.reason}`);
}

/** The `hide` and `netns` variants: root, plus unshare / ip. */
export function isolationAvailable(kind: "hide" | "netns"): Availability {
  const base = sshdAvailable();
  if (!base.ok) return base;
  if (process.getuid?.() !== 0) return { ok: false, reason: `the ${kind} variant needs root (mount/network namespaces)` };
  if (kind === "hide" && !onPath("unshare")) return { ok: false, reason: "unshare missing (util-linux)" };
  if (kind === "netns" && !onPath("ip")) return { ok: false, reason: "ip missing: apt-get install -y iproute2" };
  return { ok: true };
}

export type SshdOptions = {
  /** Directories the far side must not see (an empty tmpfs over each). Root only. */
  hide?: string[];
  /** Run sshd in its own network namespace behind a veth pair (partition = link down). Root only. */
  netns?: boolean;
  /** Connect through an in-process TCP relay whose partition() stops all traffic. */
  proxy?: boolean;
  /** ssh client ServerAliveInterval (s); unset: ssh notices a dead peer only through TCP. */
  serverAliveInterval?: number;
  /** sshd ClientAliveInterval (s); unset: sshd keeps a silent client. */
  clientAliveInterval?: number;
  extraSshdConfig?: string[];
  extraSshConfig?: string[];
  /** Deadline for the server to listen. Default 10 s. */
  startTimeoutMs?: number;
  /** Parent of the fixture's directory (must not be under a `hide` dir). Default os.tmpdir(). */
  parentDir?: string;
};

export class TestSshd {
  /** The ssh command line to run a remote interpreter: use as `--python` / AWREPL_PYTHON. */
  python(interpreter = "/usr/bin/python3"): string {
    return `ssh -F ${this.sshConfig} ${HOST_ALIAS} ${interpreter}`;
  }

  /** argv form of an ssh command to the far side. */
  sshArgv(...remote: string[]): string[] {
    return ["ssh", "-F", this.sshConfig, HOST_ALIAS, ...remote];
  }

  constructor(
    readonly dir: string,
    readonly sshConfig: string,
    /** Where ssh connects (the sshd port, or the relay's). */
    readonly port: number,
    readonly sshdPort: number,
    readonly user: string,
    private readonly child: ChildProcess,
    private readonly extras: { netns?: NetnsHandle; relay?: Relay; namespace?: { kind: "mnt" | "net"; id: string } },
  ) {}

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get marker(): { name: string; value: string } {
    return { name: SSHD_MARKER, value: this.dir };
  }

  /** Live processes started for ssh sessions on the far side (shells, pythons, their children). */
  farProcesses(): Proc[] {
    return withEnv(SSHD_MARKER, this.dir);
  }

  /** Waits until the far side has no live process; returns the ones left after `timeoutMs`. */
  waitForNoFarProcesses(timeoutMs = 5_000): Promise<Proc[]> {
    return waitForNone(() => this.farProcesses(), timeoutMs);
  }

  /** sshd's log (-E), for failure messages. */
  log(): string {
    try {
      return readFileSync(join(this.dir, "sshd.log"), "utf8");
    } catch {
      return "";
    }
  }

  /** Cuts the connection path without closing anything (netns: veth down; proxy: relay stops). */
  async partition(): Promise<void> {
    if (this.extras.netns) await this.extras.netns.link("down");
    else if (this.extras.relay) this.extras.relay.pause();
    else throw new Error("partition() needs the netns or proxy variant");
  }

  async heal(): Promise<void> {
    if (this.extras.netns) await this.extras.netns.link("up");
    else if (this.extras.relay) this.extras.relay.resume();
    else throw new Error("heal() needs the netns or proxy variant");
  }

  private stopping: Promise<void> | null = null;

  /** Stops everything this fixture started and removes its directory; throws if a process survived. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      // Ours: the listener's descendants (collected before it dies: its connections' sshd processes
      // are reparented to PID 1 then), every process carrying the marker, and in the isolated
      // variants every process in the fixture's own mount or network namespace (a connection's
      // sshd left waiting for a partitioned client carries no marker and is nobody's child).
      const find = () => {
        const procs = listProcs();
        const byPid = new Map<number, Proc>();
        const own = this.extras.namespace ? procs.filter((p) => p.pid !== process.pid && isLive(p) && nsOf(p.pid, this.extras.namespace!.kind) === this.extras.namespace!.id) : [];
        for (const p of [...descendants(this.pid, procs), ...withEnv(SSHD_MARKER, this.dir, procs), ...own]) byPid.set(p.pid, p);
        return [...byPid.values()];
      };
      const before = find();
      // The listener first (no new connections), then every connection's sshd and session process.
      killPids([this.pid], "SIGTERM");
      killPids(before.map((p) => p.pid));
      killPids(find().map((p) => p.pid));
      const exited = this.child.exitCode !== null || this.child.signalCode !== null;
      if (!exited) await within(new Promise((r) => this.child.once("exit", r)), 5_000, "sshd exit").catch(() => killPids([this.pid]));
      const left = await waitForNone(() => {
        const l = find();
        killPids(l.map((p) => p.pid));
        return l;
      }, 5_000);
      this.extras.relay?.close();
      if (this.extras.netns) await this.extras.netns.remove();
      rmSync(this.dir, { recursive: true, force: true });
      if (left.length) throw new Error(`sshd fixture left processes: ${left.map((p) => `${p.pid} ${p.comm}`).join(", ")}`);
    })();
    return this.stopping;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

function run(file: string, args: string[], timeoutMs = 10_000): Promise<string> {
  return new Promise((res, rej) => {
    execFile(file, args, { timeout: timeoutMs, encoding: "utf8" }, (err, stdout, stderr) => {
      if (err) rej(new Error(`${file} ${args.join(" ")}: ${(stderr || err.message).trim()}`));
      else res(stdout);
    });
  });
}

/** A port the kernel says is free now (sshd may still lose a race for it: start() retries). */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once("error", rej);
    srv.listen(0, host, () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? res(addr.port) : rej(new Error("no port"))));
    });
  });
}

/** Waits until host:port accepts a TCP connection, or `child` exits, or the deadline passes. */
async function waitListening(host: string, port: number, child: ChildProcess, timeoutMs: number, log: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`sshd exited (${child.exitCode ?? child.signalCode}) before listening: ${log().trim().split("\n").slice(-3).join(" | ")}`);
    }
    const ok = await new Promise<boolean>((res) => {
      const s = connect({ host, port });
      const done = (v: boolean) => {
        s.destroy();
        res(v);
      };
      s.once("connect", () => done(true));
      s.once("error", () => done(false));
      setTimeout(() => done(false), 500);
    });
    if (ok) return;
    if (Date.now() >= deadline) throw new Error(`sshd did not listen on ${host}:${port} within ${timeoutMs} ms: ${log().trim().split("\n").slice(-3).join(" | ")}`);
    await sleep(10);
  }
}

/** Starts a test sshd. Always `await using` it or call stop() in afterEach/afterAll. */
export async function startSshd(options: SshdOptions = {}): Promise<TestSshd> {
  const avail = sshdAvailable();
  if (!avail.ok) throw new Error(avail.reason);
  for (const kind of [options.hide?.length ? "hide" : null, options.netns ? "netns" : null] as const) {
    if (!kind) continue;
    const a = isolationAvailable(kind);
    if (!a.ok) throw new Error(a.reason);
  }
  const dir = mkdtempSync(join(options.parentDir ?? tmpdir(), "awrepl-sshd-"));
  const hide = (options.hide ?? []).map((d) => resolve(d));
  for (const h of hide) {
    if (`${dir}${sep}`.startsWith(`${h}${sep}`)) throw new Error(`the fixture directory ${dir} is under hidden ${h}: pass parentDir`);
    if (!existsSync(h)) throw new Error(`hide: ${h} does not exist`);
  }
  const user = currentUser();
  let netns: NetnsHandle | undefined;
  let relay: Relay | undefined;
  try {
    if (process.getuid?.() === 0) mkdirSync("/run/sshd", { recursive: true, mode: 0o755 }); // privsep dir
    await Promise.all([
      run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "awrepl-test-host", "-f", join(dir, "host_key")]),
      run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "awrepl-test-client", "-f", join(dir, "client_key")]),
    ]);
    writeFileSync(join(dir, "authorized_keys"), readFileSync(join(dir, "client_key.pub")), { mode: 0o600 });
    if (options.netns) netns = await makeNetns();
    const listenHost = netns?.inside ?? "127.0.0.1";
    let lastErr: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      const sshdPort = netns ? 22 : await freePort();
      const sshdConfig = join(dir, "sshd_config");
      writeFileSync(sshdConfig, sshdConfigText(dir, listenHost, sshdPort, user, options), { mode: 0o600 });
      const child = spawnSshd(dir, sshdConfig, hide, netns);
      const logText = () => readIf(join(dir, "sshd.log")) + ((child as ChildProcess & { stderrText?: () => string }).stderrText?.() ?? "");
      try {
        await waitListening(listenHost, sshdPort, child, options.startTimeoutMs ?? 10_000, logText);
      } catch (err) {
        lastErr = err;
        killPids([child.pid ?? -1]);
        if (/Address already in use|Cannot bind/.test(logText())) continue;
        throw err;
      }
      let port = sshdPort;
      let host = listenHost;
      if (options.proxy) {
        relay = await Relay.start(listenHost, sshdPort);
        port = relay.port;
        host = "127.0.0.1";
      }
      writeFileSync(join(dir, "known_hosts"), `[${listenHost}]:${sshdPort} ${readFileSync(join(dir, "host_key.pub"), "utf8")}`);
      const sshConfig = join(dir, "ssh_config");
      writeFileSync(sshConfig, sshConfigText(dir, host, port, listenHost, sshdPort, user, options), { mode: 0o600 });
      // The namespace that is the fixture's alone (hide: mount; netns: network), by its inode.
      const kind: "mnt" | "net" | null = hide.length ? "mnt" : netns ? "net" : null;
      const namespace = kind && child.pid ? { kind, id: nsOf(child.pid, kind) ?? "" } : undefined;
      if (namespace && (!namespace.id || namespace.id === nsOf(process.pid, namespace.kind))) throw new Error(`sshd is not in a namespace of its own (${kind})`);
      return new TestSshd(dir, sshConfig, port, sshdPort, user, child, { netns, relay, namespace });
    }
    throw lastErr;
  } catch (err) {
    relay?.close();
    await netns?.remove();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** The login name of this uid (Bun's os.userInfo() said "unknown" here): /etc/passwd, else `id -un`. */
export function currentUser(): string {
  const uid = process.getuid?.() ?? -1;
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const f = line.split(":");
      if (f.length >= 7 && Number(f[2]) === uid && f[0]) return f[0];
    }
  } catch {
    // Fall through.
  }
  return execFileSync("id", ["-un"], { encoding: "utf8", timeout: 5_000 }).trim();
}

function readIf(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

function sshdConfigText(dir: string, host: string, port: number, user: string, o: SshdOptions): string {
  return [
    `Port ${port}`,
    `ListenAddress ${host}`,
    `HostKey ${join(dir, "host_key")}`,
    `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
    "PidFile none",
    "UsePAM no", // PAM would need a service file and (for root) would check /etc/shadow ageing
    "StrictModes no", // the temp dir's parents need not be root-owned and 0755
    "AuthenticationMethods publickey",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    `PermitRootLogin ${user === "root" ? "prohibit-password" : "no"}`,
    `AllowUsers ${user}`,
    "UseDNS no",
    "PrintMotd no",
    "PrintLastLog no",
    "PermitUserRC no",
    "PermitTTY no",
    "X11Forwarding no",
    "AllowTcpForwarding no",
    "AllowAgentForwarding no",
    "MaxStartups 64",
    "LoginGraceTime 20",
    `SetEnv ${SSHD_MARKER}=${dir}`, // marks every far-side process (found by procs.withEnv)
    ...(o.clientAliveInterval ? [`ClientAliveInterval ${o.clientAliveInterval}`, "ClientAliveCountMax 2"] : []),
    "LogLevel VERBOSE",
    ...(o.extraSshdConfig ?? []),
    "",
  ].join("\n");
}

function sshConfigText(dir: string, host: string, port: number, keyHost: string, keyPort: number, user: string, o: SshdOptions): string {
  return [
    `Host ${HOST_ALIAS}`,
    `  HostName ${host}`,
    `  Port ${port}`,
    `  User ${user}`,
    `  IdentityFile ${join(dir, "client_key")}`,
    "  IdentitiesOnly yes",
    "  IdentityAgent none",
    `  UserKnownHostsFile ${join(dir, "known_hosts")}`,
    "  GlobalKnownHostsFile /dev/null",
    `  HostKeyAlias [${keyHost}]:${keyPort}`, // a relay's port differs from the key's
    "  StrictHostKeyChecking yes",
    "  UpdateHostKeys no",
    "  CheckHostIP no",
    "  BatchMode yes",
    "  ConnectTimeout 10",
    "  ControlMaster no",
    "  ControlPath none",
    "  ForwardAgent no",
    "  ForwardX11 no",
    "  RequestTTY no",
    "  LogLevel ERROR",
    ...(o.serverAliveInterval ? [`  ServerAliveInterval ${o.serverAliveInterval}`, "  ServerAliveCountMax 2"] : []),
    ...(o.extraSshConfig ?? []).map((l) => `  ${l}`),
    "",
  ].join("\n");
}

function spawnSshd(dir: string, config: string, hide: string[], netns?: NetnsHandle): ChildProcess {
  const sshd = [SSHD, "-D", "-f", config, "-E", join(dir, "sshd.log")];
  let argv = sshd;
  if (hide.length) {
    // One process all along (unshare and sh exec): the pid we hold is sshd's.
    const script = 'n=$1; shift; i=0; while [ $i -lt "$n" ]; do mount -t tmpfs -o ro,size=64k,mode=0755 awrepl-hidden "$1" || exit 97; shift; i=$((i+1)); done; exec "$@"';
    argv = ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script, "sh", String(hide.length), ...hide, ...sshd];
  }
  if (netns) argv = ["ip", "netns", "exec", netns.name, ...argv];
  // Detached: a test runner's Ctrl-C must not kill it before stop() can collect its sessions.
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "ignore", "pipe"], detached: true });
  // sshd logs to -E; stderr holds what unshare/ip/sh said before exec (read by errors).
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (s: string) => {
    stderr = (stderr + s).slice(-4096);
  });
  (child as ChildProcess & { stderrText?: () => string }).stderrText = () => stderr;
  return child;
}

// --- network namespace variant ------------------------------------------------------------------

type NetnsHandle = { name: string; inside: string; link(state: "up" | "down"): Promise<void>; remove(): Promise<void> };

async function makeNetns(): Promise<NetnsHandle> {
  const tag = Math.random().toString(36).slice(2, 8);
  const name = `awrepl-${tag}`;
  const host = `aw${tag}h`;
  const peer = `aw${tag}n`;
  // A /30 in 10.200-254.x.y chosen at random: collisions between parallel fixtures are unlikely and
  // fail loudly (ip refuses a duplicate route).
  const a = 200 + Math.floor(Math.random() * 55);
  const b = Math.floor(Math.random() * 256);
  const c = Math.floor(Math.random() * 64) * 4;
  const outside = `10.${a}.${b}.${c + 1}`;
  const inside = `10.${a}.${b}.${c + 2}`;
  const ip = (...args: string[]) => run("ip", args, 5_000);
  const remove = async () => {
    await ip("link", "del", host).catch(() => undefined);
    await ip("netns", "del", name).catch(() => undefined);
  };
  try {
    await ip("netns", "add", name);
    await ip("link", "add", host, "type", "veth", "peer", "name", peer);
    await ip("link", "set", peer, "netns", name);
    await ip("addr", "add", `${outside}/30`, "dev", host);
    await ip("link", "set", host, "up");
    await ip("-n", name, "addr", "add", `${inside}/30`, "dev", peer);
    await ip("-n", name, "link", "set", peer, "up");
    await ip("-n", name, "link", "set", "lo", "up");
  } catch (err) {
    await remove();
    throw err;
  }
  return { name, inside, link: async (state) => void (await ip("link", "set", host, state)), remove };
}

// --- userspace relay variant ----------------------------------------------------------------------

/** A TCP relay; pause() stops moving bytes both ways without closing anything (a silent partition). */
class Relay {
  private paused = false;
  private readonly pairs = new Set<[Socket, Socket]>();
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(targetHost: string, targetPort: number): Promise<Relay> {
    let relay!: Relay;
    const server = createServer((client) => {
      const upstream = connect({ host: targetHost, port: targetPort });
      const pair: [Socket, Socket] = [client, upstream];
      relay.pairs.add(pair);
      // Not pipe(): pipe() resumes a source on its destination's 'drain', which would undo pause().
      const forward = (from: Socket, to: Socket) => {
        from.on("data", (chunk: Buffer) => {
          if (!to.write(chunk)) {
            from.pause();
            to.once("drain", () => {
              if (!relay.paused) from.resume();
            });
          }
        });
      };
      forward(client, upstream);
      forward(upstream, client);
      if (relay.paused) { for (const s of pair) s.pause(); }
      const end = () => {
        relay.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on("error", end).on("close", end);
      upstream.on("error", end).on("close", end);
    });
    const port = await within(
      new Promise<number>((res, rej) => {
        server.once("error", rej);
        server.listen(0, "127.0.0.1", () => res((server.address() as { port: number }).port));
      }),
      5_000,
      "relay listen",
    );
    relay = new Relay(server, port);
    return relay;
  }

  pause(): void {
    this.paused = true;
    // pause() stops reading; what is already read may still be written, which a real partition
    // would drop too late to matter (milliseconds).
    for (const pair of this.pairs) for (const s of pair) s.pause();
  }

  resume(): void {
    this.paused = false;
    for (const pair of this.pairs) for (const s of pair) s.resume();
  }

  close(): void {
    this.server.close();
    for (const pair of this.pairs) for (const s of pair) s.destroy();
    this.pairs.clear();
  }
}
