// Limits and the allow list's proxy, each figure beside its floor measured in the same run
// (interleaved rounds):
// - a worker's start (launch built, process spawned, `ready`) with limits — in cgroups where this
//   machine makes them, and with rlimits only — floor: the same start without limits (target: within
//   5 ms of it, issue 24);
// - one HTTP request to a server on 127.0.0.1 through the proxy — floor: the same request direct
//   (target: at most 1 ms added): from this process over the proxy's socket, and from a cell (urllib)
//   inside a sandbox through its forwarder and the proxy, beside the same cell outside going direct.
//
//   bun scripts/bench/limits.ts [--smoke] [--json]     prints a table, or its figures as one JSON line
import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { connect } from "node:net";
import { dirname, join } from "node:path";
import type { ResourceLimits } from "../../lib/protocol/limits.ts";
import type { LaunchOptions } from "../../lib/worker/launch.ts";
import { type LimitsHost, limitsHost } from "../../lib/worker/limits/plan.ts";
import { acquireNetProxy } from "../../lib/worker/net_proxy.ts";
import type { Worker } from "../../lib/worker/worker.ts";
import { bwrapAvailable, launchedWorkers } from "../../tests/harness/bwrap.ts";
import { type BenchOptions, figure, type Figures, log, summarize, tempHome } from "./lib.ts";

const MiB = 1024 * 1024;
const LIMITS: ResourceLimits = { memory_bytes: 512 * MiB, max_procs: 256, max_file_bytes: 1024 * MiB };
const RLIMITS_ONLY: LimitsHost = { platform: "linux", uid: process.getuid?.() ?? 0, cgroups: null };

/** One start as a session makes it (the launch built, spawned, `ready`), then ended. */
async function startMs(home: string, options: LaunchOptions): Promise<number> {
  const workers = launchedWorkers(home);
  const t0 = performance.now();
  await workers.start(options);
  const ms = performance.now() - t0;
  await workers.stop();
  return ms;
}

/** Worker starts: none, limits (best mechanism here), rlimits only; interleaved. */
async function startFigures(home: string, rounds: number): Promise<Figures> {
  const cgroupMechanism = limitsHost().cgroups?.parents.memory?.version;
  const plain: number[] = [];
  const limited: number[] = [];
  const rlimited: number[] = [];
  const rlimitOnly = { memory_bytes: LIMITS.memory_bytes, max_file_bytes: LIMITS.max_file_bytes };
  await startMs(home, {}); // the bytecode cache, the interpreter's probe
  for (let i = 0; i < rounds; i++) {
    plain.push(await startMs(home, {}));
    if (cgroupMechanism) limited.push(await startMs(home, { limits: LIMITS }));
    rlimited.push(await startMs(home, { limits: rlimitOnly, limitsHost: RLIMITS_ONLY }));
  }
  const figures: Figures = {
    "worker start, no limits": figure("ms", plain, "floor"),
    "worker start, rlimits (memory, file size)": figure("ms", rlimited, "target: within 5 ms of the floor"),
  };
  if (cgroupMechanism) figures[`worker start, limits (${cgroupMechanism}: memory, procs; file size)`] = figure("ms", limited, "target: within 5 ms of the floor");
  return figures;
}

/** One GET over a fresh connection (`path` null: TCP to the server), until the server closes. */
function request(target: { socket: string } | { port: number }, line: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const c = "socket" in target ? connect(target.socket) : connect(target.port, "127.0.0.1");
    let got = 0;
    c.on("data", (d) => (got += d.length));
    c.on("close", () => (got ? resolve(performance.now() - t0) : reject(new Error("no answer"))));
    c.on("error", reject);
    c.write(line);
  });
}

const URLLIB_LOOP = (url: string, n: number, direct: boolean) => `
import time, urllib.request
opener = urllib.request.build_opener(${direct ? "urllib.request.ProxyHandler({})" : ""})
ts = []
for _ in range(${n}):
    t = time.perf_counter()
    opener.open(${JSON.stringify(url)}).read()
    ts.append((time.perf_counter() - t) * 1000)
print(" ".join(f"{x:.4f}" for x in ts))
`;

async function cellSamples(w: Worker, code: string): Promise<number[]> {
  let out = "";
  await w.request({ type: "execute", code }, { output: (_s, t) => (out += t) });
  return out.trim().split(" ").map(Number);
}

/** The proxy beside a direct request: from this process, and from a sandboxed cell. */
async function proxyFigures(home: string, rounds: number): Promise<Figures> {
  const server = createServer((_req, res) => res.end("ok"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  const figures: Figures = {};
  try {
    const socket = join(home, "bench-net.sock");
    const lease = await acquireNetProxy({ allow: [`127.0.0.1:${port}`], socket });
    const direct: number[] = [];
    const proxied: number[] = [];
    const plainLine = `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`;
    const proxyLine = `GET http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
    for (let i = 0; i < 20; i++) await request({ port }, plainLine); // warm
    for (let i = 0; i < rounds * 10; i++) {
      direct.push(await request({ port }, plainLine));
      proxied.push(await request({ socket }, proxyLine));
    }
    lease.release();
    figures["request direct (this process)"] = figure("ms", direct, "floor");
    figures["request through the proxy (this process)"] = figure("ms", proxied, "target: ≤ floor + 1 ms");
    if (bwrapAvailable().ok) {
      const project = join(dirname(home), "bench-project");
      mkdirSync(project, { recursive: true });
      const workers = launchedWorkers(home);
      const outside = await workers.start({ cwd: project });
      const inside = await workers.start({ sandbox: { allow: [`127.0.0.1:${port}`] } as never, cwd: project, env: process.env });
      const url = `http://127.0.0.1:${port}/`;
      const n = rounds * 10;
      await cellSamples(outside, URLLIB_LOOP(url, 5, true));
      await cellSamples(inside, URLLIB_LOOP(url, 5, false));
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i < 2; i++) {
        a.push(...(await cellSamples(outside, URLLIB_LOOP(url, n, true))));
        b.push(...(await cellSamples(inside, URLLIB_LOOP(url, n, false))));
      }
      await workers.stop();
      figures["urllib request direct (cell, no sandbox)"] = figure("ms", a, "floor");
      figures["urllib request via forwarder + proxy (sandboxed cell)"] = figure("ms", b, "target: ≤ floor + 1 ms");
    } else log(`limits.ts: no sandboxed proxy figure: ${(bwrapAvailable() as { reason: string }).reason}`);
  } finally {
    server.close();
  }
  return figures;
}

export async function benchLimits(options: BenchOptions = {}): Promise<Figures> {
  const rounds = options.smoke ? 2 : 20;
  const tmp = tempHome();
  const home = join(tmp.home, "state");
  mkdirSync(home, { recursive: true, mode: 0o700 });
  try {
    return { ...(await startFigures(home, rounds)), ...(await proxyFigures(home, rounds)) };
  } finally {
    tmp.remove();
  }
}

if (import.meta.main) {
  const figures = await benchLimits({ smoke: process.argv.includes("--smoke") });
  if (process.argv.includes("--json")) console.log(JSON.stringify(figures));
  else {
    for (const [name, f] of Object.entries(figures)) {
      const s = summarize(f.samples);
      console.log(`${name.padEnd(58)} p50 ${s.p50.toFixed(3).padStart(8)} ${f.unit.padEnd(3)} min ${s.min.toFixed(3).padStart(8)}  max ${s.max.toFixed(3).padStart(8)}  (n=${s.n})  ${f.note ?? ""}`);
    }
  }
}
