// The MCP benchmarks, each beside its floor measured in the same run (alternating, so load on the shared
// machine hits both sides alike):
//   mcp_tools_call          a `tools/call` of `run` "1+1" to a warm `awrepl mcp` (session warm), raw
//                           JSON-RPC over its stdio pipes            (target: ≤ 1 × the warm CLI call)
//   mcp_ping                floor: a JSON-RPC `ping` to the same server (the SDK and the pipes, no awrepl)
//   mcp_warm_shell_call     `awrepl -s s run "1+1"`, the same session, supervisor warm
//   mcp_floor_empty_binary  floor of the CLI call: an empty program compiled with dist/awrepl's flags
//   mcp_cold_initialize     `awrepl mcp` spawned until its `initialize` reply (a host's start-up cost)
//   mcp_floor_version       floor of that: `awrepl --version`, spawn to exit
//
//   bun scripts/bench/mcp.ts [--smoke] [--json]
// --json prints the figures as one JSON line at the end (scripts/bench/all.ts reads it).
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { emptyBunBinary } from "./floors.ts";
import { AWREPL_BIN, figure, type Figures, log, PYTHON, summarize, sweepHome, tempHome, timeSpawn, withTimeout } from "./lib.ts";

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const asJson = args.includes("--json");

const CALLS = smoke ? 5 : 201;
const COLD_STARTS = smoke ? 2 : 15;
const WAIT_MS = 30_000;

const { home, remove } = tempHome("awrepl-bench-mcp-");
const env = { ...process.env, AWREPL_HOME: home, AWREPL_PYTHON: PYTHON, NO_COLOR: "1", AWREPL_SESSION: undefined };

/** `awrepl mcp` on raw pipes: requests by hand, answers matched by id. */
class RawMcp {
  private readonly child: ChildProcessWithoutNullStreams;
  private buffer = "";
  private nextId = 1;
  private readonly waiting = new Map<number, (reply: { result?: any; error?: any }) => void>();
  readonly exited: Promise<void>;

  constructor() {
    this.child = spawn(AWREPL_BIN, ["mcp", "--session", "s"], { env, cwd: home });
    this.child.stderr.resume();
    this.child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      this.buffer += chunk;
      let nl: number;
      while ((nl = this.buffer.indexOf("\n")) >= 0) {
        const reply = JSON.parse(this.buffer.slice(0, nl));
        this.buffer = this.buffer.slice(nl + 1);
        if (reply.id !== undefined) this.waiting.get(reply.id)?.(reply);
      }
    });
    this.exited = new Promise((resolve) => this.child.once("exit", () => resolve()));
  }

  request(method: string, params: unknown = {}): Promise<{ result?: any; error?: any }> {
    const id = this.nextId++;
    const reply = new Promise<{ result?: any; error?: any }>((resolve) => this.waiting.set(id, resolve));
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    return withTimeout(reply, WAIT_MS, `the answer to ${method}`).finally(() => this.waiting.delete(id));
  }

  async initialize(): Promise<void> {
    await this.request("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "0" } });
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
  }

  async close(): Promise<void> {
    this.child.stdin.end();
    await withTimeout(this.exited, WAIT_MS, "awrepl mcp to exit after EOF");
  }
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const start = performance.now();
  const value = await fn();
  return [performance.now() - start, value];
}

const figures: Figures = {};
try {
  log(`mcp: warming the supervisor and session s (${home})`);
  const cli = () => timeSpawn([AWREPL_BIN, "-s", "s", "run", "1+1"], { env, cwd: home });
  if (cli().stdout !== "2\n") throw new Error("the warm-up CLI call did not print 2");
  const server = new RawMcp();
  await server.initialize();
  const call = () => server.request("tools/call", { name: "run", arguments: { code: "1+1" } });
  for (let i = 0; i < (smoke ? 2 : 20); i++) await call(); // the server's own code paths warm

  log(`mcp: ${CALLS} tools/call round trips, pings and warm CLI calls, alternating`);
  const calls: number[] = [];
  const pings: number[] = [];
  const shell: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const [ms, reply] = await timed(call);
    if (reply.result?.structuredContent?.value !== "2") throw new Error(`tools/call answered ${JSON.stringify(reply).slice(0, 300)}`);
    calls.push(ms);
    pings.push((await timed(() => server.request("ping")))[0]);
    if (i % 5 === 0) shell.push(cli().ms); // a spawn costs more than the rest together: fewer of them
  }
  await server.close();
  figures.mcp_tools_call = figure("ms", calls, 'tools/call run "1+1", warm server and session (raw JSON-RPC over stdio)');
  figures.mcp_ping = figure("ms", pings, "JSON-RPC ping to the same server: the floor of a tools/call");
  figures.mcp_warm_shell_call = figure("ms", shell, 'awrepl -s s run "1+1", measured between the tools/calls');

  log(`mcp: ${COLD_STARTS} cold starts to the initialize reply, alternating with --version`);
  const cold: number[] = [];
  const version: number[] = [];
  for (let i = 0; i < COLD_STARTS; i++) {
    version.push(timeSpawn([AWREPL_BIN, "--version"], { env }).ms);
    const start = performance.now();
    const fresh = new RawMcp();
    await fresh.initialize();
    cold.push(performance.now() - start);
    await fresh.close();
  }
  figures.mcp_cold_initialize = figure("ms", cold, "awrepl mcp spawned until its initialize reply");
  figures.mcp_floor_version = figure("ms", version, "awrepl --version, spawn to exit");
  if (!smoke) figures.mcp_floor_empty_binary = figure("ms", emptyBunBinary(21), "an empty program compiled with dist/awrepl's flags: the floor of the CLI call");
} finally {
  timeSpawn([AWREPL_BIN, "daemon", "stop"], { env, allowFailure: true });
  sweepHome(home, remove);
}

for (const [name, f] of Object.entries(figures)) {
  const s = summarize(f.samples);
  log(`${name}: median ${s.p50.toFixed(2)} ${f.unit} (min ${s.min.toFixed(2)}, p99 ${s.p99.toFixed(2)}, max ${s.max.toFixed(2)}, n=${s.n})`);
}
const ratio = summarize(figures.mcp_tools_call?.samples ?? []).p50 / summarize(figures.mcp_warm_shell_call?.samples ?? []).p50;
log(`mcp: tools/call ÷ warm CLI call = ${ratio.toFixed(2)} × (target ≤ 1 ×)`);
if (asJson) console.log(JSON.stringify(figures));
