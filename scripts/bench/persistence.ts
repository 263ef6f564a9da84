// What persistence costs: autosave per cell (a cell that changes the namespace, one that does not,
// with a small and a larger namespace), an explicit snapshot and a restore. Back-to-back cells, so
// each cell waits for the previous cell's autosave: the per-cell figure is the whole cost.
//
//   bun scripts/bench/persistence.ts [--smoke]      prints its figures as JSON and a short table
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
  return figures;
}

if (import.meta.main) {
  const figures = await benchPersistence({ smoke: process.argv.includes("--smoke") });
  for (const [name, f] of Object.entries(figures)) {
    const s = summarize(f.samples);
    log(`${name.padEnd(52)} p50 ${s.p50.toFixed(2)} ${f.unit}   p99 ${s.p99.toFixed(2)} ${f.unit}   (n=${s.n})`);
  }
  console.log(JSON.stringify(figures));
}
