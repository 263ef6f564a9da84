// The few lines of /bin/sh a limited worker starts through, before any user code can run: Bun's spawn
// has no pre-exec hook, so the process applies its limits to itself and then execs the real command
// (the interpreter, or bwrap in front of it), keeping its pid. It joins its cgroup(s) by writing its
// own pid to cgroup.procs (the directories arrive as the first lines of its stdin, one each, so that
// the command line stays the same for every worker of one plan and a spare still matches), sets the
// rlimits, ignores SIGXFSZ (a write past the file size limit is then EFBIG for Python, not a death),
// and raises its own OOM score above the host's. A shell costs ~0.6 ms where a Python preamble costs
// a second interpreter start (~13 ms here). Nothing of the runtime protocol or runtime.py changes: the
// shell reads exactly its lines (`read` takes a pipe byte by byte) and the rest of stdin is the runtime's.
import type { LimitsPlan } from "./plan.ts";

/** argv[3] of the preamble (its $0), by which a command line is told to start with it. */
export const PREAMBLE_NAME = "awrepl-limits";
/** The exit status of a preamble that could not apply a limit (its message is on stderr). */
export const PREAMBLE_FAILED = 125;

/** The preamble's argv; the command to exec follows it. */
export function preambleArgv(plan: Pick<LimitsPlan, "cgroup" | "rlimits" | "oomScoreAdj">): string[] {
  const fail = (what: string) => `{ echo "awrepl: could not ${what}" >&2; exit ${PREAMBLE_FAILED}; }`;
  const lines = ["trap '' XFSZ"];
  const joins = plan.cgroup?.join === "preamble" ? plan.cgroup.dirs : 0;
  for (let i = 0; i < joins; i++) {
    lines.push(`read -r g || ${fail("read its cgroup")}`, `echo $$ > "$g/cgroup.procs" || ${fail("join the cgroup $g")}`);
  }
  const r = plan.rlimits;
  if (r.dataKiB !== undefined) lines.push(`ulimit -d ${int(r.dataKiB)} || ${fail("set RLIMIT_DATA")}`);
  if (r.fsizeBlocks !== undefined) lines.push(`ulimit -f ${int(r.fsizeBlocks)} || ${fail("set RLIMIT_FSIZE")}`);
  // bash and zsh call RLIMIT_NPROC -u, dash and busybox -p.
  if (r.nproc !== undefined) lines.push(`{ ulimit -u ${int(r.nproc)} || ulimit -p ${int(r.nproc)}; } 2>/dev/null || ${fail("set RLIMIT_NPROC")}`);
  // Raising one's own score needs no privilege; a kernel without the file just keeps the default.
  lines.push(`echo ${int(plan.oomScoreAdj)} > /proc/self/oom_score_adj 2>/dev/null`, 'exec "$@"');
  return ["/bin/sh", "-c", lines.join("\n"), PREAMBLE_NAME];
}

/** What a worker's stdin starts with for the preamble: its cgroup directories, one a line. */
export function preambleInput(dirs: readonly string[]): Uint8Array {
  for (const d of dirs) if (d.includes("\n")) throw new Error(`a cgroup path with a newline: ${JSON.stringify(d)}`);
  return new TextEncoder().encode(dirs.map((d) => `${d}\n`).join(""));
}

/** The command a preamble execs (argv itself when it has none): what tells a worker's kind and its transport. */
export function afterPreamble(argv: readonly string[]): readonly string[] {
  return argv[0] === "/bin/sh" && argv[1] === "-c" && argv[3] === PREAMBLE_NAME ? argv.slice(4) : argv;
}

/** Only whole numbers reach the script (they were checked before; this keeps the script safe whatever the caller passed). */
function int(n: number): string {
  if (!Number.isSafeInteger(n) || n < -1000) throw new Error(`not a whole number for the limits preamble: ${n}`);
  return String(n);
}
