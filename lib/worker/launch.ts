// How a worker process is started for an interpreter: a local one runs the runtime's cached bytecode
// (or its source file); any other command line gets the one-line bootstrap and the source on stdin;
// a sandboxed one runs the local interpreter under bubblewrap (sandbox.ts) with the bytecode bound in.
// Limits (limits/plan.ts) put a /bin/sh preamble in front (limits/preamble.ts), a sandbox's allow list
// the proxy's forwarder in front of the runtime inside it (net_forwarder.ts); docs/limits.md.
import type { SandboxProfile } from "../protocol/api.ts";
import type { ResourceLimits } from "../protocol/limits.ts";
import { AwreplError } from "../core/errors.ts";
import { bootstrapLine, runtimeBytecode, runtimeFile, runtimeSource } from "../runtime/source.ts";
import { dirname } from "node:path";
import { socketPath, stateDir } from "../settings/home.ts";
import { markSandboxWritten, sandboxWrittenRoot } from "../settings/sandbox_written.ts";
import { type Interpreter, shellQuote } from "./interpreter.ts";
import type { WorkerKind } from "./transport_failure.ts";
import { type LimitsHost, type LimitsPlan, planLimits, workerOomScore } from "./limits/plan.ts";
import type { AllowingProfile } from "./sandbox.ts";
import { preambleArgv } from "./limits/preamble.ts";
import type { NetProxySpec } from "./net_proxy.ts";

export type Launch = {
  argv: string[];
  stdinPreamble?: Buffer;
  /** The cached bytecode this launch runs, if any (a caller can drop it when it fails to start). */
  bytecode?: string;
  /** What the process is to the runtime (see WorkerKind). */
  kind: WorkerKind;
  /** The environment to spawn it with, when the launch decides it (a sandbox's allowlist); else the caller's. */
  env?: Record<string, string>;
  /** The limits' plan (each process started from this launch gets its own cgroup from it: WorkerOptions.limits). */
  limits?: LimitsPlan;
  /** The proxy the sandbox's allow list goes through (WorkerOptions.netProxy: started with the worker). */
  netProxy?: NetProxySpec;
};

export type LaunchOptions = {
  /** false: run the source, not the cached bytecode (after the bytecode failed to start). */
  bytecode?: boolean;
  /** Run under bubblewrap with this profile (local interpreters only). */
  sandbox?: SandboxProfile | null;
  /** The worker's directory and environment (a sandbox needs both to build its command line). */
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Resource limits (local and sandboxed interpreters): the start fails when one cannot be enforced, unless best_effort. */
  limits?: ResourceLimits | null;
  /** What the machine offers for limits (default: probed once per process; tests pass one without cgroups). */
  limitsHost?: LimitsHost;
};

/**
 * How to start a worker for `interpreter`: a local one runs the cached bytecode (or the source);
 * a remote command gets `-c BOOTSTRAP` and the source over stdin; with `sandbox`, the local
 * interpreter under bwrap.
 */
export async function runtimeLaunch(home: string, interpreter: Interpreter, options: LaunchOptions = {}): Promise<Launch> {
  const limited = options.limits && Object.keys(options.limits).some((k) => k !== "best_effort");
  if (limited && !interpreter.local) {
    throw new AwreplError("usage", `Resource limits apply to a local or sandboxed interpreter; ${JSON.stringify(interpreter.command)} is a command line (set limits on its own side)`);
  }
  const planned = limited ? planLimits(options.limits as ResourceLimits, options.limitsHost) : null;
  // A local worker is moved into its cgroup by the host while Python starts; a sandbox's bwrap by its preamble.
  const plan = planned?.cgroup && !options.sandbox ? { ...planned, cgroup: { ...planned.cgroup, join: "host" as const } } : planned;
  const launch = options.sandbox ? await sandboxedLaunch(home, interpreter, options.sandbox, options) : await plainLaunch(home, interpreter, options);
  if (!plan && launch.kind !== "sandbox") return launch;
  // A sandbox always goes through the preamble (its OOM score; bwrap forks at once, so the host cannot
  // set it afterwards), a limited worker for its limits. A local worker without limits gets its OOM
  // score from Worker, after the spawn.
  const preamble = preambleArgv(plan ?? { cgroup: null, rlimits: {}, oomScoreAdj: workerOomScore() });
  return { ...launch, argv: [...preamble, ...launch.argv], ...(plan ? { limits: plan } : {}) };
}

async function plainLaunch(home: string, interpreter: Interpreter, options: LaunchOptions): Promise<Launch> {
  if (interpreter.local) {
    const pyc = options.bytecode === false ? null : await runtimeBytecode(home, interpreter);
    // Where a sandbox could write, imports never look in the cwd (a planted pickle.py, dill.py).
    const env = sandboxWrittenRoot(home, options.cwd ?? process.cwd()) ? { ...stringEnv(options.env ?? process.env), AWREPL_SAFE_PATH: "1" } : undefined;
    const argv = [...interpreter.argv, pyc ?? (await runtimeFile(home))];
    return { argv, ...(pyc ? { bytecode: pyc } : {}), kind: "local", ...(env ? { env } : {}) };
  }
  const src = await runtimeSource();
  const bootstrap = bootstrapLine(src.text);
  // ssh joins its arguments into one remote shell command line: quote the bootstrap for that shell.
  const joinsArgs = /^(ssh|slogin)$/.test((interpreter.argv[0] ?? "").split("/").pop() ?? "");
  const code = joinsArgs ? shellQuote(bootstrap) : bootstrap;
  return {
    argv: [...interpreter.argv, "-u", "-c", code],
    stdinPreamble: Buffer.concat([Buffer.from(`${src.bytes.length}\n`, "ascii"), src.bytes]),
    kind: "transport",
  };
}

/** sandbox.ts, loaded on the first sandboxed launch (it is not on any other path). */
let sandboxModule: Promise<typeof import("./sandbox.ts")> | undefined;

async function sandboxedLaunch(home: string, interpreter: Interpreter, profile: SandboxProfile, options: LaunchOptions): Promise<Launch> {
  if (!interpreter.local) {
    throw new AwreplError("usage", `The sandbox runs a local interpreter; ${JSON.stringify(interpreter.command)} is a command line (isolate a remote worker on its own side)`);
  }
  const [{ sandboxLaunch }, { proxySocketPath }, { forwarderArgv }] = await Promise.all([sandboxModule ??= import("./sandbox.ts"), import("./net_proxy.ts"), import("./net_forwarder.ts")]);
  const pyc = options.bytecode === false ? null : await runtimeBytecode(home, interpreter);
  const file = pyc ?? (await runtimeFile(home));
  const env = options.env ?? process.env;
  // The state directory and the socket's: hidden in the sandbox, even under a writable path; and the
  // default state directory too when this one is another (its supervisor and snapshots are the user's).
  const hide = [...new Set([home, dirname(socketPath(home)), stateDir({ ...env, AWREPL_HOME: undefined })])];
  const allow = (profile as AllowingProfile).allow ?? [];
  const netProxy = allow.length ? { allow, socket: proxySocketPath(dirname(socketPath(home)), allow) } : undefined;
  const sandbox = sandboxLaunch(profile, { cwd: options.cwd ?? process.cwd(), env, interpreterPaths: interpreter.paths ?? [], runtimeFile: file, hide, proxySocket: netProxy?.socket });
  await markSandboxWritten(home, sandbox.writable);
  const forwarder = netProxy ? forwarderArgv(interpreter.argv[0] as string) : [];
  const argv = [...sandbox.prefix, ...forwarder, ...interpreter.argv, sandbox.runtimePath];
  return { argv, bytecode: pyc ?? undefined, kind: "sandbox", env: sandbox.env, ...(netProxy ? { netProxy } : {}) };
}

function stringEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  return out;
}
