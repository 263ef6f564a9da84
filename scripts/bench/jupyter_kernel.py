#!/usr/bin/python3
"""The awrepl kernel beside a stock ipykernel: execute("1+1") through jupyter_client, to its reply and
idle status, one warm BlockingKernelClient each, measured in the same run in alternating rounds so the
shared machine's load falls on both alike (issue 27, "Performance": the awrepl kernel <= ipykernel).

    /usr/bin/python3 scripts/bench/jupyter_kernel.py [--smoke] [--rounds N] [--per-round N]

The awrepl kernel is installed with ``python -m awrepl.kernel install`` into a temporary prefix (found
through JUPYTER_PATH), attached to a session of a temporary AWREPL_HOME whose worker runs this same
interpreter, as the stock kernel does. Progress goes to stderr; stdout gets one JSON object:

    {"available": true, "versions": {...}, "figures": {"kernel_round_trip": {...}, "ipykernel_round_trip": {...}}}

or {"available": false, "reason": "..."} when Jupyter's packages cannot be imported. Every wait has a
timeout; both kernels are shut down and the supervisor stopped in a finally block.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from jupyter import measure_round_trip, stop_kernel
from jupyter_common import PYTHON, log, wait_connected

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
AWREPL_BIN = os.path.abspath(os.environ.get("AWREPL_BIN") or os.path.join(REPO, "dist", "awrepl"))
SESSION = "kernel-bench"
KERNEL_NAME = "awrepl-kernel-bench"
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # debugpy's warning when ipykernel is imported


def prepare(tmp):
    """A private state directory and Jupyter path for this run, and the awrepl kernelspec in it."""
    home = os.path.join(tmp, "home")
    os.makedirs(home, mode=0o700)
    os.environ.update(
        AWREPL_HOME=home,
        AWREPL_BIN=AWREPL_BIN,
        AWREPL_PYTHON=PYTHON,
        JUPYTER_PATH=os.path.join(tmp, "prefix", "share", "jupyter"),
        JUPYTER_RUNTIME_DIR=os.path.join(tmp, "runtime"),
        JUPYTER_DATA_DIR=os.path.join(tmp, "data"),
        JUPYTER_CONFIG_DIR=os.path.join(tmp, "config"),
    )
    os.environ.pop("AWREPL_SESSION", None)
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    command = [PYTHON, "-m", "awrepl.kernel", "install", "--session", SESSION, "--name", KERNEL_NAME, "--prefix", os.path.join(tmp, "prefix")]
    subprocess.run(command, env=env, check=True, timeout=120, stdout=subprocess.DEVNULL)
    return home


def start(kernel_name, cwd):
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name=kernel_name)
    km.start_kernel(cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kc = km.client()
    kc.start_channels()
    wait_connected(kc)
    return km, kc


def percentile(samples, q):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few round trips of each")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--per-round", type=int, default=200, help="round trips per kernel per round (default 200)")
    args = parser.parse_args()
    try:
        import ipykernel
        import jupyter_client
    except ImportError as exc:
        print(json.dumps({"available": False, "reason": "%s cannot import Jupyter: %s" % (sys.executable, exc)}))
        return
    if not os.access(AWREPL_BIN, os.X_OK):
        print(json.dumps({"available": False, "reason": "no awrepl executable at %s (npm run build)" % AWREPL_BIN}))
        return
    rounds, per_round = (2, 20) if args.smoke else (args.rounds, args.per_round)
    tmp = tempfile.mkdtemp(prefix="awrepl-kernel-bench-")
    kernels = {}
    samples = {"kernel_round_trip": [], "ipykernel_round_trip": []}
    try:
        prepare(tmp)
        log("starting the awrepl kernel and a stock ipykernel")
        kernels["kernel_round_trip"] = start(KERNEL_NAME, tmp)
        kernels["ipykernel_round_trip"] = start("python3", tmp)
        for r in range(rounds):
            order = list(kernels) if r % 2 == 0 else list(reversed(list(kernels)))
            for name in order:
                samples[name] += measure_round_trip(kernels[name][1], per_round)  # warmed up first, each round
            log("round %d/%d done" % (r + 1, rounds))
    finally:
        for km, kc in kernels.values():
            try:
                stop_kernel(km, kc)
            except Exception as err:  # the other kernel still gets its shutdown
                log("shutting a kernel down failed: %s" % err)
        subprocess.run([AWREPL_BIN, "daemon", "stop"], timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)
    for name, values in samples.items():
        log("%s: p50 %.3f ms, p90 %.3f ms (%d samples)" % (name, percentile(values, 0.5), percentile(values, 0.9), len(values)))
    note = "execute('1+1') to its reply and idle status through jupyter_client, alternating rounds in one run"
    figures = {name: {"unit": "ms", "samples": [round(v, 4) for v in values], "note": note} for name, values in samples.items()}
    versions = {"python": sys.version.split()[0], "ipykernel": ipykernel.__version__, "jupyter_client": jupyter_client.__version__}
    print(json.dumps({"available": True, "versions": versions, "figures": figures}))


if __name__ == "__main__":
    main()
