# Runs commands for the start-up benchmarks (scripts/bench/startup.ts) and measures each run the way
# the issue-14 research did (/work/notes/perf.md, "Method"): spawned with posix_spawn, stdout and
# stderr to /dev/null (as hyperfine -N), waited for with a blocking wait4, which also gives the child's
# own CPU time (user + system) and minor page faults. On a shared machine CPU time and faults move far
# less with the load than wall time; the fault count follows how much of the executable a call touches.
#
# Protocol: one JSON object per stdin line, {"argv": [...], "env": {...} (extra variables, optional)};
# one JSON line back per run: {"wall_ms", "cpu_ms", "minflt", "status"}. EOF ends it.
import json
import os
import sys
import time

devnull = os.open(os.devnull, os.O_RDWR)
actions = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
base_env = dict(os.environ)

for line in sys.stdin:
    req = json.loads(line)
    argv = req["argv"]
    env = dict(base_env, **req["env"]) if req.get("env") else base_env
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = (time.perf_counter() - start) * 1000
    reply = {
        "wall_ms": wall,
        "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000,
        "minflt": usage.ru_minflt,
        "status": os.waitstatus_to_exitcode(status),
    }
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
