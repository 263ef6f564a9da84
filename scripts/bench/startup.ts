// Start-up against its floor (issue 14): a warm `awrepl -s s run "1+1"`, `vars`, `sessions`,
// `--version` and `--help`, each against an empty program compiled with scripts/build.ts's flags, with
// the 20-line client (floor_client.ts, same flags) and `python3 -c pass` as references. Every
// command runs interleaved with the others, round robin (load changes hit all alike), from fresh
// copies in one directory (two identical binaries in different page-cache states differ by ~25 page
// faults and ~0.6 ms). spawn_meter.py times each run: wall, CPU time and minor page faults from wait4.
// Several rounds: each round's difference to the floor is one sample, so the spread shows.
//
// With AWREPL_BENCH_BEFORE=/path/to/an/older/awrepl, that binary's run, vars, sessions, --version and
// --help join the same interleaved rounds (as before_run, ...: "before" beside "after" from one run;
// both talk to the one supervisor, so only the client's start-up differs).
//
//   bun scripts/bench/startup.ts [--smoke] [--json]
import { copyFileSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { compileLikeAwrepl, emptyBunProgram } from "./floors.ts";
import { AWREPL_BIN, figure, type Figures, log, PYTHON, REPO, summarize, sweepHome, tempHome, timeSpawn } from "./lib.ts";

export type Usage = { wall_ms: number; cpu_ms: number; minflt: number; status: number };

/** spawn_meter.py, kept running: one run per request. */
export class SpawnMeter {
  private readonly proc;
  private readonly reader;
  private buffered = "";

  /** Every command runs with `env`. */
  constructor(env: Record<string, string | undefined>) {
    this.proc = Bun.spawn([PYTHON, join(REPO, "scripts/bench/spawn_meter.py")], { stdin: "pipe", stdout: "pipe", stderr: "inherit", env });
    this.reader = this.proc.stdout.getReader();
  }

  async run(argv: string[]): Promise<Usage> {
    this.proc.stdin.write(`${JSON.stringify({ argv })}\n`);
    void this.proc.stdin.flush();
    for (;;) {
      const nl = this.buffered.indexOf("\n");
      if (nl >= 0) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        const usage = JSON.parse(line) as Usage;
        if (usage.status !== 0) throw new Error(`${argv.join(" ")} exited with ${usage.status}`);
        return usage;
      }
      const { value, done } = await this.reader.read();
      if (done) throw new Error("spawn_meter.py ended");
      this.buffered += new TextDecoder().decode(value);
    }
  }

  close(): void {
    this.proc.stdin.end();
  }
}

export type Command = { name: string; argv: string[]; expect?: string };

/**
 * Runs `commands` round robin, `rounds` × `perRound` times each after `warmups`; the first command is
 * the floor. Figures per command: every run's wall, CPU and faults, and per round the difference of
 * its medians to the floor's (wall and CPU).
 */
export async function interleaved(meter: SpawnMeter, commands: Command[], options: { rounds: number; perRound: number; warmups: number; prefix: string }): Promise<Figures> {
  const { rounds, perRound, warmups, prefix } = options;
  for (let i = 0; i < warmups; i++) for (const c of commands) await meter.run(c.argv);
  const all = commands.map(() => ({ wall: [] as number[], cpu: [] as number[], faults: [] as number[], dWall: [] as number[], dCpu: [] as number[], dFaults: [] as number[] }));
  const loads: number[] = [];
  const median = (xs: number[]) => summarize(xs).p50;
  for (let round = 0; round < rounds; round++) {
    loads.push(loadavg()[0] as number);
    const runs = commands.map(() => [] as Usage[]);
    for (let i = 0; i < perRound; i++) {
      // Rotated each time, so no command always follows the same one.
      for (let k = 0; k < commands.length; k++) {
        const j = (i + k) % commands.length;
        runs[j]!.push(await meter.run(commands[j]!.argv));
      }
    }
    const floor = runs[0]!;
    runs.forEach((rs, j) => {
      const a = all[j]!;
      a.wall.push(...rs.map((r) => r.wall_ms));
      a.cpu.push(...rs.map((r) => r.cpu_ms));
      a.faults.push(...rs.map((r) => r.minflt));
      a.dWall.push(median(rs.map((r) => r.wall_ms)) - median(floor.map((r) => r.wall_ms)));
      a.dCpu.push(median(rs.map((r) => r.cpu_ms)) - median(floor.map((r) => r.cpu_ms)));
      a.dFaults.push(median(rs.map((r) => r.minflt)) - median(floor.map((r) => r.minflt)));
    });
  }
  loads.push(loadavg()[0] as number);
  const figures: Figures = { [`${prefix}_load`]: figure("load", loads, "1-minute load average at the start of each round and at the end") };
  commands.forEach((c, j) => {
    const a = all[j]!;
    const what = c.argv.map((x) => x.split("/").pop()).join(" ");
    figures[`${prefix}_${c.name}_wall`] = figure("ms", a.wall, what);
    figures[`${prefix}_${c.name}_cpu`] = figure("ms", a.cpu, "CPU time (user + system), wait4");
    figures[`${prefix}_${c.name}_faults`] = figure("faults", a.faults, "minor page faults, wait4");
    if (j === 0) return;
    figures[`${prefix}_${c.name}_delta_wall`] = figure("ms", a.dWall, `per round: median − the floor's median (${rounds} rounds of ${perRound})`);
    figures[`${prefix}_${c.name}_delta_cpu`] = figure("ms", a.dCpu, "per round: CPU time median − the floor's");
    figures[`${prefix}_${c.name}_delta_faults`] = figure("faults", a.dFaults, "per round: page faults median − the floor's");
  });
  return figures;
}

export async function startupFigures(options: { smoke?: boolean } = {}): Promise<Figures> {
  const smoke = options.smoke ?? false;
  const { home, remove } = tempHome("awrepl-bench-start-");
  const env = { ...process.env, AWREPL_HOME: home, AWREPL_PYTHON: PYTHON, NO_COLOR: "1", AWREPL_SESSION: undefined };
  const awrepl = join(home, "awrepl");
  let meter: SpawnMeter | undefined;
  try {
    log("startup: compiling the floor (an empty program) and the 20-line client with scripts/build.ts's flags");
    const floor = emptyBunProgram(home);
    const client = join(home, "client20");
    compileLikeAwrepl(join(REPO, "scripts/bench/floor_client.ts"), client);
    // A fresh copy, like the two binaries built just now (see the top of this file).
    copyFileSync(AWREPL_BIN, awrepl);
    const commands: Command[] = [
      { name: "floor", argv: [floor] },
      { name: "client20", argv: [client, "s"], expect: "2\n" },
      { name: "run", argv: [awrepl, "-s", "s", "run", "1+1"], expect: "2\n" },
      { name: "vars", argv: [awrepl, "-s", "s", "vars"] },
      { name: "sessions", argv: [awrepl, "sessions"] },
      { name: "version", argv: [awrepl, "--version"], expect: `${(JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version}\n` },
      { name: "help", argv: [awrepl, "--help"] },
      { name: "python", argv: [PYTHON, "-c", "pass"] },
    ];
    log(`startup: warming the supervisor and session s (${home})`);
    timeSpawn([awrepl, "-s", "s", "run", "x = 1"], { env, cwd: home });
    for (const c of commands) {
      const out = timeSpawn(c.argv, { env, cwd: home }).stdout;
      if (c.expect !== undefined && out !== c.expect) throw new Error(`${c.argv.join(" ")} printed ${JSON.stringify(out)}, not ${JSON.stringify(c.expect)}`);
    }
    const before = process.env.AWREPL_BENCH_BEFORE;
    if (before) {
      const old = join(home, "awrepl-before");
      copyFileSync(before, old);
      for (const c of commands.filter((x) => ["run", "vars", "sessions", "version", "help"].includes(x.name))) {
        commands.push({ name: `before_${c.name}`, argv: [old, ...c.argv.slice(1)] });
      }
      log(`startup: ${before} joins the rounds as before_*`);
    }
    meter = new SpawnMeter(env);
    const rounds = smoke ? 1 : 3;
    const perRound = smoke ? 2 : 30;
    log(`startup: ${commands.length} commands interleaved, ${rounds} rounds of ${perRound} (load ${loadavg().map((x) => x.toFixed(2)).join(" ")})`);
    return await interleaved(meter, commands, { rounds, perRound, warmups: smoke ? 1 : 3, prefix: "startup" });
  } finally {
    meter?.close();
    timeSpawn([awrepl, "daemon", "stop"], { env, cwd: home, allowFailure: true });
    sweepHome(home, remove);
  }
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const figures = await startupFigures({ smoke: args.includes("--smoke") });
  for (const [name, f] of Object.entries(figures)) {
    if (!name.includes("delta")) continue;
    const s = summarize(f.samples);
    log(`${name}: median ${s.p50.toFixed(2)} ${f.unit} (${s.min.toFixed(2)}–${s.max.toFixed(2)})`);
  }
  if (args.includes("--json")) console.log(JSON.stringify(figures));
}
