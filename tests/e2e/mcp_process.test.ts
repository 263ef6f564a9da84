// End to end: the `awrepl mcp` process. stdout carries JSON-RPC only; stdin EOF, SIGTERM and the
// client's close end it at once and leave nothing behind; a host that kills (SIGKILL) and restarts the
// server loses neither the cell nor its result; the default session and --cwd; a missing interpreter.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn, spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { alive, awreplBinary, cleanupHome, COMMAND_TIMEOUT_MS, makeHome, run as cli, waitFor, withHome } from "../harness/mod.ts";
import { connectMcp, exec, type McpConnection, mcpEnv, rawServer, run, text, tool, within, withMcp } from "./mcp_client.ts";

/** Every test here ends its servers within this long. */
const EXIT_MS = 5_000;

/** The process has exited and waits to be reaped (or is gone already). Linux. */
function zombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

/** What a host does to a stdio server now and then: SIGKILL, no EOF first. */
async function killServer(c: McpConnection): Promise<void> {
  process.kill(c.pid, "SIGKILL");
  await waitFor(() => !alive(c.pid), EXIT_MS, "the killed server to go");
  await c.close().catch(() => {});
}

describe("the awrepl mcp process", () => {
  let home: string;
  beforeAll(() => {
    home = makeHome();
  });
  afterAll(async () => {
    await cleanupHome(home);
  });

  test("stdout carries JSON-RPC only (a supervisor start, a cell writing to fd 1 and a subprocess included); stdin EOF ends the process at once", async () => {
    const s = await rawServer(home, ["--session", "raw"]);
    await s.init(); // the first call starts the supervisor: it must not inherit our stdout
    const code = "import os, subprocess, sys\nprint('to stdout')\nos.write(1, b'fd 1\\n')\nsubprocess.run(['echo', 'child'])\nprint('err', file=sys.stderr)\n7";
    const r = await s.request("tools/call", { name: "run", arguments: { code } });
    expect(r.result.structuredContent).toMatchObject({ value: "7", stdout: "to stdout\nfd 1\nchild\n", stderr: "err\n" });
    const t0 = performance.now();
    s.child.stdin!.end();
    expect(await within(s.exited, EXIT_MS, "exit after EOF")).toBe(0);
    // Closed only when no process holds the pipe: neither the supervisor nor a worker has it.
    await within(s.stdoutClosed, EXIT_MS, "stdout pipe closed");
    expect(performance.now() - t0).toBeLessThan(EXIT_MS);
    expect(s.rest()).toBe("");
    expect(s.lines.length).toBeGreaterThanOrEqual(2);
    for (const line of s.lines) expect(JSON.parse(line).jsonrpc).toBe("2.0");
  });

  test("SIGTERM ends the process with status 0", async () => {
    const s = await rawServer(home, ["--session", "sig"]);
    await s.init();
    s.child.kill("SIGTERM");
    expect(await within(s.exited, EXIT_MS, "exit after SIGTERM")).toBe(0);
  });

  test("a server whose parent died exits even while its stdin stays open", async () => {
    // A shell starts the server in the background, its stdin a FIFO this test holds open, and waits.
    // Once the server answers, the shell is killed: the server is re-parented and must notice by itself.
    const fifo = join(home, "orphan.fifo");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    const holder = openSync(fifo, "r+"); // a writer that never closes (r+: the open does not block)
    try {
      const shell = spawn("/bin/sh", ["-c", `"$0" mcp --session orphan < "$1" & echo "pid $!"; wait`, await awreplBinary(), fifo], { env: mcpEnv(home), stdio: ["ignore", "pipe", "ignore"] });
      let out = "";
      shell.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
      const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "0" } } };
      writeSync(holder, `${JSON.stringify(initialize)}\n`);
      await waitFor(() => out.includes('"serverInfo"'), COMMAND_TIMEOUT_MS, "the initialize reply");
      const pid = Number(/^pid (\d+)$/m.exec(out)?.[1]);
      shell.kill("SIGKILL");
      // Exited (a zombie counts: whoever adopted it may not reap it at once).
      await waitFor(() => !alive(pid) || zombie(pid), 10_000, "the orphaned server to exit");
    } finally {
      closeSync(holder);
    }
  });

  test("the client's close ends the server: no process is left behind", async () => {
    const c = await connectMcp(home, ["--session", "closing"]);
    expect(exec(await run(c.client, "1")).value).toBe("1");
    await c.close();
    await waitFor(() => !alive(c.pid), EXIT_MS, "the server to exit");
  });

  test("SIGKILLed during a detached cell and restarted: the cell ran on and the new server's wait gets its result", async () => {
    const first = await connectMcp(home, ["--session", "killed"]);
    await run(first.client, "steps = 0");
    const code = "import time\nfor i in range(12):\n    steps += 1\n    print('step', i, flush=True)\n    time.sleep(0.1)\n'all done'";
    // Killed while its `run` call is still waiting: the cell was never reported running.
    const call = run(first.client, code, { timeout_ms: 0 });
    call.catch(() => {});
    await new Promise((r) => setTimeout(r, 300));
    await killServer(first);

    await withMcp(home, ["--session", "killed"], async (second) => {
      const w = await tool(second.client, "wait", { wait_ms: 20_000 });
      expect(exec(w)).toMatchObject({ status: "ok", value: "'all done'", session: "killed" });
      expect(exec(w).stdout).toContain("step 11");
      expect(exec(w).notice).toContain("kept for you");
      expect(exec(await run(second.client, "steps")).value).toBe("12");
      // Handed out once.
      expect(exec(await tool(second.client, "wait", {})).status).toBe("idle");
    });
  });

  test("a cell reported running that finishes while nobody waits survives the server's death: the next server's wait gets it", async () => {
    const first = await connectMcp(home, ["--session", "window"]);
    const r = await run(first.client, "import time\ntime.sleep(0.6)\nprint('late')\n'kept'", { wait_ms: 100, timeout_ms: 0 });
    expect(exec(r).status).toBe("running");
    // The result reaches this server (it has the execute open) while the agent is elsewhere...
    await new Promise((r) => setTimeout(r, 1200));
    // ...and the host kills it before the agent calls wait.
    await killServer(first);
    await withMcp(home, ["--session", "window"], async (second) => {
      const w = await tool(second.client, "wait", {});
      expect(exec(w)).toMatchObject({ status: "ok", value: "'kept'", stdout: "late\n" });
    });
  });

  test("stdin EOF while a run call waits for its cell: the server exits at once, the cell runs on, a new server waits for it (running, then done)", async () => {
    const s = await rawServer(home, ["--session", "eof"]);
    await s.init();
    // A host ending (or restarting) this server gracefully: EOF while the call is still in flight.
    void s.request("tools/call", { name: "run", arguments: { code: "import time\ntime.sleep(1.5)\n'outlived'", timeout_ms: 0 } }).catch(() => {});
    await waitFor(() => s.lines.length >= 1, EXIT_MS, "the initialize reply");
    await new Promise((r) => setTimeout(r, 300));
    const t0 = performance.now();
    s.child.stdin!.end();
    expect(await within(s.exited, EXIT_MS, "exit after EOF")).toBe(0);
    expect(performance.now() - t0).toBeLessThan(EXIT_MS);
    await withMcp(home, ["--session", "eof"], async (c) => {
      const early = await tool(c.client, "wait", { wait_ms: 0 });
      expect(exec(early).status).toBe("running");
      expect(text(early)).toContain("did not send");
      const done = await tool(c.client, "wait", { wait_ms: 20_000 });
      expect(exec(done)).toMatchObject({ status: "ok", value: "'outlived'" });
    });
  });

  test("`awrepl -s NAME wait` in a shell collects what a killed server's cell left", async () => {
    const first = await connectMcp(home, ["--session", "shell"]);
    const r = await run(first.client, "import time\ntime.sleep(0.5)\nprint('from the agent')\n3 * 3", { wait_ms: 100, timeout_ms: 0 });
    expect(exec(r).status).toBe("running");
    await killServer(first);
    const w = await cli(["-s", "shell", "wait", "--timeout", "20000"], { home });
    expect(w).toMatchObject({ code: 0, stdout: "from the agent\n9\n" });
    const again = await cli(["-s", "shell", "wait", "--json"], { home });
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ state: "idle" });
    expect(again.stderr).toContain("nothing to wait for");
  });

  test("no interpreter: an isError result with awrepl's code", async () => {
    await withMcp(home, ["--session", "nopy", "--python", "/nonexistent/python3"], async (c) => {
      const r = await run(c.client, "1");
      expect(r.isError).toBe(true);
      expect(text(r)).toContain("(error code: no_interpreter)");
    });
  });
});

describe("the default session and --cwd", () => {
  test("the default session derives from the working directory; --cwd sets it and new sessions' directory", async () => {
    await withHome(async (home) => {
      const dir = join(home, "My Project");
      mkdirSync(dir, { recursive: true });
      const defaultSession = async (c: McpConnection) => ((await tool(c.client, "sessions")).structuredContent as { default_session: string }).default_session;
      await withMcp(
        home,
        [],
        async (c) => {
          expect(await defaultSession(c)).toMatch(/^My-Project-[0-9a-f]{6}$/);
          expect(exec(await run(c.client, "import os\nos.getcwd()")).value).toBe(`'${dir}'`);
        },
        { cwd: dir },
      );
      // Started in / as Claude Desktop does, pointed at the project with --cwd: the same session.
      await withMcp(
        home,
        ["--cwd", dir],
        async (d) => {
          expect(await defaultSession(d)).toMatch(/^My-Project-[0-9a-f]{6}$/);
          expect(exec(await run(d.client, "os.getcwd()")).value).toBe(`'${dir}'`);
        },
        { cwd: "/" },
      );
      const bad = await cli(["mcp", "--cwd", join(home, "nope")], { home, input: "" });
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain("is not a directory");
    });
  });
});

// The issue's own scenario at full length (about 95 s): AWREPL_MCP_SLOW=1 runs it. Every CI run covers
// the same path with a short cell and wait (mcp.test.ts: running, then wait returns the result).
describe.skipIf(!process.env.AWREPL_MCP_SLOW)("a 90 s cell", () => {
  test("with a 2 s wait returns running; wait returns running again after its 50 s, then the result; heartbeats every 10 s", async () => {
    await withHome(async (home) => {
      await withMcp(home, ["--session", "slow"], async (c) => {
        const r = await run(c.client, "import time\ntime.sleep(90)\n'slept'", { wait_ms: 2000, timeout_ms: 0 });
        expect(exec(r).status).toBe("running");
        const beats: number[] = [];
        const first = await c.client.callTool({ name: "wait", arguments: {} }, { onprogress: () => beats.push(performance.now()), timeout: 120_000 });
        expect(exec(first).status).toBe("running");
        expect(beats.length).toBeGreaterThanOrEqual(4); // 10, 20, 30, 40 s
        const second = await c.client.callTool({ name: "wait", arguments: {} }, { timeout: 120_000 });
        expect(exec(second)).toMatchObject({ status: "ok", value: "'slept'" });
        expect(exec(second).duration_ms).toBeGreaterThan(89_000);
      });
    });
  }, 150_000);
});
