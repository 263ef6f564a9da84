// The physical limits awrepl's figures are judged against: what this machine can do at all, with no
// awrepl code in the way. Each floor isolates one cost a target depends on:
//   spawn_true / spawn_python_S / awrepl_version / bun_empty_binary   process start-up floors (ms)
//   pipe_ping_pong                 one JSON line Bun -> Python -> Bun over pipes (µs): the round-trip floor
//   cell_to_devnull / cell_to_pipe the 100 MB cell in a bare Python, output to /dev/null or read by Bun (MB/s)
//   sigint_busy_loop               SIGINT from Bun to a `while True: pass` noticing it (ms)
//   sigint_via_reader_thread       the same when a reader thread in Python receives the request and
//                                  signals the main thread (how runtime.py does it): adds GIL hand-offs
//
//   bun scripts/bench/floors.ts [--smoke]      prints its figures as JSON
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { BUILD_FLAGS } from "../build.ts";
import { AWREPL_BIN, type BenchOptions, bigOutputCell, figure, type Figures, log, PYTHON, REPO, tempHome, timeSpawn, withTimeout } from "./lib.ts";

const WAIT_MS = 30_000;
/** The environment without PYTHONUNBUFFERED, so a bare Python buffers its stdout as it normally would. */
const BUFFERED_ENV = { ...process.env, PYTHONUNBUFFERED: undefined };

function spawnFloor(argv: string[], runs: number): number[] {
  timeSpawn(argv); // page cache warm
  return Array.from({ length: runs }, () => timeSpawn(argv).ms);
}

/** A line reader over a child's stdout: resolves each line in order. */
function lines(child: ChildProcessWithoutNullStreams): () => Promise<string> {
  let buffer = "";
  const ready: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    buffer += chunk;
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      const w = waiting.shift();
      if (w) w(line);
      else ready.push(line);
    }
  });
  return () => {
    const line = ready.shift();
    if (line !== undefined) return Promise.resolve(line);
    return withTimeout(new Promise<string>((resolve) => waiting.push(resolve)), WAIT_MS, "a line from Python");
  };
}

async function withPython<T>(code: string, body: (child: ChildProcessWithoutNullStreams, next: () => Promise<string>) => Promise<T>): Promise<T> {
  const child = spawn(PYTHON, ["-c", code], { stdio: ["pipe", "pipe", "pipe"], env: process.env });
  try {
    return await body(child, lines(child));
  } finally {
    child.kill("SIGKILL");
  }
}

async function pipePingPong(count: number): Promise<number[]> {
  const echo = "import sys\nr, w = sys.stdin.buffer, sys.stdout.buffer\nfor line in r:\n    w.write(line)\n    w.flush()";
  return withPython(echo, async (child, next) => {
    const msg = `${JSON.stringify({ type: "execute", id: "1", code: "1+1" })}\n`;
    const samples: number[] = [];
    for (let i = 0; i < count + 200; i++) {
      const start = performance.now();
      child.stdin.write(msg);
      await next();
      if (i >= 200) samples.push((performance.now() - start) * 1000);
    }
    return samples;
  });
}

/** SIGINT latency into a busy loop: sent by Bun directly, or as a stdin line a Python reader thread turns into pthread_kill. */
async function sigintLatency(viaReaderThread: boolean, runs: number): Promise<number[]> {
  const code = [
    "import signal, sys, threading",
    "def reader():",
    "    for _ in sys.stdin: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)",
    ...(viaReaderThread ? ["threading.Thread(target=reader, daemon=True).start()"] : []),
    "while True:",
    "    try:",
    "        print('go', flush=True)",
    "        while True: pass",
    "    except KeyboardInterrupt:",
    "        print('int', flush=True)",
  ].join("\n");
  return withPython(code, async (child, next) => {
    const samples: number[] = [];
    for (let i = 0; i < runs; i++) {
      if ((await next()) !== "go") throw new Error("SIGINT floor: expected go");
      await Bun.sleep(50);
      const start = performance.now();
      if (viaReaderThread) child.stdin.write("interrupt\n");
      else child.kill("SIGINT");
      if ((await next()) !== "int") throw new Error("SIGINT floor: expected int");
      samples.push(performance.now() - start);
    }
    return samples;
  });
}

/**
 * The big-output cell in a bare Python, MB/s. `buffered` (the default): without PYTHONUNBUFFERED, as a
 * Python normally runs; false: with the environment as it is (these machines export
 * PYTHONUNBUFFERED=1, which makes every write a system call).
 */
export function cellThroughput(bytes: number, toPipe: boolean, runs: number, buffered = true): number[] {
  const { home, remove } = tempHome("awrepl-floor-");
  try {
    const file = join(home, "cell.py");
    writeFileSync(file, bigOutputCell(bytes));
    const argv = toPipe ? [PYTHON, file] : ["/bin/sh", "-c", `exec ${PYTHON} ${file} >/dev/null`];
    return Array.from({ length: runs }, () => {
      const run = timeSpawn(argv, { env: buffered ? BUFFERED_ENV : process.env, timeoutMs: 300_000 });
      if (toPipe && run.stdout.length !== Math.floor(bytes / 1000) * 1000) throw new Error(`Cell floor read ${run.stdout.length} bytes`);
      return bytes / 1e6 / (run.ms / 1000);
    });
  } finally {
    remove();
  }
}

/**
 * Compiles `entry` into `outfile` exactly as scripts/build.ts compiles dist/awrepl (its BUILD_FLAGS;
 * not the bytecode order, which is a profile of awrepl's own code). Bun writes source maps beside its
 * output, so it builds in a scratch directory next to `outfile` and moves the executable out.
 */
export function compileLikeAwrepl(entry: string, outfile: string): void {
  const scratch = mkdtempSync(join(dirname(outfile), ".build-"));
  try {
    const tmp = join(scratch, "out");
    timeSpawn([process.execPath, "build", ...BUILD_FLAGS, entry, "--outfile", tmp], { cwd: REPO, timeoutMs: 180_000 });
    renameSync(tmp, outfile);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** An empty program compiled the way dist/awrepl is (the start-up floor of any Bun-compiled client), into `dir`. */
export function emptyBunProgram(dir: string): string {
  const src = join(dir, "empty.ts");
  writeFileSync(src, "export {};\n");
  const out = join(dir, "empty");
  compileLikeAwrepl(src, out);
  return out;
}

/** Start-up of the empty program: the floor for any Bun-compiled client. */
export function emptyBunBinary(runs: number): number[] {
  const { home, remove } = tempHome("awrepl-floor-");
  try {
    return spawnFloor([emptyBunProgram(home)], runs);
  } finally {
    remove();
  }
}

export async function floorFigures(options: BenchOptions = {}): Promise<Figures> {
  const smoke = options.smoke ?? false;
  const runs = smoke ? 3 : 21;
  const figures: Figures = {};
  log("floors: process start-up");
  figures.floor_spawn_true = figure("ms", spawnFloor(["/bin/true"], runs));
  figures.floor_spawn_python_S = figure("ms", spawnFloor([PYTHON, "-S", "-c", "pass"], runs), "python3 -S -c pass (no site)");
  figures.floor_awrepl_version = figure("ms", spawnFloor([AWREPL_BIN, "--version"], runs), "dist/awrepl --version: the binary's own start");
  if (!smoke) figures.floor_bun_empty_binary = figure("ms", emptyBunBinary(runs), "an empty program, compiled with dist/awrepl's flags");
  log("floors: pipe ping-pong");
  figures.floor_pipe_ping_pong = figure("us", await pipePingPong(smoke ? 100 : 5000), "one JSON line Bun→Python→Bun");
  log("floors: the big-output cell in a bare Python");
  const bytes = smoke ? 1_000_000 : 100_000_000;
  figures.floor_cell_to_devnull = figure("MB/s", cellThroughput(bytes, false, smoke ? 1 : 3), `${bytes / 1e6} MB cell, stdout >/dev/null, buffered`);
  figures.floor_cell_to_pipe = figure("MB/s", cellThroughput(bytes, true, smoke ? 1 : 3), `${bytes / 1e6} MB cell, stdout read by Bun`);
  log("floors: SIGINT into a busy loop");
  figures.floor_sigint_busy_loop = figure("ms", await sigintLatency(false, smoke ? 2 : 15), "kill(SIGINT) from Bun");
  figures.floor_sigint_via_reader_thread = figure("ms", await sigintLatency(true, smoke ? 2 : 15), "stdin line → reader thread → pthread_kill");
  return figures;
}

if (import.meta.main) {
  console.log(JSON.stringify(await floorFigures({ smoke: process.argv.includes("--smoke") })));
}
