// The Python client's figures (issue 23, "Performance"), each beside its floor measured in the same
// run, alternating so that load on the shared machine hits both alike:
//   - `attach(...).execute("1+1")` from Python (python/awrepl) vs the TypeScript attach(), p50;
//   - `ReplSession()` to its first result (Python, supervisor running) vs the CLI's new named session
//     (`awrepl -s NEW run "1+1"`, a process of its own), both with the supervisor's spare worker ready;
//   - `python3 -c "import awrepl"` vs `python3 -c pass`.
//
//   bun scripts/bench/python_client.ts [--smoke] [--json]     (--json: figures as one JSON line last)
import { join } from "node:path";
import { attach } from "../../lib/client/attach.ts";
import { stopDaemon } from "../../lib/client/daemon.ts";
import { AWREPL_BIN, figure, type Figures, log, PYTHON, REPO, summarize, sweepHome, tempHome, timeSpawn, withTimeout } from "./lib.ts";

const CALL_MS = 30_000;

/**
 * The Python side: a process that answers each stdin line with one JSON line of samples, so rounds
 * interleave with the TypeScript ones. `rt N`: N timed attach(...).execute("1+1") (µs); `new`: one
 * ReplSession() to its first result (ms).
 */
const DRIVER = String.raw`
import json, sys, time
from awrepl import ReplSession, attach
remote = attach("py-bench")
for _ in range(200):
    remote.execute("1+1")
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "rt":
        samples = []
        for _ in range(int(arg)):
            t = time.perf_counter()
            r = remote.execute("1+1")
            samples.append((time.perf_counter() - t) * 1e6)
            assert r.value == "2", r
        print(json.dumps(samples), flush=True)
    elif cmd == "new":
        t = time.perf_counter()
        s = ReplSession("bench")
        r = s.execute("1+1")
        ms = (time.perf_counter() - t) * 1000
        assert r.value == "2", r
        s.close()
        print(json.dumps([ms]), flush=True)
    elif cmd == "quit":
        break
remote.close()
`;

class Driver {
  private readonly proc;
  private readonly lines: AsyncIterator<string>;

  constructor(env: Record<string, string | undefined>) {
    this.proc = Bun.spawn([PYTHON, "-c", DRIVER], { env, cwd: REPO, stdin: "pipe", stdout: "pipe", stderr: "inherit" });
    this.lines = readLines(this.proc.stdout);
  }

  async next<T>(what: string): Promise<T> {
    const { value, done } = await withTimeout(this.lines.next(), CALL_MS * 4, what);
    if (done) throw new Error(`The Python driver exited during ${what}`);
    return JSON.parse(value) as T;
  }

  async ask(command: string): Promise<number[]> {
    this.proc.stdin.write(`${command}\n`);
    await this.proc.stdin.flush();
    return this.next<number[]>(command);
  }

  async quit(): Promise<void> {
    this.proc.stdin.write("quit\n");
    await this.proc.stdin.end();
    await withTimeout(this.proc.exited, CALL_MS, "the Python driver's exit");
  }
}

async function* readLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n")) >= 0) {
      yield buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
    }
  }
}

/** Lets the supervisor's spare worker get ready, as a caller creating sessions at an agent's pace finds it. */
const settle = () => Bun.sleep(400);

export async function pythonClientFigures(options: { smoke?: boolean } = {}): Promise<Figures> {
  const smoke = options.smoke === true;
  const { home, remove } = tempHome("awrepl-bench-py-");
  // One environment for every client (the spare worker matches only its interpreter, directory and environment).
  const env: Record<string, string | undefined> = { ...process.env, AWREPL_HOME: home, AWREPL_BIN, AWREPL_PYTHON: PYTHON, PYTHONPATH: join(REPO, "python") };
  delete env.AWREPL_SESSION;
  const figures: Figures = {};
  let driver: Driver | null = null;
  try {
    const remote = await withTimeout(attach("ts-bench", { home, python: PYTHON, clientEnv: env }), CALL_MS, "attach()");
    driver = new Driver(env);
    await driver.next("the Python driver's start");
    for (let i = 0; i < 200; i++) await remote.execute("1+1");
    const rounds = smoke ? 2 : 20;
    const perRound = smoke ? 20 : 250;
    const py: number[] = [];
    const ts: number[] = [];
    log(`python client: round trips, ${rounds} rounds of ${perRound}, alternating`);
    for (let r = 0; r < rounds; r++) {
      py.push(...(await driver.ask(`rt ${perRound}`)));
      for (let i = 0; i < perRound; i++) {
        const start = performance.now();
        const result = await remote.execute("1+1");
        ts.push((performance.now() - start) * 1000);
        if (result.value !== "2") throw new Error(`execute("1+1") gave ${JSON.stringify(result)}`);
      }
    }
    figures.python_attach_round_trip = figure("us", py, 'Python attach(...).execute("1+1")');
    figures.python_floor_ts_attach_round_trip = figure("us", ts, 'TypeScript attach().execute("1+1"), alternating');
    await remote.close();

    log("python client: new session to first result vs the CLI's new named session");
    const newPy: number[] = [];
    const newCli: number[] = [];
    const runs = smoke ? 2 : 15;
    for (let i = 0; i < runs; i++) {
      await settle();
      newPy.push(...(await driver.ask("new")));
      await settle();
      const cli = timeSpawn([AWREPL_BIN, "-s", `cli-new-${i}`, "run", "1+1"], { env, cwd: REPO, timeoutMs: CALL_MS });
      if (cli.stdout !== "2\n") throw new Error(`The CLI printed ${JSON.stringify(cli.stdout)}`);
      newCli.push(cli.ms);
      timeSpawn([AWREPL_BIN, "close", `cli-new-${i}`], { env, timeoutMs: CALL_MS });
    }
    figures.python_new_session_to_result = figure("ms", newPy, "ReplSession() to its first result, supervisor running, spare ready");
    figures.python_floor_cli_new_session = figure("ms", newCli, '`awrepl -s NEW run "1+1"`, alternating');
    await driver.quit();
    driver = null;

    log("python client: import awrepl vs python3 -c pass");
    const imports: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < (smoke ? 3 : 31); i++) {
      bare.push(timeSpawn([PYTHON, "-c", "pass"], { env }).ms);
      imports.push(timeSpawn([PYTHON, "-c", "import awrepl"], { env }).ms);
    }
    figures.python_import = figure("ms", imports, 'python3 -c "import awrepl"');
    figures.python_floor_c_pass = figure("ms", bare, "python3 -c pass, alternating");
  } finally {
    if (driver) await driver.quit().catch((err) => log(String(err)));
    await withTimeout(stopDaemon({ home }), CALL_MS, "daemon stop").catch((err) => log(String(err)));
    sweepHome(home, remove);
  }
  return figures;
}

/** Each figure beside its floor: p50s, the difference and the ratio, and the target. */
export function renderPythonClientTable(f: Figures): string {
  const p50 = (name: string) => summarize(f[name]?.samples ?? []).p50;
  const rows: [string, string, string, string, (value: number, floor: number) => boolean, string][] = [
    ['Python `attach(...).execute("1+1")` p50', "python_attach_round_trip", "python_floor_ts_attach_round_trip", "us", (v, fl) => v <= fl * 1.3 && v - fl <= 200, "≤ 1.3 × floor and ≤ floor + 0.2 ms"],
    ["`ReplSession()` → first result p50", "python_new_session_to_result", "python_floor_cli_new_session", "ms", (v, fl) => v <= fl, "≤ floor (the CLI's new session)"],
    ['`python3 -c "import awrepl"` p50', "python_import", "python_floor_c_pass", "ms", (v, fl) => v - fl <= 20, "≤ floor + 20 ms"],
  ];
  const lines = ["| figure | unit | value | floor | value − floor | value ÷ floor | target | met |", "|---|---|---|---|---|---|---|---|"];
  for (const [label, value, floor, unit, met, target] of rows) {
    const v = p50(value);
    const fl = p50(floor);
    const diff = v - fl;
    lines.push(`| ${label} | ${unit} | ${v.toFixed(1)} | ${fl.toFixed(1)} | ${diff >= 0 ? "+" : ""}${diff.toFixed(1)} | ${(v / fl).toFixed(2)} × | ${target} | ${met(v, fl) ? "yes" : "NO"} |`);
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const figures = await pythonClientFigures({ smoke: args.includes("--smoke") });
  console.log(renderPythonClientTable(figures));
  if (args.includes("--json")) console.log(JSON.stringify(figures));
}
