#!/usr/bin/python3
"""Jupyter's side of awrepl's benchmarks: the same work done with ipykernel + jupyter_client.

Run with Debian's interpreter (the one python3-ipykernel is installed for):

    /usr/bin/python3 scripts/bench/jupyter.py [--smoke] [--runs N]

Progress goes to stderr; stdout gets exactly one JSON object:

    {"available": true, "versions": {...},
     "figures": {"name": {"unit": "ms", "samples": [...], "note": "..."}, ...}}

or {"available": false, "reason": "..."} when ipykernel/jupyter_client cannot be imported, so the
caller can print why the Jupyter column is empty instead of failing.

Figures (each one the same work as an awrepl figure in scripts/bench/all.ts):
  baseline_python_c_pass   /usr/bin/python3 -c pass, spawned and waited for from this process
  kernel_start_to_result   KernelManager.start_kernel() to the value of "1+1" in the client
  execute_round_trip       execute("1+1") to its reply and idle status, one warm client (BlockingKernelClient)
  shell_call               a new /usr/bin/python3 process running jupyter_shell_call.py against a running
                           kernel: connect, `x += 1; print(x)`, print, exit (the tuned client)
  shell_call_wait_for_ready  the same with jupyter_client's own wait_for_ready() + execute_interactive()
  big_output_mb_per_s      a cell printing 100 MB, received by a client in its own process
  big_output_client_peak_rss_mib / big_output_kernel_peak_rss_mib
  interrupt_busy_loop / interrupt_sleep_loop / interrupt_asyncio_sleep
                           from KernelManager.interrupt_kernel() to the error reply of the interrupted cell
  kernel_idle_rss_mib      the kernel's VmRSS after one cell and a short settle

Every wait has a timeout and every kernel is shut down in a finally block.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from queue import Empty

from jupyter_common import PYTHON, WAIT_S, log, rss_kib, run_cell, run_timed, wait_connected

HERE = os.path.dirname(os.path.abspath(__file__))
# debugpy (imported with ipykernel, here and in every kernel) warns about frozen modules on stderr.
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"


def start_kernel():
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kc = km.client()
    kc.start_channels()
    return km, kc


def stop_kernel(km, kc):
    try:
        kc.stop_channels()
    finally:
        km.shutdown_kernel(now=True)
        km.cleanup_resources()


def kernel_pid(km):
    provisioner = getattr(km, "provisioner", None)
    process = getattr(provisioner, "process", None) if provisioner is not None else None
    return process.pid if process is not None else km.kernel.pid


def measure_baseline(runs):
    return [run_timed([PYTHON, "-c", "pass"])[0] for _ in range(runs)]


def measure_kernel_start(runs):
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        km, kc = start_kernel()
        try:
            wait_connected(kc)
            reply, value = run_cell(kc, "1+1")
            samples.append((time.perf_counter() - start) * 1000)
            assert reply["status"] == "ok" and value == "2", (reply, value)
        finally:
            stop_kernel(km, kc)
    return samples


def measure_round_trip(kc, count):
    for _ in range(min(50, count)):  # warm up
        run_cell(kc, "1+1")
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        reply, value = run_cell(kc, "1+1")
        samples.append((time.perf_counter() - start) * 1000)
        assert reply["status"] == "ok" and value == "2", (reply, value)
    return samples


def measure_shell_call(connection_file, runs, mode):
    samples = []
    last = None
    for _ in range(runs):
        ms, _, out = run_timed([PYTHON, os.path.join(HERE, "jupyter_shell_call.py"), mode, connection_file])
        value = int(out.strip())
        assert last is None or value == last + 1, (last, out)
        last = value
        samples.append(ms)
    return samples


def measure_big_output(connection_file, total_bytes, runs):
    speeds, client_peaks = [], []
    for _ in range(runs):
        _, _, out = run_timed(
            [PYTHON, os.path.join(HERE, "jupyter_shell_call.py"), "big", connection_file, str(total_bytes)],
            timeout_s=600,
        )
        report = json.loads(out)
        assert report["bytes"] == total_bytes, report
        speeds.append(total_bytes / 1e6 / report["seconds"])
        client_peaks.append(report["maxrss_kib"] / 1024)
    return speeds, client_peaks


def measure_interrupt(km, kc, code, runs, settle_s=0.3, give_up_s=5.0):
    """Milliseconds from interrupt_kernel() to the interrupted cell's reply, and how many runs got none.

    A cell that ignores the interrupt for give_up_s counts as a failure; the kernel is restarted then.
    """
    samples, failures = [], 0
    for run in range(runs):
        msg_id = kc.execute(code, stop_on_error=False)  # or the kernel aborts the next request
        time.sleep(settle_s)  # let the cell reach its loop / its await
        start = time.perf_counter()
        km.interrupt_kernel()
        deadline = time.monotonic() + give_up_s
        reply = None
        while reply is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                msg = kc.get_shell_msg(timeout=remaining)
            except Empty:
                break
            if msg["parent_header"].get("msg_id") == msg_id:
                reply = msg
        if reply is None:
            failures += 1
            log(f"no reply {give_up_s:g} s after interrupting {code!r}")
            if run + 1 < runs:  # the kernel is stuck in the cell; the caller shuts it down after the last run
                km.restart_kernel(now=True)
                wait_connected(kc)
            continue
        samples.append((time.perf_counter() - start) * 1000)
        assert reply["content"]["status"] == "error", reply["content"]
        assert reply["content"].get("ename") in ("KeyboardInterrupt", "CancelledError"), reply["content"]
        reply, value = run_cell(kc, "1+1")  # the kernel survived and is idle again
        assert value == "2", (reply, value)
    return samples, failures


def figure(unit, samples, note=""):
    return {"unit": unit, "samples": [round(s, 4) for s in samples], "note": note}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one short run of each figure")
    parser.add_argument("--runs", type=int, default=7, help="runs of each multi-run figure")
    args = parser.parse_args()
    try:
        import ipykernel
        import jupyter_client
    except ImportError as exc:
        print(json.dumps({"available": False, "reason": f"{sys.executable} cannot import Jupyter: {exc}"}))
        return
    runs = 1 if args.smoke else args.runs
    round_trips = 20 if args.smoke else 2000
    big_bytes = 1_000_000 if args.smoke else 100_000_000
    figures = {}
    log("baseline: python3 -c pass")
    figures["baseline_python_c_pass"] = figure("ms", measure_baseline(3 if args.smoke else 3 * runs))
    if not args.smoke:
        log("kernel start to first result")
        figures["kernel_start_to_result"] = figure("ms", measure_kernel_start(runs))
    start = time.perf_counter()
    km, kc = start_kernel()
    try:
        wait_connected(kc)
        run_cell(kc, "x = 0; 1+1")
        if args.smoke:  # the one start the smoke run makes is its sample
            figures["kernel_start_to_result"] = figure("ms", [(time.perf_counter() - start) * 1000])
        time.sleep(0.5 if args.smoke else 2)
        idle_kib = rss_kib(kernel_pid(km))
        figures["kernel_idle_rss_mib"] = figure("MiB", [idle_kib / 1024] if idle_kib else [])
        log(f"execute round trip x{round_trips}")
        figures["execute_round_trip"] = figure("ms", measure_round_trip(kc, round_trips))
        connection_file = km.connection_file
        log("shell call (tuned client)")
        figures["shell_call"] = figure("ms", measure_shell_call(connection_file, 3 if args.smoke else 3 * runs, "tuned"))
        log("shell call (wait_for_ready + execute_interactive)")
        figures["shell_call_wait_for_ready"] = figure(
            "ms", measure_shell_call(connection_file, 1 if args.smoke else runs, "standard")
        )
        log(f"cell printing {big_bytes / 1e6:g} MB")
        speeds, peaks = measure_big_output(connection_file, big_bytes, 1 if args.smoke else 3)
        figures["big_output_mb_per_s"] = figure("MB/s", speeds, f"{big_bytes / 1e6:g} MB, client counts and drops text")
        figures["big_output_client_peak_rss_mib"] = figure("MiB", peaks)
        hwm = rss_kib(kernel_pid(km), "VmHWM")
        figures["big_output_kernel_peak_rss_mib"] = figure("MiB", [hwm / 1024] if hwm else [])
        interrupts = 1 if args.smoke else runs
        for name, code in (
            ("interrupt_busy_loop", "while True: pass"),
            ("interrupt_sleep_loop", "import time\nwhile True: time.sleep(0.01)"),
            ("interrupt_asyncio_sleep", "import asyncio\nawait asyncio.sleep(1e9)"),
        ):
            log(name)
            give_up_s = 1.0 if args.smoke else 5.0
            # ipykernel 6.17 never answers an interrupted await (measured): 3 tries show it, 7 only cost time.
            count = min(3, interrupts) if "await" in code else interrupts
            samples, failures = measure_interrupt(km, kc, code, count, give_up_s=give_up_s)
            note = f"{failures} of {count} interrupts got no reply within {give_up_s:g} s" if failures else ""
            figures[name] = figure("ms", samples, note)
    finally:
        stop_kernel(km, kc)
    versions = {
        "python": sys.version.split()[0],
        "ipykernel": ipykernel.__version__,
        "jupyter_client": jupyter_client.__version__,
    }
    print(json.dumps({"available": True, "versions": versions, "figures": figures}))


if __name__ == "__main__":
    main()
