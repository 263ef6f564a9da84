// No module the CLI's fast paths load imports a node: module at the top (docs/architecture.md, "Performance rules"; the team's
// "Performance" rule; lib/core/fastio.ts says what each costs per start). Checked on Bun's own module
// graph of main.ts, the way the executable is bundled: every module reachable through static imports,
// plus the modules `vars` and `sessions` import dynamically. A node: module a fast path needs only now
// and then is imported where it is used (`await import("node:fs")`), which this test allows.
import { expect, test } from "bun:test";
import { builtinModules } from "node:module";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../..");
/** What main() imports dynamically on a fast path (lib/cli/program.ts, session_commands.ts). */
const FAST_PATH_DYNAMIC = ["lib/cli/session_commands.ts", "lib/session/snapshot_names.ts"];

type Metafile = { inputs: Record<string, { imports: { path: string; kind: string; original?: string; external?: boolean }[] }> };

test("the modules of run, vars, sessions, --version and --help import no node: module at the top", async () => {
  const build = await Bun.build({ entrypoints: [join(ROOT, "main.ts")], root: ROOT, target: "bun", format: "esm", splitting: true, metafile: true });
  expect(build.success).toBe(true);
  const { inputs } = build.metafile as unknown as Metafile;
  const entry = Object.keys(inputs).find((k) => k === "main.ts" || k.endsWith("/main.ts"));
  expect(entry).toBeDefined();
  const reached = new Set<string>();
  const todo = [entry as string, ...FAST_PATH_DYNAMIC.map((m) => Object.keys(inputs).find((k) => k.endsWith(m)) ?? m)];
  const offenders: string[] = [];
  while (todo.length > 0) {
    const module = todo.pop() as string;
    if (reached.has(module)) continue;
    reached.add(module);
    const info = inputs[module];
    expect({ module, known: info !== undefined }).toEqual({ module, known: true });
    for (const imp of info?.imports ?? []) {
      if (imp.kind !== "import-statement") continue;
      const name = imp.original ?? imp.path;
      // (help_text.ts's macro import is external too: it runs at build time.)
      if (name.startsWith("node:") || builtinModules.includes(name)) offenders.push(`${module} imports ${name}`);
      else if (!imp.external) todo.push(imp.path);
    }
  }
  expect(reached.size).toBeGreaterThan(20); // the graph was walked: main, program, run, client, settings, ...
  expect(offenders).toEqual([]);
});
