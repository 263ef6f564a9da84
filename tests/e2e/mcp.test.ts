// End to end: the compiled binary's `awrepl mcp`, driven by the MCP SDK's own Client over its stdio
// transport (tests/e2e/mcp_client.ts): the tools, their schemas, results, errors, long cells, progress,
// cancellation and images. The process itself (stdout, EOF, signals, restarts): mcp_process.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cleanupHome, makeHome, run as cli } from "../harness/mod.ts";
import { connectMcp, type Exec, exec, type McpConnection, run, text, tool, withMcp } from "./mcp_client.ts";

describe("awrepl mcp's tools, over the SDK's stdio client", () => {
  let home: string;
  let c: McpConnection;
  beforeAll(async () => {
    home = makeHome();
    c = await connectMcp(home, ["--session", "e2e"], { env: { AWREPL_MCP_HEARTBEAT_MS: "700" } });
  });
  afterAll(async () => {
    await c.close();
    await cleanupHome(home);
  });

  test("lists nine tools with input and output schemas and the spec's annotations", async () => {
    const { tools } = await c.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(Object.keys(byName).sort()).toEqual(["close", "history", "inspect", "interrupt", "reset", "run", "sessions", "variables", "wait"]);
    for (const t of tools) {
      expect(t.inputSchema.type).toBe("object");
      expect(t.outputSchema?.type).toBe("object");
      expect(t.description?.length).toBeGreaterThan(20);
      // Loose results: a strict client must not reject a result that carries a field added later.
      expect(t.outputSchema?.additionalProperties).not.toBe(false);
    }
    const run = byName.run!;
    expect(run.inputSchema.required).toEqual(["code"]);
    expect(Object.keys(run.inputSchema.properties ?? {}).sort()).toEqual(["code", "idempotency_key", "max_output", "session", "timeout_ms", "wait_ms"]);
    expect((run.outputSchema?.properties as Record<string, { enum?: string[] }>).status?.enum).toEqual(["ok", "error", "timeout", "interrupted", "died", "running", "idle"]);
    const hints = (n: string) => {
      const a = byName[n]!.annotations!;
      return [a.readOnlyHint, a.destructiveHint, a.idempotentHint, a.openWorldHint];
    };
    expect(hints("run")).toEqual([false, true, false, true]);
    expect(hints("wait")).toEqual([true, false, false, false]);
    expect(hints("variables")).toEqual([true, false, true, false]);
    expect(hints("history")).toEqual([true, false, true, false]);
    expect(hints("close")).toEqual([false, true, true, false]);
  });

  test("x = 41 then x + 1 gives 42 in structuredContent; `awrepl -s e2e run` sees the same x", async () => {
    const first = await run(c.client, "x = 41");
    expect(exec(first).status).toBe("ok");
    expect(text(first)).toBe("(no output)");
    const r = await run(c.client, "print('hi')\nx + 1");
    expect(r.isError).toBeFalsy();
    expect(exec(r)).toMatchObject({ value: "42", stdout: "hi\n", session: "e2e" });
    expect(text(r)).toBe("hi\n42\n");
    const shell = await cli(["-s", "e2e", "run", "x"], { home });
    expect(shell.stdout).toBe("41\n");
    expect(shell.code).toBe(0);
  });

  test("a Python exception is an ordinary result, its text the CLI's short traceback", async () => {
    const r = await run(c.client, "def f():\n    return 1/0\ndef g():\n    return f()\ng()");
    expect(r.isError).toBeFalsy();
    expect(exec(r).status).toBe("error");
    expect(exec(r).exception).toBe("ZeroDivisionError: division by zero");
    expect(exec(r).traceback).toContain("Traceback");
    expect(text(r)).toContain("return 1/0");
    expect(text(r)).toContain("the full traceback is in the result's `traceback` field");
    expect(text(r)).not.toContain("--traceback");
    expect(text(r).trimEnd().endsWith("ZeroDivisionError: division by zero")).toBe(true);
  });

  test("awrepl's own failures are isError results with the error code; bad arguments are refused", async () => {
    const missing = await tool(c.client, "inspect", { name: "no_such_name" });
    expect(missing.isError).toBe(true);
    expect(text(missing)).toContain("(error code: name_not_found)");
    const noSession = await tool(c.client, "variables", { session: "never-created" });
    expect(noSession.isError).toBe(true);
    expect(text(noSession)).toContain("(error code: session_not_found)");
    expect((noSession._meta as Record<string, { code: string }>)["awrepl/error"]?.code).toBe("session_not_found");
    expect(noSession.structuredContent).toBeUndefined();
    const misspelt = await tool(c.client, "run", { code: "1", timeout: 5 });
    expect(misspelt.isError).toBe(true);
    expect(text(misspelt)).toContain("timeout");
    const badName = await run(c.client, "1", { session: "../etc" });
    expect(badName.isError).toBe(true);
    expect(text(badName)).toContain("session");
  });

  test("a timeout is an ordinary result with status timeout", async () => {
    const r = await run(c.client, "import time\ntime.sleep(30)", { timeout_ms: 300 });
    expect(r.isError).toBeFalsy();
    expect(exec(r).status).toBe("timeout");
    expect(text(r)).toContain("Timeout");
  });

  test("a long cell returns running after wait_ms and runs on; a second run is refused; wait collects the result", async () => {
    const code = "import time\nfor i in range(8):\n    print('step', i, flush=True)\n    time.sleep(0.25)\n'done'";
    const r = await run(c.client, code, { wait_ms: 700, timeout_ms: 0 });
    expect(exec(r).status).toBe("running");
    expect(exec(r).stdout).toContain("step 0");
    expect(text(r)).toContain("Call `wait`");
    const busy = await run(c.client, "1");
    expect(busy.isError).toBe(true);
    expect(text(busy)).toContain("(error code: session_busy)");
    expect(text(busy)).toContain("`wait`");
    const w = await tool(c.client, "wait", { wait_ms: 20_000 });
    expect(exec(w)).toMatchObject({ status: "ok", value: "'done'" });
    expect(exec(w).stdout).toContain("step 7");
    const again = await tool(c.client, "wait", {});
    expect(exec(again).status).toBe("idle");
    expect(exec(again).notice).toContain("Nothing to wait for");
  });

  test("a retry with the same idempotency_key runs nothing: the first result, replayed, also while it still runs; other code is refused", async () => {
    expect(exec(await run(c.client, "appended = []")).status).toBe("ok");
    const code = "import time\ntime.sleep(1)\nappended.append(1)\nlen(appended)";
    const first = await run(c.client, code, { idempotency_key: "retry-1", wait_ms: 100 });
    expect(exec(first).status).toBe("running");
    // The host retried (it never saw an answer): this waits for the first cell instead of running it again.
    const retry = await run(c.client, code, { idempotency_key: "retry-1", wait_ms: 20_000 });
    expect(exec(retry)).toMatchObject({ status: "ok", value: "1", replayed: true });
    expect(text(retry)).toContain("replayed");
    expect(exec(await tool(c.client, "wait", { wait_ms: 20_000 }))).toMatchObject({ value: "1" });
    const later = await run(c.client, code, { idempotency_key: "retry-1" });
    expect(exec(later)).toMatchObject({ value: "1", replayed: true });
    const other = await run(c.client, "appended.clear()", { idempotency_key: "retry-1" });
    expect(other.isError).toBe(true);
    expect(text(other)).toContain("retry-1");
    expect(exec(await run(c.client, "len(appended)")).value).toBe("1");
  });

  test("wait returns running again while the cell is not done, with the output so far", async () => {
    const r = await run(c.client, "import time\nprint('begun', flush=True)\ntime.sleep(1.5)\nprint('ended')\n7", { wait_ms: 200, timeout_ms: 0 });
    expect(exec(r).status).toBe("running");
    const w1 = await tool(c.client, "wait", { wait_ms: 300 });
    expect(exec(w1).status).toBe("running");
    expect(exec(w1).stdout).toBe("begun\n");
    const w2 = await tool(c.client, "wait", { wait_ms: 20_000 });
    expect(exec(w2)).toMatchObject({ status: "ok", value: "7", stdout: "begun\nended\n" });
  });

  test("parallel calls on one session are queued in arrival order, not refused", async () => {
    const [a, b] = await Promise.all([run(c.client, "import time\ntime.sleep(0.3)\npar = 1"), run(c.client, "par + 1")]);
    expect(exec(a).status).toBe("ok");
    expect(exec(b).value).toBe("2");
  });

  test("progress notifications: on output at most twice a second, and a heartbeat in silence", async () => {
    const seen: { progress: number; message?: string; at: number }[] = [];
    const t0 = performance.now();
    const r = await c.client.callTool(
      { name: "run", arguments: { code: "import time\nfor i in range(10):\n    print('tick', i, flush=True)\n    time.sleep(0.1)\ntime.sleep(2.2)\n'end'" } },
      { onprogress: (p) => seen.push({ progress: p.progress, message: p.message, at: performance.now() - t0 }) },
    );
    expect(exec(r).value).toBe("'end'");
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.progress).toBeGreaterThan(seen[i - 1]!.progress);
    expect(seen.some((p) => /^running \d+\.\d s: tick \d$/.test(p.message ?? ""))).toBe(true);
    // Ten output lines in about a second give a few notifications (at most one per 500 ms), not ten.
    // Once the last line was reported there is no more output: anything later is a heartbeat (every
    // 700 ms of silence here; the cell then sleeps 2.2 s).
    const last = seen.findIndex((p) => p.message?.endsWith("tick 9"));
    expect(last).toBeGreaterThanOrEqual(0);
    expect(last + 1).toBeLessThanOrEqual(5);
    expect(seen.length).toBeGreaterThan(last + 1);
  });

  test("cancelling a call interrupts its cell; the next call sees the state", async () => {
    await run(c.client, "n = 0");
    const ac = new AbortController();
    const call = c.client.callTool({ name: "run", arguments: { code: "while True:\n    n += 1", timeout_ms: 0 } }, { signal: ac.signal });
    setTimeout(() => ac.abort("user pressed Esc"), 400);
    expect(await call.then(() => "resolved", () => "rejected")).toBe("rejected");
    const r = await run(c.client, "n > 0");
    expect(exec(r)).toMatchObject({ status: "ok", value: "True" });
    expect(exec(r).notice).toBeUndefined();
    // Nothing of it was kept: the agent withdrew it.
    expect(exec(await tool(c.client, "wait", {})).status).toBe("idle");
  });

  test("an image from awrepl.emit comes back as image content, its path in the text", async () => {
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    const r = await run(c.client, `import awrepl\nawrepl.emit({'text/plain': '<Figure>', 'image/png': '${png}'})`);
    const images = (r.content as { type: string; data?: string; mimeType?: string }[]).filter((b) => b.type === "image");
    expect(images).toHaveLength(1);
    expect(images[0]).toMatchObject({ mimeType: "image/png", data: png });
    const path = exec(r).display[0]!["image/png"] as string;
    expect(path.startsWith("/")).toBe(true);
    expect(text(r)).toContain(`[image/png] ${path}`);
    // structuredContent carries the path, never base64.
    expect(JSON.stringify(r.structuredContent)).not.toContain(png);
  });

  test("a matplotlib plot comes back as one PNG image content, its file's size in the entry's metadata", async () => {
    const r = await run(c.client, "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 1.5), dpi=50)\nplt.plot([1, 3, 2])\nplt.show()");
    expect(exec(r).status).toBe("ok");
    const images = (r.content as { type: string; data?: string; mimeType?: string }[]).filter((b) => b.type === "image");
    expect(images).toHaveLength(1);
    const png = Buffer.from(images[0]!.data!, "base64");
    expect(png.subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a");
    expect(png.readUInt32BE(16)).toBe(100); // 2 in x 50 dpi
    const entry = exec(r).display[0]!;
    expect(entry.metadata?.["image/png"]?.bytes).toBe(png.length);
    expect(text(r)).toContain(`[image/png] ${entry["image/png"]}`);
  });

  test("interrupt stops the running cell and returns its result", async () => {
    const r = await run(c.client, "import time\nprint('begun', flush=True)\ntime.sleep(60)", { wait_ms: 300, timeout_ms: 0 });
    expect(exec(r).status).toBe("running");
    const i = await tool(c.client, "interrupt", {});
    const sc = i.structuredContent as { interrupted: boolean; result?: Exec };
    expect(sc.interrupted).toBe(true);
    expect(sc.result).toMatchObject({ status: "interrupted", stdout: "begun\n" });
    expect(exec(await run(c.client, "'free'")).value).toBe("'free'");
  });

  test("a client of the 2026-07-28 revision (no initialize handshake) is served too, progress included", async () => {
    await withMcp(
      home,
      ["--session", "e2e"],
      async (modern) => {
        const seen: string[] = [];
        const r = await modern.client.callTool({ name: "run", arguments: { code: "import time\nprint('m', flush=True)\ntime.sleep(0.8)\n6 * 7" } }, { onprogress: (p) => seen.push(p.message ?? "") });
        expect(exec(r).value).toBe("42");
        expect(seen.some((m) => m.endsWith(": m"))).toBe(true);
      },
      { client: { versionNegotiation: { mode: { pin: "2026-07-28" } } } },
    );
  });

  test("variables, inspect, sessions, reset, close", async () => {
    await run(c.client, "import math\ndata = {'a': [1, 2, 3]}", { session: "other" });
    const v = await tool(c.client, "variables", { session: "other" });
    expect((v.structuredContent as { variables: Record<string, string> }).variables.data).toBe("dict[str, list] len 1: {'a': [1, 2, 3]}");
    const i = await tool(c.client, "inspect", { name: "data", session: "other" });
    expect((i.structuredContent as { type: string }).type).toBe("dict");
    expect((i.structuredContent as { dir: string[] }).dir).not.toContain("__len__");
    const full = await tool(c.client, "inspect", { name: "data", full: true, session: "other" });
    expect((full.structuredContent as { dir: string[] }).dir).toContain("__len__");
    expect(text(full)).toContain("__len__");
    const s = await tool(c.client, "sessions");
    const sc = s.structuredContent as { sessions: { name: string }[]; default_session: string };
    expect(sc.sessions.map((x) => x.name)).toContain("other");
    expect(sc.default_session).toBe("e2e");
    expect(text(s)).toContain("Default session of this server: e2e");
    await tool(c.client, "reset", { session: "other" });
    const after = await tool(c.client, "variables", { session: "other" });
    expect((after.structuredContent as { variables: Record<string, string> }).variables).toEqual({});
    const closed = await tool(c.client, "close", { session: "other" });
    expect((closed.structuredContent as { closed: boolean }).closed).toBe(true);
    const gone = await tool(c.client, "variables", { session: "other" });
    expect(text(gone)).toContain("session_not_found");
  });
});
