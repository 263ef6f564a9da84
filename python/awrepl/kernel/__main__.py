"""``python -m awrepl.kernel``: run the kernel, or install its kernelspec.

    python -m awrepl.kernel -f CONNECTION_FILE --session NAME [--timeout-ms N]   (what Jupyter runs)
    python -m awrepl.kernel install [--session NAME] [--user | --prefix DIR] [--name KERNEL_NAME] ...
    python -m awrepl.kernel --probe        exits 0 when this Python can run the kernel (install checks it)
"""

import argparse
import os
import sys
from typing import List, Optional


def run_kernel(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m awrepl.kernel", description="Run awrepl's Jupyter kernel (Jupyter starts it from the kernelspec).")
    parser.add_argument("--session", default=os.environ.get("AWREPL_SESSION"), help="the named awrepl session (default: $AWREPL_SESSION)")
    parser.add_argument("--timeout-ms", type=int, default=0, help="each cell's timeout in ms (default 0: none)")
    parser.add_argument("--probe", action="store_true", help="check that the kernel can be imported, and exit")
    known, rest = parser.parse_known_args(argv)
    from ._kernel import AwreplKernel, AwreplKernelApp

    if known.probe:
        print("awrepl kernel: %s can run it (ipykernel %s)" % (sys.executable, __import__("ipykernel").__version__))
        return 0
    if known.timeout_ms < 0:
        parser.error("--timeout-ms must be at least 0 (0: no timeout), not %d" % known.timeout_ms)
    config = ["--AwreplKernel.awrepl_session=%s" % (known.session or ""), "--AwreplKernel.awrepl_timeout_ms=%d" % known.timeout_ms]
    AwreplKernelApp.launch_instance(argv=rest + config, kernel_class=AwreplKernel)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["install"]:
        from ._install import main as install

        return install(argv[1:])
    return run_kernel(argv)


if __name__ == "__main__":
    sys.exit(main())
