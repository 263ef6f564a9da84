// Declarations only: the resource limits of one session's worker and the hosts its sandbox may reach,
// as they travel (a session's spec, a supervisor request, a config file, MCP, the library: snake_case
// on the wire), and what the worker layer reports about them. Enforced by lib/worker/limits/;
// docs/limits.md says which mechanism each limit gets on which machine.

/** The limits asked for one session; every field is optional (absent: no limit of that kind). */
export type ResourceLimits = {
  /** Memory of the worker and everything it starts, in bytes (cgroup), or of each process (rlimit: RLIMIT_DATA). */
  memory_bytes?: number;
  /** Processes and threads of the worker and everything it starts, together (the worker itself uses a few). */
  max_procs?: number;
  /** CPU time per wall-clock time, in percent of one CPU (200: two CPUs' worth). */
  cpu_percent?: number;
  /** The largest file a process may write, in bytes (RLIMIT_FSIZE, enforced in 512-byte blocks). */
  max_file_bytes?: number;
  /** A limit this machine cannot enforce is left out (and reported as "none") instead of failing the start. */
  best_effort?: boolean;
};

/** How one limit is enforced. "none": asked, but not enforceable here, and best_effort let the start go on. */
export type LimitMechanism = "cgroup v2" | "cgroup v1" | "rlimit" | "none";

/** The mechanism each asked-for limit got (a limit not asked for is absent). */
export type LimitMechanisms = {
  memory?: LimitMechanism;
  procs?: LimitMechanism;
  cpu?: LimitMechanism;
  file_size?: LimitMechanism;
};

/** What the worker's limits are and what it uses now (for `sessions` and inspect-style facts). */
export type LimitsUsage = {
  /** The limits as enforced (values rounded to what the mechanism takes: KiB, 512-byte blocks). */
  limits: Omit<ResourceLimits, "best_effort">;
  mechanisms: LimitMechanisms;
  /** Memory in use now: the cgroup's charge, or the resident memory of the worker's processes. */
  memory_bytes: number | null;
  /** The highest memory use seen: the cgroup's peak, or the worker's own peak RSS. */
  peak_memory_bytes: number | null;
  /** CPU seconds used by the worker and its processes (user + system). */
  cpu_seconds: number | null;
  /** Processes and threads in use now. */
  procs: number | null;
};

/**
 * The hosts a sandboxed worker may reach through awrepl's proxy: `host`, `host:port`, `*.domain`
 * (any name below it), an IPv4 address or a bracketed IPv6 one (`[::1]:8080`). Without a port, 80 and
 * 443. A private, loopback or link-local address is reached only when it, or the host name that
 * resolves to it, is named here itself (not through a wildcard).
 */
export type NetAllowList = string[];
