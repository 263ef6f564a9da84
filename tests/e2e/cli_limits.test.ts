// Resource limits and the sandbox's allow list through the command line (issue 24): the compiled
// binary, its supervisor and real workers, under the mechanism this machine gives (cgroup v1 as root
// here, rlimits elsewhere: each test reads which one from `sessions --json` and asserts what that
// mechanism does), a bounded fork bomb, a real HTTP server on 127.0.0.1 behind the allow list, and the
// usage errors. Every test has its own state directory and project directory, and stops what it started.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import type { SessionInfo } from "../../lib/protocol/supervisor.ts";
import { cleanupHome, makeHome, requireBwrap, run, tempHome } from "../harness/mod.ts";
import { forkCell } from "./limits_cells.ts";
import { exec, run as mcpRun, withMcp } from "./mcp_client.ts";

const MiB = 1024 * 1024;
let home: string;
let project: ReturnType<typeof tempHome>;
let cwd: string;
let servers: Server[];

beforeEach(() => {
  home = makeHome();
  project = tempHome("awrepl-project-");
  cwd = realpathSync(project.home);
  servers = [];
});
afterEach(async () => {
  for (const s of servers) s.close();
  await cleanupHome(home);
  project.remove();
});

const awrepl = (args: string[], timeoutMs = 30_000) => run(args, { home, cwd, timeoutMs });

async function sessions(): Promise<SessionInfo[]> {
  const r = await awrepl(["sessions", "--json"]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as SessionInfo[];
}

async function limitsOf(name: string): Promise<SessionInfo["limits"]> {
  return (await sessions()).find((s) => s.name === name)?.limits;
}

function expectUsage(r: { code: number | null; stdout: string; stderr: string }, ...mentions: string[]): void {
  expect(r.code).toBe(2);
  expect(r.stdout).toBe("");
  expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
  for (const m of mentions) expect(r.stderr).toContain(m);
}

describe("memory", () => {
  test("--memory 256M: an allocation of 400 MiB ends as this machine's mechanism says (cgroup: died, the limit named, exit 125; rlimit: MemoryError)", async () => {
    expect((await awrepl(["-s", "a", "--memory", "256M", "run", "kept = 1"])).code).toBe(0);
    const limits = await limitsOf("a");
    expect(limits?.limits).toEqual({ memory_bytes: 256 * MiB });
    const mechanism = limits?.mechanisms.memory;
    expect(mechanism).toMatch(/^(cgroup v[12]|rlimit)$/);
    expect(limits?.memory_bytes).toBeGreaterThan(0);
    const r = await awrepl(["-s", "a", "run", "--json", "x = bytearray(400 << 20)"]);
    const result = JSON.parse(r.stdout);
    if (mechanism === "rlimit") {
      expect(r.code).toBe(1);
      expect(result.status).toBe("error");
      expect(result.exception).toStartWith("MemoryError");
      expect((await awrepl(["-s", "a", "run", "kept"])).stdout.trim()).toBe("1");
    } else {
      expect(r.code).toBe(125);
      expect(result.status).toBe("died");
      expect(result.exception).toContain(`memory limit 256 MiB reached (${mechanism})`);
      // The session goes on, in a fresh worker with the same limit; the next result says the state went.
      const next = await awrepl(["-s", "a", "run", "--json", "'kept' in globals()"]);
      expect(next.code).toBe(0);
      expect(JSON.parse(next.stdout).value).toBe("False");
      expect((await limitsOf("a"))?.limits).toEqual({ memory_bytes: 256 * MiB });
    }
  }, 90_000);
});

describe("processes", () => {
  test("--max-procs 32: a fork bomb fails inside the cell (BlockingIOError); the session is usable after, another session is not limited", async () => {
    const bomb = await awrepl(["-s", "p", "--max-procs", "32", "run", forkCell(200)], 60_000);
    expect(bomb.code).toBe(0);
    const [count, err] = bomb.stdout.trim().split(" ");
    expect(err).toBe("BlockingIOError");
    expect(Number(count)).toBeLessThan(32);
    expect(Number(count)).toBeGreaterThan(0);
    expect((await limitsOf("p"))?.limits).toEqual({ max_procs: 32 });
    expect((await awrepl(["-s", "p", "run", "21 * 2"])).stdout.trim()).toBe("42");
    // Another session has no such bound: 40 children are more than 32.
    const other = await awrepl(["-s", "q", "run", forkCell(40)], 60_000);
    expect(other.stdout.trim()).toBe("40 None");
    expect(await limitsOf("q")).toBeUndefined();
  }, 120_000);
});

describe("file size", () => {
  test("--max-file-size 1M: a 2 MiB write is EFBIG in the cell, the file keeps what fit, and nothing else is limited", async () => {
    const r = await awrepl(["-s", "f", "--max-file-size", "1M", "run", "open('big', 'wb').write(b'x' * (2 << 20))"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("OSError: [Errno 27] File too large");
    expect(statSync(join(cwd, "big")).size).toBe(MiB);
    // Output is not a file: 3 MiB of it pass (cut by --max-output as always, not by the limit).
    const out = await awrepl(["-s", "f", "run", "--max-output", "0", "print('y' * (3 << 20))"]);
    expect(out.code).toBe(0);
    expect(out.stdout.length).toBe((3 << 20) + 1);
    const limits = await limitsOf("f");
    expect(limits?.limits).toEqual({ max_file_bytes: MiB });
    expect(limits?.mechanisms).toEqual({ file_size: "rlimit" });
    const text = await awrepl(["sessions"]);
    expect(text.stdout).toContain("LIMITS");
    expect(text.stdout).toContain("file 1.0M");
  }, 60_000);
});

describe("the saved spec", () => {
  test("the limits survive `daemon stop`: the session re-created from its spec has them, and a call asking for others is told", async () => {
    expect((await awrepl(["-s", "k", "--memory", "256M", "--max-file-size", "1M", "run", "x = 1"])).code).toBe(0);
    const before = (await limitsOf("k"))?.limits;
    expect(before).toEqual({ memory_bytes: 256 * MiB, max_file_bytes: MiB });
    const specFile = join(home, "snapshots", "k", "spec.json");
    expect(existsSync(specFile)).toBe(true);
    expect(JSON.parse(readFileSync(specFile, "utf8")).limits).toEqual({ memory_bytes: 256 * MiB, max_file_bytes: MiB });
    expect((await awrepl(["daemon", "stop"])).code).toBe(0);
    // No flags now: the saved spec decides.
    const again = await awrepl(["-s", "k", "run", "x"]);
    expect(again.stdout.trim()).toBe("1");
    expect((await limitsOf("k"))?.limits).toEqual(before);
    // Other limits for a session that has its own: it keeps them, and says so.
    const asked = await awrepl(["-s", "k", "--memory", "1G", "run", "--json", "x + 1"]);
    expect(JSON.parse(asked.stdout).notice).toContain("Session k keeps its limits (memory 256 MiB, max file size 1 MiB)");
    expect((await limitsOf("k"))?.limits).toEqual(before);
  }, 90_000);
});

describe("the config", () => {
  test("`limits` in the project's awrepl.jsonc (sizes with units) limits a new session; a flag replaces its own key", async () => {
    await Bun.write(join(cwd, "awrepl.jsonc"), `{"limits": {"memory": "512M", "maxFileSize": "1M"}}`);
    expect((await awrepl(["-s", "c", "--max-file-size", "2M", "run", "1"])).code).toBe(0);
    expect((await limitsOf("c"))?.limits).toEqual({ memory_bytes: 512 * MiB, max_file_bytes: 2 * MiB });
  }, 60_000);
});

describe("serve", () => {
  test("`serve --max-file-size 1M`, named and unnamed: its session has the limit", async () => {
    const cell = "open('b', 'wb').write(b'x' * (2 << 20))\n";
    const named = await run(["-s", "sv", "--max-file-size", "1M", "serve"], { home, cwd, input: cell });
    expect(named.stderr).toContain("OSError: [Errno 27] File too large");
    expect((await limitsOf("sv"))?.limits).toEqual({ max_file_bytes: MiB });
    const own = await run(["--max-file-size", "1M", "serve"], { home, cwd, input: cell });
    expect(own.stderr).toContain("OSError: [Errno 27] File too large");
  }, 60_000);
});

describe("MCP", () => {
  test("`awrepl mcp --max-file-size 1M`: the sessions it creates have the limit (a global flag, as --sandbox is)", async () => {
    await withMcp(
      home,
      ["--max-file-size", "1M", "--session", "m"],
      async ({ client }) => {
        const r = exec(await mcpRun(client, "open('big', 'wb').write(b'x' * (2 << 20))"));
        expect(r.status).toBe("error");
        expect(r.exception).toBe("OSError: [Errno 27] File too large");
      },
      { cwd },
    );
    expect((await limitsOf("m"))?.limits).toEqual({ max_file_bytes: MiB });
  }, 60_000);
});

describe("--sandbox-allow", () => {
  async function server(name: string): Promise<number> {
    const s = createServer((req, res) => res.end(`${name} ${req.url}`));
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    return (s.address() as { port: number }).port;
  }

  const FETCH = (allowed: number, other: number) => `
import urllib.request, urllib.error
print(urllib.request.urlopen("http://127.0.0.1:${allowed}/x", timeout=10).read().decode())
try:
    urllib.request.urlopen("http://127.0.0.1:${other}/y", timeout=10)
    print("other: reached")
except urllib.error.HTTPError as e:
    print("other:", e.code)
`;

  test("a cell reaches the allowed 127.0.0.1 port with urllib through the proxy; another port is refused", async () => {
    requireBwrap();
    const allowed = await server("allowed");
    const other = await server("other");
    const r = await awrepl(["--sandbox", "--env", "AWREPL_E2E_HOME", "--sandbox-allow", `127.0.0.1:${allowed}`, "run", FETCH(allowed, other)], 60_000);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim().split("\n")).toEqual(["allowed /x", "other: 403"]);
  }, 90_000);

  test("a named session keeps its allow list in its saved profile", async () => {
    requireBwrap();
    const allowed = await server("allowed");
    const other = await server("other");
    const r = await awrepl(["-s", "net", "--sandbox", "--env", "AWREPL_E2E_HOME", "--sandbox-allow", `127.0.0.1:${allowed}`, "run", FETCH(allowed, other)], 60_000);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim().split("\n")).toEqual(["allowed /x", "other: 403"]);
    expect(JSON.parse(readFileSync(join(home, "snapshots", "net", "spec.json"), "utf8")).sandbox.allow).toEqual([`127.0.0.1:${allowed}`]);
    expect((await awrepl(["daemon", "stop"])).code).toBe(0);
    const again = await awrepl(["-s", "net", "run", FETCH(allowed, other)], 60_000);
    expect(again.stdout.trim().split("\n")).toEqual(["allowed /x", "other: 403"]);
  }, 120_000);
});

describe("usage errors name the flag and the value", () => {
  test("bad sizes, counts and percentages; limits below what a worker needs; the allow list without a sandbox or with the network", async () => {
    expectUsage(await awrepl(["--memory", "lots", "run", "1"]), "--memory", '"lots"');
    expectUsage(await awrepl(["-s", "x", "--memory", "lots", "run", "1"]), "--memory", '"lots"');
    expectUsage(await awrepl(["--max-procs", "0", "run", "1"]), "--max-procs", '"0"');
    expectUsage(await awrepl(["--max-procs", "4", "run", "1"]), "max_procs (--max-procs) must be at least 8, not 4");
    expectUsage(await awrepl(["-s", "x", "--memory", "1M", "run", "1"]), "memory_bytes (--memory) must be at least 32 MiB, not 1 MiB");
    expectUsage(await awrepl(["--cpu", "fast", "run", "1"]), "--cpu", '"fast"');
    expectUsage(await awrepl(["--max-file-size", "-1", "run", "1"]), "--max-file-size", '"-1"');
    expectUsage(await awrepl(["--limits-best-effort", "run", "1"]), "--limits-best-effort goes with a limit");
    expectUsage(await awrepl(["--sandbox-allow", "pypi.org", "run", "1"]), "--sandbox-allow shapes a sandbox: add --sandbox");
    expectUsage(await awrepl(["--sandbox", "--sandbox-net", "--sandbox-allow", "pypi.org", "run", "1"]), "--sandbox-allow pypi.org cannot go with --sandbox-net");
    // Nothing was created by any of them.
    expect(await sessions()).toEqual([]);
  }, 60_000);

  test("--help lists every new flag", async () => {
    const help = await awrepl(["--help"]);
    for (const flag of ["--memory <size>", "--max-procs <n>", "--cpu <percent>", "--max-file-size <size>", "--limits-best-effort", "--sandbox-allow <host[:port]>"]) {
      expect(help.stdout).toContain(flag);
    }
  });
});
