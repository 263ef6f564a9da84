#!/usr/bin/python3
"""One Jupyter client in a new process: the Jupyter equivalent of `awrepl -s s run CODE` from a shell.

    /usr/bin/python3 jupyter_shell_call.py tuned CONNECTION_FILE      # connect, x += 1, print x, exit
    /usr/bin/python3 jupyter_shell_call.py standard CONNECTION_FILE   # the same through wait_for_ready()
    /usr/bin/python3 jupyter_shell_call.py big CONNECTION_FILE BYTES  # run the big-output cell, print a JSON report

`tuned` is the fastest client jupyter_client allows (ready as soon as shell and IOPub answer);
`standard` is what its documented API does (wait_for_ready() ends with a 0.2 s IOPub flush).
"""
import json
import os
import sys
import time

from jupyter_client import BlockingKernelClient

from jupyter_common import WAIT_S, big_output_cell, rss_kib, run_cell, wait_connected


def connect(connection_file):
    kc = BlockingKernelClient(connection_file=connection_file)
    kc.load_connection_file()
    kc.start_channels()
    return kc


def main():
    mode, connection_file = sys.argv[1], sys.argv[2]
    kc = connect(connection_file)
    try:
        if mode == "tuned":
            wait_connected(kc)
            chunks = []
            reply, _ = run_cell(kc, "x += 1; print(x)", on_stream=chunks.append)
            assert reply["status"] == "ok", reply
            sys.stdout.write("".join(chunks))
        elif mode == "standard":
            kc.wait_for_ready(timeout=WAIT_S)
            reply = kc.execute_interactive("x += 1; print(x)", timeout=WAIT_S)
            assert reply["content"]["status"] == "ok", reply
        elif mode == "big":
            total = int(sys.argv[3])
            wait_connected(kc)
            received = [0]

            def count(text):
                received[0] += len(text.encode())

            start = time.perf_counter()
            reply, _ = run_cell(kc, big_output_cell(total), timeout_s=600, on_stream=count)
            seconds = time.perf_counter() - start
            assert reply["status"] == "ok", reply
            # VmHWM, not getrusage: ru_maxrss starts from the parent's peak after vfork+exec.
            maxrss = rss_kib(os.getpid(), "VmHWM")
            print(json.dumps({"bytes": received[0], "seconds": seconds, "maxrss_kib": maxrss}))
        else:
            raise SystemExit(f"Unknown mode {mode!r}: expected tuned, standard or big")
    finally:
        kc.stop_channels()


if __name__ == "__main__":
    main()
