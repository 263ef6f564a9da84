// bubblewrap for tests: is it usable here, and why not. The same check awrepl's sandbox depends on:
// bwrap on PATH (lib/worker/sandbox.ts findBwrap, with its install hint), user namespaces allowed
// (Ubuntu 24.04's AppArmor restriction and `kernel.unprivileged_userns_clone=0` refuse them), and the
// flags the default profile needs (--disable-userns: bwrap >= 0.8). One probe per process, bounded.
// Also: workers started from a launch with options (a sandbox, limits, an allow list), and one cell.
import { spawnSync } from "node:child_process";
import { resolveInterpreter } from "../../lib/worker/interpreter.ts";
import { type LaunchOptions, runtimeLaunch } from "../../lib/worker/launch.ts";
import { findBwrap } from "../../lib/worker/sandbox.ts";
import { Worker, type WorkerOptions } from "../../lib/worker/worker.ts";
import { PYTHON } from "./common.ts";
import { within } from "./procs.ts";

export type BwrapCheck = { ok: true; bwrap: string; version: string } | { ok: false; reason: string };

let cached: BwrapCheck | null = null;

export function bwrapAvailable(): BwrapCheck {
  cached ??= probeBwrap();
  return cached;
}

/**
 * Throws the reason the sandbox cannot run here. Sandbox tests call it first: CI installs bubblewrap,
 * so a machine without it fails them with the reason rather than skipping them silently.
 */
export function requireBwrap(): string {
  const check = bwrapAvailable();
  if (!check.ok) throw new Error(`the sandbox tests need a working bubblewrap: ${check.reason}`);
  return check.bwrap;
}

/** The default profile's namespaces and flags around /bin/true. */
export const BWRAP_FLOOR_FLAGS = [
  "--unshare-all",
  "--unshare-user",
  "--disable-userns",
  "--cap-drop",
  "ALL",
  "--new-session",
  "--die-with-parent",
  "--ro-bind",
  "/",
  "/",
  "--dev",
  "/dev",
  "--proc",
  "/proc",
];

function probeBwrap(): BwrapCheck {
  let bwrap: string;
  try {
    bwrap = findBwrap();
  } catch (err) {
    return { ok: false, reason: (err as Error).message };
  }
  const v = spawnSync(bwrap, ["--version"], { encoding: "utf8", timeout: 5_000 });
  const version = (v.stdout ?? "").trim().replace(/^bubblewrap\s*/, "");
  const r = spawnSync(bwrap, [...BWRAP_FLOOR_FLAGS, "--", "/bin/true"], { encoding: "utf8", timeout: 10_000, env: { PATH: "/usr/bin:/bin" } });
  if (r.error) return { ok: false, reason: `bwrap could not run: ${r.error.message}` };
  if (r.status !== 0) {
    const why = (r.stderr ?? "").trim().split("\n")[0] ?? "";
    const hint = /Operation not permitted|No permissions to create new namespace|setting up uid map/.test(why)
      ? " (user namespaces are refused here: kernel.unprivileged_userns_clone, or AppArmor's restrict_unprivileged_userns on Ubuntu 24.04)"
      : /disable-userns/.test(why)
      ? " (bubblewrap older than 0.8: no --disable-userns)"
      : "";
    return { ok: false, reason: `bwrap ${version} cannot start the default profile: ${why}${hint}` };
  }
  return { ok: true, bwrap, version };
}

/**
 * A worker started the way a session starts one, with launch options a session passes down (a sandbox
 * profile, limits, an allow list): the limits and sandbox tests drive lib/worker directly with it.
 * `stop()` ends every worker it started (process group and all) and waits for their exits.
 */
export function launchedWorkers(home: string) {
  const started: Worker[] = [];
  return {
    async start(options: LaunchOptions, extra: Partial<WorkerOptions> = {}): Promise<Worker> {
      const interpreter = await resolveInterpreter({ python: PYTHON, home });
      const launch = await runtimeLaunch(home, interpreter, options);
      const worker = await Worker.start({
        argv: launch.argv,
        kind: launch.kind,
        env: launch.env ?? options.env,
        cwd: options.cwd,
        stdinPreamble: launch.stdinPreamble,
        limits: launch.limits,
        netProxy: launch.netProxy,
        label: "python3",
        ...extra,
      });
      started.push(worker);
      return worker;
    },
    async stop(): Promise<void> {
      for (const w of started.splice(0)) {
        w.kill();
        await within(w.exited, 10_000, "a test worker's exit");
      }
    },
  };
}

/** One cell's outcome: status, stdout, and the exception's class and message. */
export type CellOutcome = { status: string; out: string; ename: string | null; evalue: string | null };

export async function cell(worker: Worker, code: string, timeoutMs = 30_000): Promise<CellOutcome> {
  let out = "";
  let ename: string | null = null;
  let evalue: string | null = null;
  const done = worker.request({ type: "execute", code }, {
    output: (_stream, text) => {
      out += text;
    },
    error: (e) => {
      ename = e.ename;
      evalue = e.evalue;
    },
  });
  const d = await within(done, timeoutMs, `the cell ${JSON.stringify(code.slice(0, 60))}`);
  return { status: d.status, out, ename, evalue };
}
