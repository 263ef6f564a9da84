// install/install.sh against a static HTTP server on 127.0.0.1 serving a release directory
// (tests/packaging/release.ts: the real executable for this platform, stand-ins for the others, made by
// the release step's own code), under dash and bash, with curl and with wget. Each run gets a PATH that
// holds only the tools the installer may use (a "toolbox" of symlinks), so the test also proves what it
// needs; another machine's `uname` is a shim in that toolbox. Nothing reaches past 127.0.0.1: the runs
// that would go to GitHub get a proxy that refuses at once. Servers that hang (silent, stalled midway,
// never accepting) prove that every download is bounded, with the bounds lowered to seconds.
import type { FileSink, TCPSocketListener } from "bun";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RELEASE_TARGETS } from "../../scripts/build.ts";
import { cleanupHome, descendants, killPids, PYTHON, ROOT, testEnv } from "../harness/mod.ts";
import { makeTestRelease, NATIVE_FILE, standIn } from "./release.ts";

const SCRIPT = join(ROOT, "install", "install.sh");
const VERSION: string = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version;
const SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
const which = (cmd: string): string | null => Bun.which(cmd, { PATH: SYSTEM_PATH });
/** The platforms install.sh knows: the release's, less Windows (install.ps1's). */
const SH_PLATFORMS = RELEASE_TARGETS.filter((t) => t.npm.os !== "win32").map((t) => t.file.replace(/^awrepl-/, ""));
const NATIVE = (NATIVE_FILE ?? "").replace(/^awrepl-/, "");
const OTHER = SH_PLATFORMS.find((p) => p !== NATIVE) as string;

let work: string;
let release: string;
let server: ReturnType<typeof Bun.serve>;
let base: string;
/** The paths the server was asked for, in order. */
const served: string[] = [];

/**
 * /v/FILE: the release. /tampered/FILE: the same SHA256SUMS, but this platform's executable (and its
 * .gz) are other bytes, as a broken mirror or a man in the middle would serve them.
 */
function startServer(): void {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = decodeURIComponent(new URL(req.url).pathname);
      served.push(path);
      const m = /^\/(v|tampered)\/([A-Za-z0-9._-]+)$/.exec(path);
      if (!m) return new Response("not found", { status: 404 });
      const [, dir, file] = m as unknown as [string, string, string];
      if (dir === "tampered" && file.startsWith(NATIVE_FILE as string)) return new Response(`tampered ${file}\n`);
      const local = join(release, file);
      return existsSync(local) ? new Response(Bun.file(local)) : new Response("not found", { status: 404 });
    },
  });
  base = `http://127.0.0.1:${server.port}`;
}

let stuck: TCPSocketListener<{ buffer: string }>;
let stuckBase: string;
/** The connections `stuck` holds open (never answered), closed at the end. */
const held = new Set<{ end(): void }>();

/**
 * A server that answers too little, with the hangs the download timeouts must end: /silent/FILE accepts the
 * connection, reads the request and never answers; /midway/SHA256SUMS is the release's, and
 * /midway/FILE sends the headers and the first 64 KiB of the file, then nothing more.
 */
function startStuckServer(): void {
  stuck = Bun.listen<{ buffer: string }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        socket.data = { buffer: "" };
        held.add(socket);
      },
      data(socket, chunk) {
        socket.data.buffer += chunk.toString("latin1");
        const line = /^GET (\S+) HTTP\/1\.[01]\r\n[^]*?\r\n\r\n/.exec(socket.data.buffer);
        if (!line) return;
        const m = /^\/(silent|midway)\/([A-Za-z0-9._-]+)$/.exec(line[1] as string);
        if (!m || m[1] === "silent") return; // accepted, read, never answered
        const body = readFileSync(join(release, m[2] as string));
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\nContent-Type: application/octet-stream\r\n\r\n`);
        socket.write(m[2] === "SHA256SUMS" ? body : body.subarray(0, 65536)); // then it stalls
      },
      close(socket) {
        held.delete(socket);
      },
    },
  });
  stuckBase = `http://127.0.0.1:${stuck.port}`;
}

/**
 * A port that never completes a connection: a listening socket with a backlog of 0 that never accepts,
 * its one queue place taken, so the kernel drops further SYNs and a connect waits until it times out.
 * A Python process (Bun and Node accept on their own): its first line is the port.
 */
let refuser: ReturnType<typeof Bun.spawn> | undefined;
let refuserPort: number;

async function startRefuser(): Promise<void> {
  const code = [
    "import socket, sys",
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(0)",
    "fill = [socket.socket() for _ in range(2)]",
    "for c in fill: c.setblocking(False); c.connect_ex(('127.0.0.1', s.getsockname()[1]))",
    "print(s.getsockname()[1], flush=True)",
    "sys.stdin.read()", // until the test closes its stdin (or dies)
  ].join("\n");
  refuser = Bun.spawn([PYTHON, "-c", code], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const reader = (refuser.stdout as ReadableStream<Uint8Array>).getReader();
  const first = await Promise.race([reader.read(), Bun.sleep(10_000).then(() => null)]);
  if (!first || first.done) throw new Error("the never-accepting server did not start within 10 s");
  refuserPort = Number(new TextDecoder().decode(first.value).trim());
}

type Toolbox = { downloader?: string; sha?: "sha256sum" | "shasum"; gzip?: boolean; uname?: [string, string] };

/** A directory of symlinks to exactly the tools the installer may use (and a `uname` shim). */
function toolbox(t: Toolbox): string {
  const name = [t.downloader ?? "no-dl", t.sha ?? "no-sha", t.gzip ? "gzip" : "", ...(t.uname ?? [])].filter(Boolean).join("-");
  const dir = join(work, "toolbox", name.replace(/[^A-Za-z0-9._-]/g, "_"));
  if (existsSync(dir)) return dir;
  mkdirSync(dir, { recursive: true });
  const tools = ["uname", "mkdir", "mktemp", "awk", "cp", "chmod", "mv", "rm", "cat"];
  if (t.downloader) tools.push(t.downloader);
  if (t.sha) tools.push(t.sha);
  if (t.gzip) tools.push("gzip");
  for (const tool of tools) {
    if (tool === "uname" && t.uname) continue;
    const real = which(tool);
    if (!real) throw new Error(`the installer test needs ${tool} (see .ci/run)`);
    symlinkSync(real, join(dir, tool));
  }
  if (t.uname) {
    const [s, m] = t.uname;
    writeFileSync(join(dir, "uname"), `#!/bin/sh\ncase "$1" in -m) echo '${m}' ;; *) echo '${s}' ;; esac\n`, { mode: 0o755 });
  }
  return dir;
}

type Run = { code: number; stdout: string; stderr: string; dir: string };

/**
 * Runs the installer with PATH = `tools`, a fresh HOME, and AWREPL_INSTALL_DIR = a directory that does
 * not exist yet (so "nothing installed" includes "nothing created"). Asynchronous: the server answers
 * from this process.
 */
async function install(shell: string, tools: string, args: string[] = [], env: Record<string, string> = {}, script = SCRIPT, killAfterMs = 60_000): Promise<Run> {
  const dest = mkdtempSync(join(work, "dest-"));
  const home = mkdtempSync(join(work, "home-"));
  const proc = Bun.spawn([which(shell) as string, script, ...args], {
    env: { PATH: tools, HOME: home, AWREPL_INSTALL_DIR: join(dest, "bin"), ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  // Its downloader too: killed alone, the shell would leave a hung curl holding the output pipes.
  const timer = setTimeout(() => killPids([proc.pid, ...descendants(proc.pid).map((p) => p.pid)]), killAfterMs);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr, dir: join(dest, "bin") };
}

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/** Runs an installed executable; its own HOME and AWREPL_HOME (a stand-in ignores both). */
function runInstalled(path: string, args: string[]) {
  const r = Bun.spawnSync([path, ...args], { env: { PATH: SYSTEM_PATH, HOME: work, AWREPL_HOME: join(work, "state") }, timeout: 30_000 });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** A proxy that refuses at once: nothing leaves this machine, and the error names the URL. */
const OFFLINE = { https_proxy: "http://127.0.0.1:9", HTTPS_PROXY: "http://127.0.0.1:9", http_proxy: "http://127.0.0.1:9" };

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "awrepl-install-test-"));
  release = await makeTestRelease(join(work, "release"));
  startServer();
  startStuckServer();
  await startRefuser();
}, 120_000);

afterAll(async () => {
  server?.stop(true);
  for (const socket of held) socket.end();
  stuck?.stop(true);
  if (refuser) {
    (refuser.stdin as FileSink).end();
    const ended = await Promise.race([refuser.exited, Bun.sleep(5_000).then(() => null)]);
    if (ended === null) refuser.kill("SIGKILL");
    await refuser.exited;
  }
  if (work) rmSync(work, { recursive: true, force: true });
});

const SHELLS = ["dash", "bash"];
const DOWNLOADERS = ["curl", "wget"] as const;

describe.skipIf(!NATIVE_FILE)("install.sh", () => {
  for (const shell of SHELLS) {
    for (const downloader of DOWNLOADERS) {
      // curl runs get gzip (the .gz copy is fetched) and sha256sum; wget runs neither (the plain
      // file) and shasum: every combination of the optional tools is covered under each shell.
      const gzip = downloader === "curl";
      const sha = downloader === "curl" ? "sha256sum" : "shasum";
      const tools = () => toolbox({ downloader, sha, gzip });

      describe(`${shell} + ${downloader} + ${sha}${gzip ? " + gzip" : ""}`, () => {
        test("installs this platform's executable, checked and runnable, and says what to run next", async () => {
          served.length = 0;
          const r = await install(shell, tools(), ["--base-url", `${base}/v`]);
          expect(r.stderr).not.toContain("error");
          expect(r.code).toBe(0);
          const installed = join(r.dir, "awrepl");
          expect(served).toEqual(["/v/SHA256SUMS", `/v/${NATIVE_FILE}${gzip ? ".gz" : ""}`]);
          expect(sha256(installed)).toBe(sha256(join(release, NATIVE_FILE as string)));
          expect(runInstalled(installed, ["--version"]).stdout.trim()).toBe(VERSION);
          expect(r.stderr).toContain(`installed awrepl ${VERSION} (${NATIVE_FILE}, sha256 checked) to ${installed}`);
          expect(r.stderr).toContain(`${installed} --self-test`); // not on PATH: the full path
          expect(r.stderr).toContain(`export PATH="${r.dir}:$PATH"`);
          expect(readdirSync(r.dir)).toEqual(["awrepl"]); // no staged copy left behind
          rmSync(r.dir, { recursive: true, force: true }); // 107 MiB
        }, 60_000);

        test("a download that does not match SHA256SUMS installs nothing and leaves an existing awrepl alone", async () => {
          const keep = mkdtempSync(join(work, "keep-"));
          writeFileSync(join(keep, "awrepl"), "old", { mode: 0o755 });
          const r = await install(shell, tools(), ["--base-url", `${base}/tampered`, "--dir", keep]);
          expect(r.code).toBe(1);
          expect(r.stderr).toContain(`checksum mismatch for ${NATIVE_FILE}${gzip ? ".gz" : ""}: expected `);
          expect(r.stderr).toContain("Nothing was installed");
          expect(readFileSync(join(keep, "awrepl"), "utf8")).toBe("old");
          expect(readdirSync(keep)).toEqual(["awrepl"]);
          // And into a directory that did not exist: it still does not.
          const fresh = await install(shell, tools(), ["--base-url", `${base}/tampered`]);
          expect(fresh.code).toBe(1);
          expect(existsSync(fresh.dir)).toBe(false);
        });

        test("an unknown operating system or processor is named, and nothing is installed", async () => {
          for (const [s, m, named] of [["FreeBSD", "amd64", "FreeBSD amd64"], ["Linux", "riscv64", "Linux riscv64"], ["Darwin", "ppc", "Darwin ppc"]] as const) {
            const r = await install(shell, toolbox({ downloader, sha, uname: [s, m] }), ["--base-url", `${base}/v`]);
            expect(r.code).toBe(1);
            expect(r.stderr).toContain(`no awrepl build for this ${s === "FreeBSD" ? "operating system" : "processor"}: ${named}`);
            expect(r.stderr).toContain(`builds exist for: ${SH_PLATFORMS.join(" ")}`);
            expect(existsSync(r.dir)).toBe(false);
          }
          const win = await install(shell, toolbox({ downloader, sha, uname: ["MINGW64_NT-10.0", "x86_64"] }), ["--base-url", `${base}/v`]);
          expect(win.code).toBe(1);
          expect(win.stderr).toContain("install.ps1");
        });

        test("--platform installs another platform's file without running it; an unknown one is named", async () => {
          const r = await install(shell, tools(), ["--base-url", `${base}/v`, "--platform", OTHER]);
          expect(r.code).toBe(0);
          expect(readFileSync(join(r.dir, "awrepl"), "utf8")).toBe(standIn(`awrepl-${OTHER}`));
          expect(r.stderr).not.toContain("--self-test"); // not for this machine: nothing to run here
          const bad = await install(shell, tools(), ["--base-url", `${base}/v`], { AWREPL_INSTALL_PLATFORM: "sunos-sparc" });
          expect(bad.code).toBe(1);
          expect(bad.stderr).toContain(`unknown platform 'sunos-sparc' (builds exist for: ${SH_PLATFORMS.join(" ")})`);
          expect(existsSync(bad.dir)).toBe(false);
        });

        test("a directory on PATH gets the short command; under GitHub Actions, GITHUB_PATH gets the directory", async () => {
          const onPath = mkdtempSync(join(work, "onpath-"));
          const r = await install(shell, `${tools()}:${onPath}`, ["--base-url", `${base}/v`, "--platform", OTHER, `--dir=${onPath}`]);
          expect(r.code).toBe(0);
          expect(r.stderr).not.toContain("export PATH");
          const gh = join(work, `github_path-${shell}-${downloader}`);
          writeFileSync(gh, "");
          const g = await install(shell, tools(), ["--base-url", `${base}/v`, "--platform", OTHER], { GITHUB_PATH: gh });
          expect(g.code).toBe(0);
          expect(readFileSync(gh, "utf8")).toBe(`${g.dir}\n`);
          expect(g.stderr).not.toContain("export PATH");
        });

        test("without a base URL: GitHub's latest release, the version asked for, or the release the copy came from", async () => {
          const latest = await install(shell, tools(), [], OFFLINE);
          expect(latest.code).toBe(1);
          expect(latest.stderr).toContain("cannot download https://github.com/awrepl/awrepl/releases/latest/download/SHA256SUMS");
          const pinned = await install(shell, tools(), [], { ...OFFLINE, AWREPL_INSTALL_VERSION: "0.2.0" });
          expect(pinned.stderr).toContain("cannot download https://github.com/awrepl/awrepl/releases/download/v0.2.0/SHA256SUMS");
          const own = await install(shell, tools(), [], OFFLINE, join(release, "install.sh"));
          expect(own.stderr).toContain(`cannot download https://github.com/awrepl/awrepl/releases/download/v${VERSION}/SHA256SUMS`);
          expect(existsSync(own.dir)).toBe(false);
        });

        test("an awrepl in the install directory that is a directory, or a link to one, is refused before any download and left alone", async () => {
          for (const kind of ["directory", "link to a directory"] as const) {
            const dir = mkdtempSync(join(work, "occupied-"));
            const real = join(dir, kind === "directory" ? "awrepl" : "elsewhere");
            mkdirSync(real);
            writeFileSync(join(real, "mine"), "mine");
            if (kind !== "directory") symlinkSync(real, join(dir, "awrepl"));
            served.length = 0;
            const r = await install(shell, tools(), ["--base-url", `${base}/v`, "--dir", dir]);
            expect(r.stderr).toContain(`error: ${join(dir, "awrepl")} is a directory (or a link to one): move it away or choose another --dir (nothing was installed)`);
            expect(r.stderr).not.toContain("installed awrepl");
            expect(r.code).toBe(1);
            expect(served).toEqual([]);
            expect(readdirSync(dir).sort()).toEqual(kind === "directory" ? ["awrepl"] : ["awrepl", "elsewhere"]);
            expect(readdirSync(real)).toEqual(["mine"]); // no executable, no staged copy inside it
          }
        });

        test("a server that never answers, stalls midway or never accepts: the timeouts end the run, named, in seconds", async () => {
          // The bounds lowered to 2 s by their variables; the defaults are 30 s to connect, 60 s without data.
          const env = { AWREPL_INSTALL_CONNECT_TIMEOUT: "2", AWREPL_INSTALL_STALL_TIMEOUT: "2" };
          const cases = [
            { what: "accepts, never answers", url: `${stuckBase}/silent`, file: "SHA256SUMS" },
            { what: "stalls after 64 KiB", url: `${stuckBase}/midway`, file: `${NATIVE_FILE}${gzip ? ".gz" : ""}` },
            { what: "never accepts", url: `http://127.0.0.1:${refuserPort}/v`, file: "SHA256SUMS" },
          ];
          for (const c of cases) {
            const started = Date.now();
            const r = await install(shell, tools(), ["--base-url", c.url], env, SCRIPT, 20_000);
            const seconds = (Date.now() - started) / 1000;
            expect({ what: c.what, code: r.code, fast: seconds < 15 }).toEqual({ what: c.what, code: 1, fast: true });
            expect(r.stderr).toContain(`error: cannot download ${c.url}/${c.file}`);
            expect(r.stderr).toContain("AWREPL_INSTALL_CONNECT_TIMEOUT=2, AWREPL_INSTALL_STALL_TIMEOUT=2");
            expect(r.stderr).toContain("nothing was installed");
            expect(existsSync(r.dir)).toBe(false);
          }
        }, 120_000);

        test("a version the server does not have is a clear error", async () => {
          const r = await install(shell, tools(), ["--base-url", `${base}/v9.9.9`]);
          expect(r.code).toBe(1);
          expect(r.stderr).toContain(`cannot download ${base}/v9.9.9/SHA256SUMS (is the version right? nothing was installed)`);
        });
      });
    }
  }

  test("the installed executable passes its self-test (the README's CI recipe)", async () => {
    const r = await install("dash", toolbox({ downloader: "curl", sha: "sha256sum", gzip: true }), ["--base-url", `${base}/v`]);
    expect(r.code).toBe(0);
    const home = mkdtempSync(join(work, "selftest-"));
    try {
      const proc = Bun.spawn([join(r.dir, "awrepl"), "--self-test"], { env: testEnv(home, { AWREPL_PYTHON: PYTHON }), stdout: "pipe", stderr: "pipe" });
      const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
      const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      clearTimeout(timer);
      expect(`${stdout}${stderr}`).toContain("SELF-TEST: awrepl ok");
      expect(code).toBe(0);
    } finally {
      await cleanupHome(home);
      rmSync(r.dir, { recursive: true, force: true });
    }
  }, 90_000);

  test("a timeout that is not a whole number of seconds is named", async () => {
    for (const [name, value] of [["AWREPL_INSTALL_CONNECT_TIMEOUT", "soon"], ["AWREPL_INSTALL_STALL_TIMEOUT", "0"], ["AWREPL_INSTALL_STALL_TIMEOUT", "1.5"]] as const) {
      served.length = 0;
      const r = await install("dash", toolbox({ downloader: "curl", sha: "sha256sum" }), ["--base-url", `${base}/v`], { [name]: value });
      expect(r.stderr).toContain(`error: ${name} must be a whole number of seconds above 0, not '${value}'`);
      expect(r.code).toBe(1);
      expect(served).toEqual([]);
    }
  });

  test("without curl and wget, or without sha256sum and shasum, it says what it needs", async () => {
    const noDownloader = await install("dash", toolbox({ sha: "sha256sum" }), ["--base-url", `${base}/v`]);
    expect(noDownloader.code).toBe(1);
    expect(noDownloader.stderr).toContain("need curl or wget");
    const noSha = await install("dash", toolbox({ downloader: "curl" }), ["--base-url", `${base}/v`]);
    expect(noSha.code).toBe(1);
    expect(noSha.stderr).toContain("need sha256sum or shasum");
    expect(existsSync(noSha.dir)).toBe(false);
  });

  test("the release's files: each platform's executable and its .gz, both installers, all in SHA256SUMS", () => {
    const listed = readFileSync(join(release, "SHA256SUMS"), "utf8").trim().split("\n");
    const names = listed.map((l) => l.slice(66)).sort();
    const expected = [...RELEASE_TARGETS.flatMap((t) => [t.file, `${t.file}.gz`]), "install.sh", "install.ps1"].sort();
    expect(names).toEqual(expected);
    for (const line of listed) expect(sha256(join(release, line.slice(66)))).toBe(line.slice(0, 64));
    // `sha256sum -c` reads the file as written (the README tells users to check by hand this way).
    const check = Bun.spawnSync(["sha256sum", "--quiet", "-c", "SHA256SUMS"], { cwd: release });
    expect(check.stderr.toString()).toBe("");
    expect(check.exitCode).toBe(0);
  });
});

describe("install scripts", () => {
  test("install.sh is POSIX sh: dash -n, bash --posix -n and shellcheck -s sh find nothing", () => {
    const checks = [["dash", "-n"], ["bash", "--posix", "-n"], ["shellcheck", "-s", "sh"]];
    for (const cmd of checks) {
      if (!which(cmd[0] as string)) throw new Error(`${cmd[0]} is missing (.ci/run installs it)`);
      const r = Bun.spawnSync([...cmd, SCRIPT] as string[]);
      expect(`${r.stdout}${r.stderr}`).toBe("");
      expect(r.exitCode).toBe(0);
    }
  });

  test("install.sh knows the release's platforms; both installers and the README name package.json's repository", () => {
    const sh = readFileSync(SCRIPT, "utf8");
    expect(sh).toContain(`PLATFORMS="${SH_PLATFORMS.join(" ")}"`);
    const repo = /github\.com\/([^/]+\/[^/.]+)/.exec(JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).repository.url)?.[1];
    expect(repo).toBeTruthy();
    expect(sh).toContain(`REPO="${repo}"`);
    expect(readFileSync(join(ROOT, "install", "install.ps1"), "utf8")).toContain(`$Repo = '${repo}'`);
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const named = [...readme.matchAll(/github\.com\/([^/\s]+\/[^/\s]+)\/releases/g)].map((m) => m[1]);
    expect(named.length).toBeGreaterThan(0);
    expect(new Set(named)).toEqual(new Set([repo]));
  });
});
