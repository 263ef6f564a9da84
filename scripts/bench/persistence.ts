// What persistence costs: autosave per cell (a cell that changes the namespace, one that does not,
// with a small and a larger namespace), an explicit snapshot and a restore. Back-to-back cells, so
// each cell waits for the previous cell's autosave: the per-cell figure is the whole cost.
// Then big state (benchBigState): 1 GiB of bytes, and 1,000,000 small dicts, snapshotted and restored
// by path and streamed over the protocol, each beside its floor measured in the same worker in
// alternating rounds (pickle.dump(protocol=5) + write + fsync of the same value; read + pickle.load),
// with the worker's peak RSS beside the payload's size.
//
//   bun scripts/bench/persistence.ts [--smoke] [--big-only]   prints its figures as JSON and a short table
import { join } from "node:path";
import type { SnapshotTransfer } from "../../lib/session/snapshots.ts";
import { ReplSession } from "../../lib/session/session.ts";
import { type BenchOptions, figure, type Figures, log, PYTHON, summarize, tempHome } from "./lib.ts";

/** Per-cell wall time of `count` back-to-back cells, in ms (the first `warm` are not counted). */
async function perCell(session: ReplSession, cell: (i: number) => string, count: number, warm = 20): Promise<number[]> {
  for (let i = 0; i < warm; i++) await session.execute(cell(-1 - i));
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    const r = await session.execute(cell(i));
    samples.push(performance.now() - start);
    if (r.status !== "ok") throw new Error(`${cell(i)}: ${r.exception}`);
  }
  // The last cell's autosave runs after its result: wait for it so the next figure starts clean.
  await session.variables();
  return samples;
}

export async function benchPersistence(options: BenchOptions = {}): Promise<Figures> {
  const n = options.smoke ? 20 : 300;
  const figures: Figures = {};
  const home = tempHome("awrepl-bench-persist-");
  try {
    const plain = await ReplSession.start("plain", { python: PYTHON, home: home.home });
    const auto = await ReplSession.start("auto", { python: PYTHON, home: home.home, autosave: true });
    try {
      for (const s of [plain, auto]) await s.execute("x = 0\ndef f(v): return v + 1\nrows = [{'id': i, 'name': str(i)} for i in range(100)]");
      figures["cell that changes x, no autosave"] = figure("ms", await perCell(plain, (i) => `x = ${i}`, n));
      figures["cell that changes x, autosave"] = figure("ms", await perCell(auto, (i) => `x = ${i}`, n), "small namespace: 3 names, ~3 KB snapshot");
      figures["cell that changes nothing, no autosave"] = figure("ms", await perCell(plain, () => "x + 1", n));
      figures["cell that changes nothing, autosave"] = figure("ms", await perCell(auto, () => "x + 1", n), "small: saved anyway");
      for (const s of [plain, auto]) await s.execute("big = list(range(200_000))\nnames = {f'k{i}': i for i in range(2_000)}");
      figures["cell that changes x, 2 MB namespace, no autosave"] = figure("ms", await perCell(plain, (i) => `x = ${i}`, Math.ceil(n / 3)));
      figures["cell that changes x, 2 MB namespace, autosave"] = figure("ms", await perCell(auto, (i) => `x = ${i}`, Math.ceil(n / 3)));
      figures["cell that changes nothing, 2 MB namespace, autosave"] = figure("ms", await perCell(auto, () => "x + 1", n), "only the variables check");
      const snaps: number[] = [];
      const restores: number[] = [];
      for (let i = 0; i < Math.ceil(n / 10); i++) {
        let t = performance.now();
        await plain.snapshot();
        snaps.push(performance.now() - t);
        t = performance.now();
        await plain.restore();
        restores.push(performance.now() - t);
      }
      figures["snapshot(), 2 MB namespace"] = figure("ms", snaps);
      figures["restore(), 2 MB namespace"] = figure("ms", restores);
    } finally {
      await Promise.all([plain.close(), auto.close()]);
    }
  } finally {
    home.remove();
  }
  Object.assign(figures, await benchBigState(options));
  return figures;
}

/** The worker's peak RSS so far, in MiB (ru_maxrss), read by a cell. */
async function workerPeakMiB(session: ReplSession): Promise<number> {
  const r = await session.execute("import resource as _r\n_r.getrusage(_r.RUSAGE_SELF).ru_maxrss / 1024");
  return Number(r.value);
}

async function bigStateFigures(
  figures: Figures,
  label: string,
  name: string,
  make: string,
  transfer: SnapshotTransfer,
  home: string,
  rounds: number,
): Promise<void> {
  const session = await ReplSession.start(`big-${transfer}`, {
    python: PYTHON,
    home,
    snapshotTransfer: transfer,
    snapshotMaxBytes: 0,
    snapshotMaxVariableBytes: 0,
    timeoutMs: 0,
  });
  const ok = async (code: string) => {
    const r = await session.execute(code);
    if (r.status !== "ok") throw new Error(`${code}: ${r.exception}`);
    return r;
  };
  const path = join(home, `${transfer}.pkl`);
  const floorFile = join(home, "floor.pkl");
  try {
    await ok(make);
    const held = await workerPeakMiB(session);
    // Memory first, before any floor cell (pickle.load of the floor's file makes a copy of its own).
    const report = await session.snapshot(path);
    const afterSnapshot = await workerPeakMiB(session);
    await session.restore(path);
    const afterRestore = await workerPeakMiB(session);
    const mib = report.bytes / 2 ** 20;
    figures[`${label}: worker peak RSS growth, snapshot (${transfer})`] = figure("MiB", [afterSnapshot - held], `payload ${mib.toFixed(0)} MiB; the worker held ${held.toFixed(0)} MiB`);
    figures[`${label}: worker peak RSS growth, snapshot + restore (${transfer})`] = figure(
      "MiB",
      [afterRestore - held],
      "a restore replaces the live value: old and new are both alive until it is bound",
    );
    const write = `import pickle as _p, os as _o\nwith open(${JSON.stringify(floorFile)}, 'wb') as _f:\n    _p.dump(${name}, _f, protocol=5); _f.flush(); _o.fsync(_f.fileno())`;
    const read = `import pickle as _p\nwith open(${JSON.stringify(floorFile)}, 'rb') as _f:\n    _y = _p.load(_f)\ndel _y`;
    const samples = { floorWrite: [] as number[], snapshot: [] as number[], floorRead: [] as number[], restore: [] as number[] };
    const time = async (into: number[], call: () => Promise<unknown>) => {
      const start = performance.now();
      await call();
      into.push(performance.now() - start);
    };
    for (let i = 0; i < rounds; i++) {
      await time(samples.floorWrite, () => ok(write));
      await time(samples.snapshot, () => session.snapshot(path));
      await time(samples.floorRead, () => ok(read));
      await time(samples.restore, () => session.restore(path));
    }
    if (transfer === "path") {
      figures[`${label}: floor, pickle.dump(protocol=5) + write + fsync`] = figure("ms", samples.floorWrite, "a cell in the same worker, alternating with the snapshots");
      figures[`${label}: floor, read + pickle.load`] = figure("ms", samples.floorRead, "a cell in the same worker, alternating with the restores");
    }
    figures[`${label}: snapshot (${transfer})`] = figure("ms", samples.snapshot, `${mib.toFixed(0)} MiB payload`);
    figures[`${label}: restore (${transfer})`] = figure("ms", samples.restore);
  } finally {
    await session.close();
  }
}

/** Big state by path and streamed: 1 GiB of random bytes, and 1,000,000 small dicts (smoke: small). */
export async function benchBigState(options: BenchOptions = {}): Promise<Figures> {
  const figures: Figures = {};
  const rounds = options.smoke ? 1 : 5;
  const bytes = options.smoke ? 8 << 20 : 1 << 30;
  const dicts = options.smoke ? 10_000 : 1_000_000;
  const cases: [string, string, string][] = [
    [`${bytes / 2 ** 20} MiB of bytes`, "x", `import os\nx = os.urandom(${bytes})`],
    [`${dicts.toLocaleString("en-US")} small dicts`, "rows", `rows = [{'id': i, 'name': str(i)} for i in range(${dicts})]`],
  ];
  for (const [label, name, make] of cases) {
    for (const transfer of ["path", "stream"] as const) {
      const home = tempHome("awrepl-bench-big-");
      try {
        await bigStateFigures(figures, label, name, make, transfer, home.home, rounds);
      } finally {
        home.remove();
      }
    }
  }
  return figures;
}

if (import.meta.main) {
  const smoke = process.argv.includes("--smoke");
  const figures = process.argv.includes("--big-only") ? await benchBigState({ smoke }) : await benchPersistence({ smoke });
  for (const [name, f] of Object.entries(figures)) {
    const s = summarize(f.samples);
    log(`${name.padEnd(52)} p50 ${s.p50.toFixed(2)} ${f.unit}   p99 ${s.p99.toFixed(2)} ${f.unit}   (n=${s.n})`);
  }
  console.log(JSON.stringify(figures));
}
