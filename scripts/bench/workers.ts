// Workers anywhere: what remote and sandboxed workers cost, each figure beside its floor measured in
// the same run (interleaved rounds):
// - the far side's cleanup over a real sshd (tests/harness/sshd.ts): a kill during a C loop with a
//   `sleep` child, a close, a partition (the local ssh stopped) — floor: the same kill of a local worker,
//   and the heartbeat's timeout;
// - how long the host takes to declare a silent worker lost — floor: the heartbeat's timeout;
// - a 100 MB snapshot streamed to the host and restored from it — floor: the same in path mode;
// - a sandboxed worker's start, cold and as a new session with a spare ready — floors: `bwrap <the
//   profile> /bin/true`, and the same start without the sandbox (target: sandbox start ≤ 1.2 ×, docs/architecture.md).
//
//   bun scripts/bench/workers.ts [--smoke] [--json]     prints a table, or its figures as one JSON line
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { ReplSession } from "../../lib/session/session.ts";
import { resolveInterpreter } from "../../lib/worker/interpreter.ts";
import { runtimeLaunch } from "../../lib/worker/launch.ts";
import { restoreFromFile, snapshotToFile } from "../../lib/worker/payload.ts";
import { sandboxLaunch } from "../../lib/worker/sandbox.ts";
import { SpareWorkers } from "../../lib/worker/spare.ts";
import { type HeartbeatOptions, Worker } from "../../lib/worker/worker.ts";
import { bwrapAvailable } from "../../tests/harness/bwrap.ts";
import { goneWithin } from "../../tests/harness/procs.ts";
import { sshdAvailable, startSshd, type TestSshd } from "../../tests/harness/sshd.ts";
import { type BenchOptions, figure, type Figures, log, procStatusMiB, PYTHON, summarize, tempHome, timeSpawn } from "./lib.ts";

const C_LOOP_WITH_CHILD = "import os, subprocess\n_child = subprocess.Popen(['sleep', '600'])\nprint(os.getpid(), _child.pid)";

/** The workers' directory, beside the state directory (a sandbox refuses a cwd inside awrepl's state). */
function projectOf(home: string): string {
  const dir = join(dirname(home), "project");
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Starts a worker for `python` (a command line), optionally sandboxed, with the state in `home`. */
async function startWorker(home: string, python: string, extra: { sandbox?: boolean; heartbeat?: HeartbeatOptions } = {}): Promise<Worker> {
  const interpreter = await resolveInterpreter({ python, home });
  const launch = await runtimeLaunch(home, interpreter, { sandbox: extra.sandbox ? {} : null, cwd: projectOf(home), env: process.env });
  return Worker.start({ argv: launch.argv, stdinPreamble: launch.stdinPreamble, env: launch.env, kind: launch.kind, cwd: projectOf(home), heartbeat: extra.heartbeat });
}

/** The worker's python and a `sleep` child as the worker numbers them (the cell prints both). */
async function withChild(w: Worker): Promise<[number, number]> {
  let out = "";
  await w.request({ type: "execute", code: C_LOOP_WITH_CHILD }, { output: (_s, t) => (out += t) });
  const [python, child] = out.trim().split(" ").map(Number);
  return [python as number, child as number];
}

/** ms from `end()` until both pids are gone (throws if they outlive 10 s). */
async function cleanupMs(pids: number[], end: () => void | Promise<void>): Promise<number> {
  const t0 = performance.now();
  await end();
  for (const pid of pids) if ((await goneWithin(pid, 10_000)) === null) throw new Error(`pid ${pid} outlived its worker by 10 s`);
  return performance.now() - t0;
}

/** Kill during a C loop with a child: local (the floor) and over ssh; close; a partition; host-side loss detection. */
async function cleanupFigures(home: string, sshd: TestSshd, rounds: number, heartbeat: HeartbeatOptions): Promise<Figures> {
  const local: number[] = [];
  const killFar: number[] = [];
  const closeFar: number[] = [];
  const partitionFar: number[] = [];
  const lossHost: number[] = [];
  for (let i = 0; i < rounds; i++) {
    for (const python of [PYTHON, sshd.python(PYTHON)]) {
      const w = await startWorker(home, python);
      const pids = await withChild(w);
      const spin = w.request({ type: "execute", code: "sum(range(10**12))" }).catch(() => undefined);
      await Bun.sleep(200);
      (python === PYTHON ? local : killFar).push(await cleanupMs(pids, () => w.kill()));
      await spin;
      await w.exited;
    }
    {
      const w = await startWorker(home, sshd.python(PYTHON));
      const pids = await withChild(w);
      closeFar.push(await cleanupMs(pids, () => w.close()));
    }
    {
      const w = await startWorker(home, sshd.python(PYTHON), { heartbeat });
      const pids = await withChild(w);
      await Bun.sleep(heartbeat.intervalMs * 2); // a ping or two answered
      let lostAt = 0;
      void w.exited.then(() => (lostAt = performance.now()));
      const t0 = performance.now();
      process.kill(w.pid, "SIGSTOP"); // the local ssh stops: silence both ways, as in a partition
      partitionFar.push(await cleanupMs(pids, () => undefined));
      await w.exited;
      lossHost.push(lostAt - t0);
      try {
        process.kill(w.pid, "SIGCONT");
      } catch {
        // killed already
      }
    }
  }
  const timeout = `heartbeat ${heartbeat.intervalMs} ms / ${heartbeat.timeoutMs} ms`;
  return {
    workers_kill_local_gone_ms: figure("ms", local, "floor: kill() of a local worker in a C loop until it and its child are gone"),
    workers_kill_ssh_far_gone_ms: figure("ms", killFar, "kill() over ssh in a C loop: far python and its sleep child gone (in-band exit, EOF, watchdog)"),
    workers_close_ssh_far_gone_ms: figure("ms", closeFar, "close() over ssh: far python and child gone"),
    workers_heartbeat_timeout_ms: figure("ms", partitionFar.map(() => heartbeat.timeoutMs), `floor: the heartbeat's timeout (${timeout})`),
    workers_partition_far_gone_ms: figure("ms", partitionFar, `local ssh stopped: the far side ended itself (${timeout})`),
    workers_partition_host_declares_lost_ms: figure("ms", lossHost, `local ssh stopped: the host declared the idle worker lost (${timeout})`),
  };
}

/** 100 MB snapshot and restore: path mode (the floor) and streamed over the protocol, interleaved. */
async function snapshotFigures(home: string, mb: number, rounds: number): Promise<Figures> {
  const w = await startWorker(home, PYTHON);
  const out: Record<string, number[]> = { pathSnap: [], streamSnap: [], pathRestore: [], streamRestore: [], hostGrowth: [] };
  try {
    await w.request({ type: "execute", code: `import os\nx = os.urandom(${mb} * 2**20)` });
    const bytes = mb * 2 ** 20;
    const rate = (ms: number) => bytes / 1e6 / (ms / 1000);
    for (let i = 0; i < rounds; i++) {
      const path = join(home, "path.pkl");
      let t = performance.now();
      const done = await w.request({ type: "snapshot", path, manifest_path: join(home, "path.json") });
      if (done.status !== "ok") throw new Error(`path snapshot: ${done.reason}`);
      out.pathSnap!.push(rate(performance.now() - t));
      const before = procStatusMiB(process.pid) ?? 0;
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, procStatusMiB(process.pid) ?? 0)), 5);
      t = performance.now();
      await snapshotToFile(w, join(home, "stream.pkl"));
      out.streamSnap!.push(rate(performance.now() - t));
      t = performance.now();
      const r1 = await w.request({ type: "restore", path });
      if (r1.status !== "ok") throw new Error(`path restore: ${r1.reason}`);
      out.pathRestore!.push(rate(performance.now() - t));
      t = performance.now();
      const r2 = await restoreFromFile(w, join(home, "stream.pkl"));
      if (r2.status !== "ok") throw new Error(`stream restore: ${r2.reason}`);
      out.streamRestore!.push(rate(performance.now() - t));
      clearInterval(sampler);
      out.hostGrowth!.push(peak - before);
    }
  } finally {
    await w.close();
  }
  return {
    snapshot_path_mb_per_s: figure("MB/s", out.pathSnap!, `floor: ${mb} MB snapshot written by the worker itself (path mode)`),
    snapshot_stream_mb_per_s: figure("MB/s", out.streamSnap!, `${mb} MB snapshot streamed to the host (base64 data events, sha256 checked)`),
    restore_path_mb_per_s: figure("MB/s", out.pathRestore!, `floor: ${mb} MB restore read by the worker (path mode)`),
    restore_stream_mb_per_s: figure("MB/s", out.streamRestore!, `${mb} MB restore streamed from the host`),
    snapshot_stream_host_rss_growth_mib: figure("MiB", out.hostGrowth!, "this process's RSS growth while streaming both ways (bounded: one piece at a time)"),
  };
}

/** A sandboxed worker's first result, cold and as a new session with a spare ready, beside their floors. */
async function sandboxStartFigures(home: string, rounds: number): Promise<Figures> {
  const interpreter = await resolveInterpreter({ python: PYTHON, home });
  const launch = await runtimeLaunch(home, interpreter, { sandbox: {}, cwd: projectOf(home), env: process.env });
  const profile = sandboxLaunch({}, { cwd: projectOf(home), env: process.env, interpreterPaths: interpreter.paths ?? [], runtimeFile: launch.bytecode ?? "/etc/hostname" });
  const out: Record<string, number[]> = { bwrapTrue: [], localCold: [], sandboxCold: [], localSpare: [], sandboxSpare: [] };
  const firstResult = async (sandbox: boolean) => {
    const t = performance.now();
    const w = await startWorker(home, PYTHON, { sandbox });
    await w.request({ type: "execute", code: "1 + 1" });
    const ms = performance.now() - t;
    await w.close();
    return ms;
  };
  for (let i = 0; i < rounds; i++) {
    out.bwrapTrue!.push(timeSpawn([...profile.prefix, "/bin/true"], { env: profile.env }).ms);
    out.localCold!.push(await firstResult(false));
    out.sandboxCold!.push(await firstResult(true));
  }
  // New named sessions taking a warm spare, as the supervisor's sessions do.
  const spares = new SpareWorkers(4);
  const options = (sandbox: boolean) => ({ python: PYTHON, home, cwd: projectOf(home), spares, sandbox: sandbox ? {} : undefined });
  try {
    // One spare per key (local, sandboxed), then interleaved rounds, each taking a ready spare.
    for (const sandbox of [false, true]) await (await ReplSession.start("warm", options(sandbox))).close();
    for (let i = 0; i < rounds * 2; i++) {
      for (const sandbox of [false, true]) {
        await waitForSpares(spares, 2);
        const t = performance.now();
        const s = await ReplSession.start(`s${i}`, options(sandbox));
        const r = await s.execute("1 + 1");
        (sandbox ? out.sandboxSpare! : out.localSpare!).push(performance.now() - t);
        if (r.status !== "ok") throw new Error(`first cell: ${r.exception}`);
        await s.close();
      }
    }
  } finally {
    await spares.closeAll();
  }
  return {
    sandbox_bwrap_true_ms: figure("ms", out.bwrapTrue!, "floor: bwrap with the default profile running /bin/true"),
    sandbox_local_cold_start_ms: figure("ms", out.localCold!, "floor: a local worker's spawn to its first result"),
    sandbox_cold_start_ms: figure("ms", out.sandboxCold!, "a sandboxed worker's spawn to its first result"),
    sandbox_local_session_with_spare_ms: figure("ms", out.localSpare!, "floor: a new session to its first result, a local spare ready"),
    sandbox_session_with_spare_ms: figure("ms", out.sandboxSpare!, "a new sandboxed session to its first result, a sandboxed spare ready"),
  };
}

async function waitForSpares(spares: SpareWorkers, count: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if ((await spares.pids()).length >= count) return;
    await Bun.sleep(25);
  }
  throw new Error("the spare did not get ready within 10 s");
}

export async function benchWorkers(options: BenchOptions = {}): Promise<Figures> {
  const smoke = options.smoke ?? false;
  const figures: Figures = {};
  const tmp = tempHome("awrepl-bench-workers-");
  try {
    const home = join(tmp.home, "state");
    mkdirSync(home, { mode: 0o700 });
    log("workers: 100 MB snapshots, path mode and streamed");
    Object.assign(figures, await snapshotFigures(home, smoke ? 4 : 100, smoke ? 1 : 3));
    const bwrap = bwrapAvailable();
    if (bwrap.ok) {
      log("workers: sandboxed worker start");
      Object.assign(figures, await sandboxStartFigures(home, smoke ? 2 : 15));
    } else log(`workers: no sandbox figures: ${bwrap.reason}`);
    const ssh = sshdAvailable();
    if (ssh.ok) {
      log("workers: cleanup over ssh");
      const sshd = await startSshd();
      try {
        const heartbeat = smoke ? { intervalMs: 200, timeoutMs: 1_000 } : { intervalMs: 1_000, timeoutMs: 5_000 };
        Object.assign(figures, await cleanupFigures(home, sshd, smoke ? 1 : 3, heartbeat));
      } finally {
        await sshd.stop();
      }
    } else log(`workers: no ssh figures: ${ssh.reason}`);
  } finally {
    tmp.remove();
  }
  return figures;
}

if (import.meta.main) {
  const figures = await benchWorkers({ smoke: process.argv.includes("--smoke") });
  if (process.argv.includes("--json")) console.log(JSON.stringify(figures));
  else {
    for (const [name, f] of Object.entries(figures)) {
      const s = summarize(f.samples);
      console.log(`${name.padEnd(42)} p50 ${s.p50.toFixed(1).padStart(8)} ${f.unit.padEnd(4)} min ${s.min.toFixed(1).padStart(8)}  max ${s.max.toFixed(1).padStart(8)}  (n=${s.n})  ${f.note ?? ""}`);
    }
  }
}
