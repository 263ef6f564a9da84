"""Helpers shared by jupyter.py (the harness) and jupyter_shell_call.py (a client in its own process)."""
import os
import select
import subprocess
import sys
import time
from queue import Empty

PYTHON = "/usr/bin/python3"
WAIT_S = 30.0


def big_output_cell(total_bytes):
    """The cell both sides run for the output-throughput figure: 1000-byte lines written to stdout."""
    return f"import sys\nline = 'x' * 999 + '\\n'\nfor _ in range({total_bytes // 1000}): sys.stdout.write(line)"


def log(message):
    print(f"[jupyter] {message}", file=sys.stderr, flush=True)


def rss_kib(pid, field="VmRSS"):
    """A field of /proc/PID/status in KiB (VmRSS now, VmHWM peak); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run_timed(argv, timeout_s=WAIT_S, env=None):
    """Spawn argv and wait for it with a blocking wait (a pidfd in poll(), not Popen.wait's sleep loop).

    Returns (milliseconds from spawn to exit, exit code, stdout text).
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    pidfd = os.pidfd_open(proc.pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(timeout_s * 1000):
            proc.kill()
            proc.wait(5)
            raise TimeoutError(f"{argv!r} did not exit within {timeout_s} s")
        elapsed_ms = (time.perf_counter() - start) * 1000
    finally:
        os.close(pidfd)
    out, err = proc.communicate(timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv!r} exited with {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    return elapsed_ms, proc.returncode, out.decode(errors="replace")


def wait_connected(kc, timeout_s=WAIT_S):
    """Ready as soon as kernel_info is answered on shell and IOPub delivers a message (no 0.2 s flush).

    A kernel_info sent before the kernel listens (or before our IOPub subscription is live) is asked
    again; replies to earlier attempts are skipped, so a slow start cannot leave us one reply behind.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg_id = kc.kernel_info()
        attempt_end = min(deadline, time.monotonic() + 1.0)
        answered = False
        while not answered and time.monotonic() < attempt_end:
            try:
                reply = kc.get_shell_msg(timeout=max(0.0, attempt_end - time.monotonic()))
            except Empty:
                break
            answered = reply["parent_header"].get("msg_id") == msg_id
        if not answered:
            continue
        try:
            kc.get_iopub_msg(timeout=0.5)  # any message proves our IOPub subscription is live
        except Empty:
            continue
        return
    raise TimeoutError(f"Kernel did not answer kernel_info on shell and IOPub within {timeout_s} s")


def run_cell(kc, code, timeout_s=WAIT_S, on_stream=None):
    """Execute code; wait for IOPub idle and the shell reply. Returns (reply content, result text or None)."""
    deadline = time.monotonic() + timeout_s
    msg_id = kc.execute(code)
    result = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"Cell {code[:40]!r} did not go idle within {timeout_s} s")
        msg = kc.get_iopub_msg(timeout=remaining)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "execute_result":
            result = msg["content"]["data"].get("text/plain")
        elif kind == "stream" and on_stream is not None:
            on_stream(msg["content"]["text"])
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"No reply to cell {code[:40]!r} within {timeout_s} s")
        reply = kc.get_shell_msg(timeout=remaining)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"], result
