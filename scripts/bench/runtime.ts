// Runtime benchmark (issue 2): runtime.py spoken to directly over its pipes, every start-up figure
// against `python -c pass` of the same interpreter measured interleaved in the same run.
// Usage: npx bun scripts/bench/runtime.ts [--python P] [--smoke] [--json]
// --json prints the raw figures as one JSON object on the last line (scripts/bench/all.ts reads it).
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { figure, type Figures, percentile, summarize, timeSpawn } from "./lib.ts";

const RUNTIME = fileURLToPath(new URL("../../runtime.py", import.meta.url));

type Args = { python: string; smoke: boolean; json: boolean };

function parseArgs(argv: string[]): Args {
  const args: Args = { python: process.env.AWREPL_TEST_PYTHON || "/usr/bin/python3", smoke: false, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--smoke") args.smoke = true;
    else if (a === "--json") args.json = true;
    else if (a === "--python") {
      const v = argv[++i];
      if (!v) throw new Error("--python needs a value");
      args.python = v;
    } else throw new Error(`Unknown argument ${JSON.stringify(a)}`);
  }
  return args;
}

const now = () => performance.now();
const median = (xs: number[]) => summarize(xs).p50;
const p99 = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 99);

function waitExit(p: ChildProcess): Promise<void> {
  return new Promise((r) => (p.exitCode !== null || p.signalCode !== null ? r() : p.once("exit", () => r())));
}

/** One runtime process with a line reader; `until` resolves on the first event matching pred. */
class Rt {
  p: ChildProcess;
  private buf = "";
  private waiters: Array<{ pred: (e: any) => boolean; resolve: (e: any) => void }> = [];
  constructor(python: string, script: string) {
    this.p = spawn(python, ["-u", script], { stdio: ["pipe", "pipe", "inherit"], detached: true });
    this.p.stdout!.setEncoding("utf8");
    this.p.stdout!.on("data", (c: string) => {
      this.buf += c;
      let i: number;
      while ((i = this.buf.indexOf("\n")) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        if (this.waiters.length === 0) continue;
        const e = JSON.parse(line);
        this.waiters = this.waiters.filter((w) => (w.pred(e) ? (w.resolve(e), false) : true));
      }
    });
  }
  until(pred: (e: any) => boolean, timeoutMs = 60_000): Promise<any> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("benchmark wait timed out")), timeoutMs);
      this.waiters.push({ pred, resolve: (e) => (clearTimeout(t), resolve(e)) });
    });
  }
  send(msg: unknown) {
    this.p.stdin!.write(JSON.stringify(msg) + "\n");
  }
  async close() {
    try {
      process.kill(-this.p.pid!, "SIGKILL");
    } catch {}
    await waitExit(this.p);
  }
}

const timePass = (python: string) => timeSpawn([python, "-c", "pass"]).ms;

async function timeReady(python: string, script: string): Promise<number> {
  const t = now();
  const rt = new Rt(python, script);
  await rt.until((e) => e.event === "ready");
  const d = now() - t;
  await rt.close();
  return d;
}

async function timeFirstResult(python: string, script: string): Promise<number> {
  const t = now();
  const rt = new Rt(python, script);
  rt.send({ type: "execute", id: "first", code: "1+1" });
  await rt.until((e) => e.event === "done" && e.id === "first");
  const d = now() - t;
  await rt.close();
  return d;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const py = args.python;
  const spawns = args.smoke ? 3 : 40;
  const trips = args.smoke ? 200 : 5000;
  const printMB = args.smoke ? 4 : 100;
  const interrupts = args.smoke ? 2 : 10;

  // The host runs a cached .pyc of runtime.py; measure that (and the plain source for reference).
  const dir = mkdtempSync(join(tmpdir(), "awrepl-bench-"));
  const pyc = join(dir, "runtime.pyc");
  const c = spawnSync(py, ["-c", `import py_compile,sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)`, RUNTIME, pyc]);
  if (c.status !== 0) throw new Error(`Cannot compile runtime.py with ${py}: ${c.stderr}`);

  const pass: number[] = [], readyPyc: number[] = [], readySrc: number[] = [], first: number[] = [];
  for (let i = 0; i < spawns; i++) {
    // Interleaved so machine noise hits every figure alike.
    pass.push(timePass(py));
    readyPyc.push(await timeReady(py, pyc));
    readySrc.push(await timeReady(py, RUNTIME));
    first.push(await timeFirstResult(py, pyc));
  }

  const rt = new Rt(py, pyc);
  await rt.until((e) => e.event === "ready");
  const rtt: number[] = [];
  for (let i = 0; i < trips; i++) {
    const id = `t${i}`;
    const t = now();
    const done = rt.until((e) => e.event === "done" && e.id === id);
    rt.send({ type: "execute", id, code: "1+1" });
    await done;
    rtt.push(now() - t);
  }

  // Print-heavy cells: 100-byte lines (two write() calls per line) and 1000-byte lines.
  async function printThroughput(width: number): Promise<number> {
    const id = `print${width}`;
    const lines = Math.round((printMB * 1024 * 1024) / width);
    const t0 = now();
    const done = rt.until((e) => e.event === "done" && e.id === id, 300_000);
    rt.send({ type: "execute", id, code: `line = 'x' * ${width - 1}\nfor _ in range(${lines}):\n    print(line)` });
    await done;
    return printMB / ((now() - t0) / 1000);
  }
  const mbps100 = await printThroughput(100);
  const mbps1k = await printThroughput(1000);

  async function interruptLatency(code: string): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < interrupts; i++) {
      const id = `i${i}-${Math.random()}`;
      const started = rt.until((e) => e.event === "stdout" && e.id === id);
      rt.send({ type: "execute", id, code: `print('go')\n${code}` });
      await started;
      await new Promise((r) => setTimeout(r, 30));
      const done = rt.until((e) => e.event === "done" && e.id === id);
      const t = now();
      rt.send({ type: "interrupt", id });
      await done;
      out.push(now() - t);
    }
    return out;
  }
  const intSync = await interruptLatency("while True: pass");
  const intSleep = await interruptLatency("import time\nwhile True: time.sleep(0.5)");
  const intAwait = await interruptLatency("import asyncio\nawait asyncio.sleep(1e9)");
  await rt.close();
  rmSync(dir, { recursive: true, force: true });

  const figures: Figures = {
    runtime_baseline_python_c_pass: figure("ms", pass, `${py} -c pass, interleaved with the start-ups`),
    runtime_start_to_ready: figure("ms", readyPyc, "cached .pyc, spawn to the ready line"),
    runtime_start_to_ready_source: figure("ms", readySrc, "runtime.py compiled at every start"),
    runtime_start_to_first_result: figure("ms", first, "cached .pyc, spawn to the done of 1+1"),
    runtime_round_trip: figure("us", rtt.map((x) => x * 1000), 'execute("1+1") to its done'),
    runtime_print_mb_per_s: figure("MB/s", [mbps100], `${printMB} MB in 100-byte lines`),
    runtime_print_1k_lines_mb_per_s: figure("MB/s", [mbps1k], `${printMB} MB in 1000-byte lines`),
    runtime_interrupt_busy_loop: figure("ms", intSync, "while True: pass"),
    runtime_interrupt_sleep_loop: figure("ms", intSleep, "while True: time.sleep(0.5)"),
    runtime_interrupt_asyncio_sleep: figure("ms", intAwait, "await asyncio.sleep(1e9)"),
  };
  const base = median(pass);
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  const ver = spawnSync(py, ["-c", "import sys; print(sys.version.split()[0])"]).stdout.toString().trim();
  const rows: Array<[string, string, string]> = [
    ["python -c pass (baseline), median", ms(base), "1.00x"],
    ["start to ready (cached .pyc), median", ms(median(readyPyc)), `${(median(readyPyc) / base).toFixed(2)}x  (target <= 1.3x)`],
    ["start to ready (source), median", ms(median(readySrc)), `${(median(readySrc) / base).toFixed(2)}x`],
    ["start to first result of 1+1 (.pyc), median", ms(median(first)), `${(median(first) / base).toFixed(2)}x`],
    ['execute("1+1") round trip p50', `${(median(rtt) * 1000).toFixed(0)} us`, "(target <= 100 us)"],
    ['execute("1+1") round trip p99', `${(p99(rtt) * 1000).toFixed(0)} us`, "(target <= 1 ms)"],
    [`print-heavy cell, ${printMB} MB in 100-byte lines`, `${mbps100.toFixed(0)} MB/s`, "(target >= 100 MB/s)"],
    [`print-heavy cell, ${printMB} MB in 1000-byte lines`, `${mbps1k.toFixed(0)} MB/s`, "(target >= 100 MB/s)"],
    ["interrupt `while True: pass`, median", ms(median(intSync)), "(target <= 10 ms)"],
    ["interrupt a time.sleep loop, median", ms(median(intSleep)), "(target <= 10 ms)"],
    ["interrupt `await asyncio.sleep(1e9)`, median", ms(median(intAwait)), "(target <= 10 ms)"],
  ];
  const out = args.json ? console.error : console.log;
  out(`awrepl runtime benchmark: ${py} (Python ${ver})${args.smoke ? " [smoke: tiny counts, figures not meaningful]" : ""}`);
  const w = Math.max(...rows.map((r) => r[0].length));
  for (const [k, v, note] of rows) out(`  ${k.padEnd(w)}  ${v.padStart(10)}  ${note}`);
  if (args.json) console.log(JSON.stringify(figures));
}

await main();
