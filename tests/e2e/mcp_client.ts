// What the `awrepl mcp` end-to-end tests share: the compiled binary driven by the MCP SDK's own Client
// over its stdio transport, and a raw JSON-RPC pipe for what the SDK hides (every stdout line, EOF).
// Beside the tests rather than in tests/harness: only these suites load the MCP client SDK.
import { type ChildProcess, spawn } from "node:child_process";
import { Client } from "@modelcontextprotocol/client";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { awreplBinary, COMMAND_TIMEOUT_MS, PYTHON } from "../harness/mod.ts";
import { deadline, DeadlineError } from "../../lib/core/deadline.ts";
import type { DisplayItem } from "../../lib/protocol/result.ts";

export type ToolResult = Awaited<ReturnType<Client["callTool"]>>;
export type Exec = {
  status: string;
  value: string | null;
  stdout: string;
  stderr: string;
  exception: string | null;
  traceback: string;
  display: DisplayItem[];
  session: string;
  notice?: string;
  duration_ms: number;
};

/**
 * The server's environment: StdioClientTransport forwards only a "safe" subset of ours (HOME, PATH,
 * ...), as real hosts do, so the state directory and the interpreter are passed explicitly.
 * AWREPL_E2E_HOME marks every process of the test for the harness's leftover check.
 */
export function mcpEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  return { ...getDefaultEnvironment(), AWREPL_HOME: home, AWREPL_E2E_HOME: home, AWREPL_PYTHON: PYTHON, NO_COLOR: "1", ...extra };
}

export type McpConnection = {
  client: Client;
  transport: StdioClientTransport;
  /** The server process's pid. */
  pid: number;
  stderr(): string;
  close(): Promise<void>;
};

/** Starts `awrepl mcp ARGS` and connects the SDK's Client (tools listed: results are validated against their output schemas). */
export type ConnectOptions = { cwd?: string; env?: Record<string, string>; client?: ConstructorParameters<typeof Client>[1] };

export async function connectMcp(home: string, args: string[] = [], options: ConnectOptions = {}): Promise<McpConnection> {
  const transport = new StdioClientTransport({ command: await awreplBinary(), args: ["mcp", ...args], env: mcpEnv(home, options.env), cwd: options.cwd ?? home, stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (d) => (stderr += d));
  const client = new Client({ name: "awrepl-e2e", version: "0" }, options.client);
  await client.connect(transport, { timeout: COMMAND_TIMEOUT_MS });
  await client.listTools();
  return { client, transport, pid: transport.pid as number, stderr: () => stderr, close: () => client.close() };
}

/** `fn` with a connected server, closed afterwards whatever happens. */
export async function withMcp<T>(home: string, args: string[], fn: (c: McpConnection) => Promise<T>, options: ConnectOptions = {}): Promise<T> {
  const c = await connectMcp(home, args, options);
  try {
    return await fn(c);
  } finally {
    await c.close();
  }
}

export const exec = (r: ToolResult) => r.structuredContent as unknown as Exec;
export const text = (r: ToolResult) =>
  (r.content as { type: string; text?: string }[])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("");
export const run = (client: Client, code: string, extra: Record<string, unknown> = {}) => client.callTool({ name: "run", arguments: { code, ...extra } });
export const tool = (client: Client, name: string, args: Record<string, unknown> = {}) => client.callTool({ name, arguments: args });

export type RawServer = {
  child: ChildProcess;
  /** Every line the server wrote to stdout. */
  lines: string[];
  request(method: string, params: unknown): Promise<{ result?: any; error?: unknown }>;
  notify(method: string, params?: unknown): void;
  init(): Promise<void>;
  exited: Promise<number | string>;
  /** Resolves when no process holds the server's stdout pipe any more (not the supervisor, not a worker). */
  stdoutClosed: Promise<void>;
  /** What is left on stdout after the last newline. */
  rest(): string;
};

/** `awrepl mcp ARGS` on raw pipes: JSON-RPC by hand, every stdout line kept. */
export async function rawServer(home: string, args: string[]): Promise<RawServer> {
  const child = spawn(await awreplBinary(), ["mcp", ...args], { env: mcpEnv(home), cwd: home, stdio: ["pipe", "pipe", "pipe"] });
  const lines: string[] = [];
  let buf = "";
  const waiters = new Map<number, (m: { result?: unknown; error?: unknown }) => void>();
  child.stdout!.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      lines.push(line);
      try {
        const m = JSON.parse(line);
        if (m.id !== undefined) waiters.get(m.id)?.(m);
      } catch {
        // not JSON: the test that reads `lines` reports it
      }
    }
  });
  child.stderr!.resume();
  let id = 0;
  const request = (method: string, params: unknown) => {
    const n = ++id;
    const answer = new Promise<{ result?: any; error?: unknown }>((resolve) => {
      waiters.set(n, resolve);
      child.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", id: n, method, params })}\n`);
    });
    return deadline(answer, COMMAND_TIMEOUT_MS, `an answer to ${method}`).catch((err) => {
      throw err instanceof DeadlineError ? new Error(`No answer to ${method} within ${COMMAND_TIMEOUT_MS} ms`) : err;
    });
  };
  const notify = (method: string, params?: unknown) => child.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", method, ...(params ? { params } : {}) })}\n`);
  const exited = new Promise<number | string>((r) => child.once("exit", (code, sig) => r(code ?? String(sig))));
  const stdoutClosed = new Promise<void>((r) => child.stdout!.once("close", () => r()));
  const init = async () => {
    await request("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } });
    notify("notifications/initialized");
  };
  return { child, lines, request, notify, init, exited, stdoutClosed, rest: () => buf };
}

/** Resolves `p`, or rejects after `ms` naming `what`. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return deadline(p, ms, what).catch((err) => {
    throw err instanceof DeadlineError ? new Error(`Timed out after ${ms} ms: ${what}`) : err;
  });
}
