// How a session gets a ready worker: a matching warm spare when its host keeps some, otherwise a new
// process running the runtime's cached bytecode (dropped and replaced by the source when it will not
// start); then, a little later, the spare refilled for the next session.
import { rmSync } from "node:fs";
import { AwreplError } from "../core/errors.ts";
import type { SandboxProfile } from "../protocol/api.ts";
import type { ResourceLimits } from "../protocol/limits.ts";
import type { Interpreter } from "../worker/interpreter.ts";
import { type Launch, runtimeLaunch } from "../worker/launch.ts";
import { spareKey, type SpareWorkers } from "../worker/spare.ts";
import { Worker, type WorkerListeners, type WorkerOptions } from "../worker/worker.ts";

/** Everything that decides which worker a session runs (a spare fits only when all of it matches). */
export type WorkerSpec = {
  home: string;
  interpreter: Interpreter;
  cwd: string;
  env: NodeJS.ProcessEnv;
  spares: SpareWorkers | null;
  /** Run the worker under bubblewrap with this profile (SessionOptions.sandbox). */
  sandbox?: SandboxProfile | null;
  /** Resource limits of the worker and what it starts (SessionOptions.limits; docs/limits.md). */
  limits?: ResourceLimits | null;
};

/** How long after a session's worker is ready its replacement spare is started. */
const SPARE_DELAY_MS = 100;

/**
 * A ready worker for `spec` whose events go to `listeners`, and `refillSpare`, for the session to call
 * once it keeps the worker (a session closed meanwhile does not).
 */
export async function startSessionWorker(spec: WorkerSpec, listeners: WorkerListeners): Promise<{ worker: Worker; refillSpare(): void }> {
  const launchOptions = { sandbox: spec.sandbox, cwd: spec.cwd, env: spec.env, limits: spec.limits };
  let launch = await runtimeLaunch(spec.home, spec.interpreter, launchOptions);
  const spares = spec.spares;
  let worker = spares ? await spares.take(keyOf(spec, launch)) : null;
  if (worker) {
    worker.setListeners(listeners);
  } else {
    try {
      worker = await Worker.start(workerOptions(spec, launch, listeners));
    } catch (err) {
      // A damaged bytecode cache (truncated, another build's magic number) must not lock a user
      // out: drop it and start from the source.
      if (!launch.bytecode || !(err instanceof AwreplError) || err.code !== "no_interpreter") throw err;
      rmSync(launch.bytecode, { force: true });
      launch = await runtimeLaunch(spec.home, spec.interpreter, { ...launchOptions, bytecode: false });
      worker = await Worker.start(workerOptions(spec, launch, listeners));
    }
  }
  const used = launch;
  const refillSpare = () => {
    if (!spares) return;
    // The next session (or this one's next worker) takes a warm spare, started a little later: a
    // spawn costs the host 1-5 ms of synchronous work, which must not delay this session's first cell.
    const timer = setTimeout(() => spares.fill(keyOf(spec, used), () => Worker.start(workerOptions(spec, used, {}))), SPARE_DELAY_MS);
    timer.unref?.();
  };
  return { worker, refillSpare };
}

/**
 * A spare fits when its command line, directory, environment, sandbox profile and limits all match.
 * The limits are in the key because the command line does not carry them all: a cgroup's values are
 * set on the group made for each process (WorkerLimits), not in its preamble, so two sessions with
 * other memory limits in a cgroup have the same argv. Limited sessions still take spares (a spare
 * made for the same plan is as good as a new process), which keeps their start as fast as any other.
 */
function keyOf(spec: WorkerSpec, launch: Launch): string {
  const plan = launch.limits;
  const limits = plan ? JSON.stringify([plan.enforced, plan.mechanisms]) : "";
  return spareKey(launch.argv, spec.cwd, launch.env ?? spec.env, `${spec.sandbox ? JSON.stringify(spec.sandbox) : ""}\0${limits}`);
}

function workerOptions(spec: WorkerSpec, launch: Launch, listeners: WorkerListeners): WorkerOptions {
  const label = spec.sandbox ? `${spec.interpreter.command} (sandboxed)` : spec.interpreter.command;
  return {
    argv: launch.argv,
    label,
    stdinPreamble: launch.stdinPreamble,
    cwd: spec.cwd,
    env: launch.env ?? spec.env,
    kind: launch.kind,
    limits: launch.limits,
    netProxy: launch.netProxy,
    ...listeners,
  };
}
