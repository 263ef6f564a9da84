// `awrepl mcp`: a Model Context Protocol server over stdio (the official SDK,
// @modelcontextprotocol/server 2.x) whose tools are clients of the supervisor's named sessions, as
// `awrepl -s NAME run` is. Loaded only by `awrepl mcp` (a dynamic import, a chunk of its own in the
// split build): the SDK costs the other commands nothing.
//
// The process: JSON-RPC on stdout and nothing else (diagnostics go to stderr; a supervisor it starts
// is detached with its output in its own log, and workers are the supervisor's children). It ends
// when stdin reaches EOF, errors or closes, when stdout breaks, when its transport closes for any
// reason, on SIGTERM/SIGINT/SIGHUP, and when its parent process goes away — a closed transport alone
// would not end it: this process holds supervisor connections, which keep it alive. Ending closes
// those connections; the cells it sent are detached, so they run on and their results are kept for
// the next server's `wait`. stdin is read through fs.createReadStream on fd 0, not process.stdin:
// Bun's process.stdin fails with EPERM under some hosts' process set-ups (Codex's app server). The
// transport is our own (stdio_transport.ts: bounded lines, JSON-RPC's errors answered); the SDK's
// serveStdio does the rest.
import { createReadStream } from "node:fs";
import type { Readable, Writable } from "node:stream";
import { McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { setClientKind } from "../client/connection.ts";
import { StdioLineTransport } from "./stdio_transport.ts";
import { instructions, Tools, type ToolsOptions } from "./tools.ts";

/** How often the server checks that its parent is still there (a host that died without closing our stdin). */
const PARENT_CHECK_MS = 2_000;

export type McpServerOptions = ToolsOptions & {
  version: string;
  /** Say on stderr why the server ended (AWREPL_DEBUG). */
  debug?: boolean;
  /** For tests: streams instead of fd 0 / process.stdout; signals and the parent watchdog are then off. */
  stdin?: Readable;
  stdout?: Writable;
};

/**
 * Serves MCP on stdin/stdout until stdin ends (or a signal, or the parent goes away). Resolves with the
 * exit status; the caller exits (main.ts does, after draining stdout and stderr).
 */
export function runMcpServer(options: McpServerOptions): Promise<number> {
  // Its cells say "mcp" in the sessions' histories.
  setClientKind("mcp");
  const tools = new Tools(options);
  const real = options.stdin === undefined;
  // fd 0 read directly (see the header); autoClose off: the process exits right after anyway.
  const stdin = options.stdin ?? createReadStream("", { fd: 0, autoClose: false, highWaterMark: 64 * 1024 });
  const stdout = options.stdout ?? process.stdout;
  const transport = new StdioLineTransport(stdin, stdout);
  const handle = serveStdio(
    () => {
      const server = new McpServer({ name: "awrepl", version: options.version }, { capabilities: { tools: {} }, instructions: instructions(options) });
      tools.register(server);
      return server;
    },
    { transport, onerror: (e) => process.stderr.write(`awrepl mcp: ${e.message}\n`) },
  );

  return new Promise<number>((resolve) => {
    let ended = false;
    const timers: ReturnType<typeof setInterval>[] = [];
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      if (options.debug) process.stderr.write(`awrepl mcp: ending (${why})\n`);
      for (const t of timers) clearInterval(t);
      stdin.destroy(); // off the event loop: a hung-up fd must not keep waking it
      void Promise.allSettled([handle.close(), tools.closeAll()]).then(() => resolve(0));
    };
    // The transport closes on EOF and on a broken pipe, and the SDK may close it: either way we end. The
    // stream's own events too, whatever the transport makes of them (the SDK's paused stdin on a long
    // line, after which EOF never came). autoClose off: at EOF only `end` fires; `close` and `error`
    // cover a destroyed or broken pipe.
    void transport.closed.then((why) => end(`transport closed: ${why}`));
    stdin.once("end", () => end("stdin EOF"));
    stdin.once("close", () => end("stdin closed"));
    stdin.once("error", (e) => end(`stdin: ${e.message}`));
    stdout.once("error", (e) => end(`stdout: ${e.message}`));
    if (real) {
      for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.once(sig, () => end(sig));
      // A parent that died without closing our stdin (it was shared, say): we were re-parented. (A
      // parent already gone when we start leaves nothing to compare with: EOF remains.)
      const parent = process.ppid;
      const watchdog = setInterval(() => {
        if (process.ppid !== parent) end("parent process gone");
      }, PARENT_CHECK_MS);
      watchdog.unref?.();
      timers.push(watchdog);
    }
  });
}
