// The plan (which mechanism for which limit, and the values) for machines described by hand, and the
// preamble it becomes, run by the real /bin/sh: its rlimits are what /proc/self/limits then says.
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import type { CgroupHost } from "./cgroup.ts";
import { checkLimits, type LimitsHost, planLimits } from "./plan.ts";
import { afterPreamble, PREAMBLE_FAILED, preambleArgv } from "./preamble.ts";

const MiB = 1024 * 1024;
const cgroups = (version: "cgroup v1" | "cgroup v2"): CgroupHost => ({
  parents: { memory: { version, dir: "/cg/memory/awrepl" }, pids: { version, dir: "/cg/pids/awrepl" }, cpu: { version, dir: "/cg/cpu/awrepl" } },
  cpuacct: version === "cgroup v1" ? "/cg/cpuacct/awrepl" : null,
  missing: "",
});
const rootV1: LimitsHost = { platform: "linux", uid: 0, cgroups: cgroups("cgroup v1") };
const rootNoCgroups: LimitsHost = { platform: "linux", uid: 0, cgroups: { parents: {}, cpuacct: null, missing: "cgroup v1 memory: /x is not writable (root is needed)" } };
const userNoCgroups: LimitsHost = { platform: "linux", uid: 1000, cgroups: null };
const mac: LimitsHost = { platform: "darwin", uid: 501, cgroups: null };

describe("checkLimits", () => {
  test("bad values are refused, each naming the limit, its flag and the value", () => {
    const cases: [unknown, string][] = [
      [[], "The limits must be an object"],
      [{ memory: 1 }, 'Unknown limit "memory"'],
      [{ memory_bytes: "512M" }, 'The limit memory_bytes (--memory) must be a whole number of bytes, not "512M"'],
      [{ memory_bytes: 1.5 }, "must be a whole number of bytes, not 1.5"],
      [{ memory_bytes: MiB }, "The limit memory_bytes (--memory) must be at least 32 MiB, not 1 MiB"],
      [{ max_procs: 2 }, "The limit max_procs (--max-procs) must be at least 8, not 2"],
      [{ cpu_percent: 0 }, "The limit cpu_percent (--cpu) must be at least 1%, not 0%"],
      [{ cpu_percent: Number.NaN }, "must be a number of percent of one CPU"],
      [{ max_file_bytes: 100 }, "The limit max_file_bytes (--max-file-size) must be at least 512 bytes, not 100 bytes"],
      [{ best_effort: "yes" }, "best_effort must be true or false"],
    ];
    for (const [value, message] of cases) expect(() => checkLimits(value)).toThrow(message);
    expect(checkLimits({ memory_bytes: 256 * MiB, cpu_percent: 12.5, best_effort: true })).toEqual({ memory_bytes: 256 * MiB, cpu_percent: 12.5, best_effort: true });
  });
});

describe("planLimits", () => {
  test("root with cgroup v1: memory, processes and CPU in groups (one directory per hierarchy), the file size as an rlimit", () => {
    const plan = planLimits({ memory_bytes: 256 * MiB, max_procs: 64, cpu_percent: 50, max_file_bytes: 1000 }, rootV1);
    expect(plan.mechanisms).toEqual({ memory: "cgroup v1", procs: "cgroup v1", cpu: "cgroup v1", file_size: "rlimit" });
    expect(plan.cgroup?.values).toEqual({ memoryBytes: 256 * MiB, maxProcs: 64, cpuPercent: 50 });
    expect(plan.cgroup?.dirs).toBe(4); // memory, pids, cpu, cpuacct
    expect(plan.rlimits).toEqual({ fsizeBlocks: 1 });
    expect(plan.enforced.max_file_bytes).toBe(512); // whole 512-byte blocks, never more than asked
  });

  test("without cgroups: memory as RLIMIT_DATA (whole KiB), processes as RLIMIT_NPROC for a user (on top of what it runs), CPU refused", () => {
    const plan = planLimits({ memory_bytes: 256 * MiB + 100, max_procs: 64 }, userNoCgroups);
    expect(plan.mechanisms).toEqual({ memory: "rlimit", procs: "rlimit" });
    expect(plan.rlimits.dataKiB).toBe(256 * 1024);
    expect(plan.rlimits.nproc).toBeGreaterThanOrEqual(64);
    expect(plan.cgroup).toBeNull();
    expect(() => planLimits({ cpu_percent: 50 }, userNoCgroups)).toThrow("The limit cpu_percent (--cpu) cannot be enforced here");
  });

  test("root without cgroups: max_procs cannot be enforced; the error names each missing limit and what is missing", () => {
    expect(() => planLimits({ max_procs: 64, cpu_percent: 10 }, rootNoCgroups)).toThrow(
      /The limit max_procs \(--max-procs\) cannot be enforced here: the pids cgroup controller is needed \(cgroup v1 memory: \/x is not writable \(root is needed\)\), and RLIMIT_NPROC does not bind root; The limit cpu_percent .* Start without them, or allow best-effort limits/,
    );
  });

  test("best_effort: what cannot be enforced is reported as none, the rest still applies", () => {
    const plan = planLimits({ max_procs: 64, memory_bytes: 64 * MiB, best_effort: true }, rootNoCgroups);
    expect(plan.mechanisms).toEqual({ procs: "none", memory: "rlimit" });
    expect(plan.enforced).toEqual({ memory_bytes: 64 * MiB });
  });

  test("macOS: no memory limit (neither RLIMIT_DATA nor RLIMIT_AS is enforced there); file size and processes by rlimit", () => {
    expect(() => planLimits({ memory_bytes: 64 * MiB }, mac)).toThrow("darwin does not enforce RLIMIT_DATA or RLIMIT_AS");
    expect(planLimits({ max_file_bytes: MiB }, mac).mechanisms).toEqual({ file_size: "rlimit" });
  });

  test("the worker's OOM score is above this process's own", () => {
    const own = Number(readFileSync("/proc/self/oom_score_adj", "utf8"));
    expect(planLimits({}, rootV1).oomScoreAdj).toBeGreaterThan(own);
  });
});

describe("the preamble", () => {
  const limitsOf = (argv: string[]) => {
    const r = spawnSync(argv[0] as string, [...argv.slice(1), "cat", "/proc/self/limits"], { encoding: "utf8", timeout: 10_000 });
    return { status: r.status, stderr: r.stderr, line: (name: string) => r.stdout.split("\n").find((l) => l.startsWith(name))?.split(/\s{2,}/).slice(1, 3) };
  };

  test("/bin/sh sets the rlimits (soft and hard) and execs the command, keeping its pid", () => {
    const plan = planLimits({ memory_bytes: 256 * MiB, max_file_bytes: MiB }, { platform: "linux", uid: 0, cgroups: null });
    const argv = preambleArgv(plan);
    const r = limitsOf(argv);
    expect(r.status).toBe(0);
    expect(r.line("Max data size")).toEqual([String(256 * MiB), String(256 * MiB)]);
    expect(r.line("Max file size")).toEqual([String(MiB), String(MiB)]);
    expect(afterPreamble([...argv, "python3", "x.py"])).toEqual(["python3", "x.py"]);
    expect(afterPreamble(["python3", "x.py"])).toEqual(["python3", "x.py"]);
    const same = spawnSync(argv[0] as string, [...argv.slice(1), "sh", "-c", "echo $$"], { encoding: "utf8", timeout: 10_000 });
    expect(Number(same.stdout.trim())).toBe(same.pid as number); // exec'd, not forked: the worker's pid is the spawned one
  });

  test("RLIMIT_NPROC for a user: -u where the shell calls it so, -p in dash", () => {
    const plan = planLimits({ max_procs: 64 }, userNoCgroups);
    const r = limitsOf(preambleArgv(plan));
    expect(r.status).toBe(0);
    expect(r.line("Max processes")).toEqual([String(plan.rlimits.nproc), String(plan.rlimits.nproc)]);
  });

  test("a cgroup it cannot join stops it before the command runs, saying so", () => {
    const plan = { cgroup: { host: rootV1.cgroups as CgroupHost, values: {}, dirs: 1, join: "preamble" as const }, rlimits: {}, oomScoreAdj: 500 };
    const argv = preambleArgv(plan);
    const r = spawnSync(argv[0] as string, [...argv.slice(1), "echo", "RAN"], { encoding: "utf8", input: "/nonexistent/cgroup\n", timeout: 10_000 });
    expect(r.status).toBe(PREAMBLE_FAILED);
    expect(r.stdout).not.toContain("RAN");
    expect(r.stderr).toContain("awrepl: could not join the cgroup /nonexistent/cgroup");
    const eof = spawnSync(argv[0] as string, [...argv.slice(1), "echo", "RAN"], { encoding: "utf8", input: "", timeout: 10_000 });
    expect(eof.status).toBe(PREAMBLE_FAILED);
    expect(eof.stderr).toContain("could not read its cgroup");
  });
});
