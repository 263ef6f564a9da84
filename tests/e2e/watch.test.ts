// `awrepl -s NAME watch` beside an agent: a person's terminal follows the session while an agent runs
// cells through MCP (the SDK's client) and a shell runs one through the CLI; the watcher sees each
// cell's code as it starts, its output, and how it ended, and Ctrl-C ends it with status 0. A watcher
// that does not read loses replies (counted in `dropped`) and never holds up the cell.
import { describe, expect, test } from "bun:test";
import { AWREPL_VERSION, SUPERVISOR_PROTOCOL } from "../../lib/core/version.ts";
import { socketPath } from "../../lib/settings/home.ts";
import { run, start, withHome } from "../harness/mod.ts";
import { exec, run as mcpRun, tool, withMcp } from "./mcp_client.ts";
import { connect } from "node:net";

describe("watch", () => {
  test("follows the cells of an agent (MCP) and a shell (CLI) as they run, until Ctrl-C", () =>
    withHome(async (h) => {
      expect((await run(["-s", "agent", "run", "import time"], { home: h })).code).toBe(0);
      const watcher = await start(["-s", "agent", "watch"], { home: h });
      await watcher.waitForStdout("# watching session agent (1 cell(s) in its history; Ctrl-C to stop)\n");
      await withMcp(h, ["--session", "agent"], async (c) => {
        const r = exec(await mcpRun(c.client, "rows = [i * i for i in range(5)]\nprint('rows ready', flush=True)\ntime.sleep(0.3)\nsum(rows)"));
        expect(r.value).toBe("30");
        // The watcher saw the cell start before it ended, with its output in between.
        await watcher.waitForStdout("# [2] mcp ");
        await watcher.waitForStdout(">>> rows = [i * i for i in range(5)]\n... print('rows ready', flush=True)\n");
        await watcher.waitForStdout("rows ready\n30\n# [2] ok in ");
        expect(exec(await mcpRun(c.client, "1/0")).status).toBe("error");
        await watcher.waitForStdout("ZeroDivisionError: division by zero\n# [3] error in ");
        const h3 = await tool(c.client, "history", { last: 2 });
        expect((h3.structuredContent as { cells: { n: number; client: string }[] }).cells.map((x) => [x.n, x.client])).toEqual([
          [2, "mcp"],
          [3, "mcp"],
        ]);
      });
      expect((await run(["-s", "agent", "run", "print('a person, from a shell')"], { home: h })).code).toBe(0);
      await watcher.waitForStdout("# [4] cli ");
      await watcher.waitForStdout("a person, from a shell\n# [4] ok in ");
      watcher.child.kill("SIGINT");
      const done = await watcher.result;
      expect(done.code).toBe(0);
      expect(done.stderr).toBe("");
      // The transcript, as a person saw it (printed for the record).
      console.log(`--- awrepl -s agent watch ---\n${done.stdout}---`);
      const order = ["# [2] mcp", "rows ready", "# [2] ok", "# [3] mcp", "# [3] error", "# [4] cli", "# [4] ok"].map((s) => done.stdout.indexOf(s));
      expect(order.every((at, i) => at >= 0 && (i === 0 || at > (order[i - 1] as number)))).toBe(true);
      const typo = await run(["-s", "nosuch", "watch"], { home: h });
      expect(typo.code).not.toBe(0);
      expect(typo.stderr).toContain('No session named "nosuch"');
    }), 120_000);

  test("a watcher that does not read loses replies, counted, and the cell is not held up", () =>
    withHome(async (h) => {
      expect((await run(["-s", "loud", "run", "1"], { home: h })).code).toBe(0);
      const socket = connect(socketPath(h));
      await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
      let received = "";
      socket.on("data", (d) => (received += d.toString()));
      socket.write(`${JSON.stringify({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION })}\n`);
      socket.write(`${JSON.stringify({ type: "watch", id: "w", session: "loud" })}\n`);
      const until = async (what: string, cond: () => boolean) => {
        const giveUp = Date.now() + 30_000;
        while (!cond()) {
          if (Date.now() > giveUp) throw new Error(`timed out waiting for ${what}; got ${received.slice(-300)}`);
          await Bun.sleep(20);
        }
      };
      await until("watching", () => received.includes('"event":"watching"'));
      socket.pause(); // a terminal that stopped reading
      try {
        // 40 MB through the session: far more than the watcher's 1 MiB and the socket's buffers hold.
        const loud = await run(["-s", "loud", "run", "--json", "import sys\nfor i in range(40):\n    sys.stdout.write('x' * 1_000_000 + '\\n')\n'done'"], { home: h, timeoutMs: 60_000 });
        expect(loud.code).toBe(0);
        expect(JSON.parse(loud.stdout)).toMatchObject({ status: "ok", value: "'done'", truncated: true });
        socket.resume();
        // Once it reads again, the next cell's replies come, led by how many were left out.
        await Bun.sleep(500);
        expect((await run(["-s", "loud", "run", "'after'"], { home: h })).stdout).toBe("'after'\n");
        await until("the next cell's end", () => received.includes('"n":3,"status":"ok"'));
        const replies = received.trim().split("\n").map((l) => JSON.parse(l) as { event: string; lines?: number; n?: number });
        const dropped = replies.filter((r) => r.event === "dropped");
        expect(dropped.length).toBeGreaterThanOrEqual(1);
        expect(dropped.reduce((n, r) => n + (r.lines ?? 0), 0)).toBeGreaterThan(0);
        // What went out is bounded by the backlog, not by what the cell printed.
        expect(received.length).toBeLessThan(20_000_000);
        expect(replies.some((r) => r.event === "cell" && r.n === 3)).toBe(true);
      } finally {
        socket.destroy();
      }
    }), 120_000);
});
