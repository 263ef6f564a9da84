"""``python -m awrepl.kernel install``: writes the kernelspec of one session's kernel.

The kernelspec runs the kernel with ``--python`` (default: the Python running this command), which must
import ipykernel; the session's own worker is whatever interpreter the session was created with, and
needs nothing of Jupyter. When that Python does not find this package on its own path (awrepl was not
installed by pip: a source checkout, PYTHONPATH), the kernelspec's command puts this package's directory
on ``sys.path`` itself, so the kernel never depends on the environment Jupyter happens to have.

It is written by jupyter_client's ``KernelSpecManager`` when it can be imported, else into the data
directory ``jupyter --paths`` names.

``awrepl kernel install`` (lib/cli/kernel_command.ts) runs this same installer, with ``--prog`` first so
that usage errors carry its name: from the Python pip installed this version into (``-m``), else from the
copy of this package the executable writes into its state directory (``-c``, that directory on
``sys.path``), which then is the directory the kernelspec names.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

import awrepl

#: Jupyter's rule for a kernel name (jupyter_client.kernelspec: letters, digits, '.', '_', '-').
_KERNEL_NAME = re.compile(r"^[a-z0-9._-]+$")
#: How long probing the kernel's Python may take (it imports ipykernel).
PROBE_TIMEOUT_S = 60.0


class InstallError(Exception):
    pass


def package_parent() -> str:
    """The directory holding this ``awrepl`` package (what ``sys.path`` needs)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(awrepl.__file__)))


def clean_env() -> Dict[str, str]:
    """The environment without PYTHONPATH: what the kernel's Python sees when Jupyter starts it."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def finds_package(python: str) -> bool:
    """True when ``python`` imports this very package by itself (installed where it looks)."""
    code = "import os, awrepl.kernel; print(os.path.dirname(os.path.dirname(os.path.abspath(awrepl.__file__))))"
    try:
        run = subprocess.run([python, "-c", code], cwd="/", env=clean_env(), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return run.returncode == 0 and os.path.realpath(run.stdout.strip()) == os.path.realpath(package_parent())


def kernel_command(python: str) -> List[str]:
    """The command that starts the kernel module with ``python``, finding this package."""
    # Frozen modules off: debugpy (imported with ipykernel) otherwise warns about them at every start.
    if finds_package(python):
        return [python, "-Xfrozen_modules=off", "-m", "awrepl.kernel"]
    boot = "import sys; sys.path.insert(0, %r); from awrepl.kernel.__main__ import main; sys.exit(main())" % package_parent()
    return [python, "-Xfrozen_modules=off", "-c", boot]


def probe(command: List[str]) -> None:
    try:
        run = subprocess.run(command + ["--probe"], cwd="/", env=clean_env(), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except OSError as err:
        raise InstallError("The kernel's Python %s cannot be run: %s" % (command[0], err)) from None
    except subprocess.TimeoutExpired:
        raise InstallError("The kernel's Python %s did not import the kernel within %.0f s" % (command[0], PROBE_TIMEOUT_S)) from None
    if run.returncode != 0:
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["exit status %d" % run.returncode]
        raise InstallError(
            "The kernel's Python %s cannot run the kernel: %s. It needs ipykernel and jupyter_client "
            "(Debian: apt install python3-ipykernel; else pip install ipykernel), or name another one with --python" % (command[0], tail[0])
        )


def kernel_spec(args: argparse.Namespace, command: List[str]) -> Dict[str, object]:
    argv = command + ["-f", "{connection_file}", "--session", args.session]
    if args.timeout_ms is not None:
        argv += ["--timeout-ms", str(args.timeout_ms)]
    # AWREPL_* settings reach the kernel only (the client leaves them out of the session's environment).
    env: Dict[str, str] = {}
    awrepl_bin = args.awrepl_bin or os.environ.get("AWREPL_BIN")
    home = args.home or os.environ.get("AWREPL_HOME")
    if awrepl_bin:
        env["AWREPL_BIN"] = os.path.abspath(awrepl_bin)
    if home:
        env["AWREPL_HOME"] = os.path.abspath(home)
    spec: Dict[str, object] = {
        "argv": argv,
        "display_name": args.display_name or "awrepl: %s" % args.session,
        "language": "python",
        "interrupt_mode": args.interrupt_mode,
        "metadata": {"awrepl": {"session": args.session, "home": env.get("AWREPL_HOME")}, "debugger": False},
    }
    if env:
        spec["env"] = env
    return spec


def data_dirs() -> List[str]:
    """Jupyter's data directories as ``jupyter --paths --json`` lists them (the user's first)."""
    jupyter = shutil.which("jupyter")
    if jupyter is None:
        raise InstallError("Neither jupyter_client (in %s) nor a jupyter command on PATH says where kernelspecs go; use --prefix DIR" % sys.executable)
    try:
        run = subprocess.run([jupyter, "--paths", "--json"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        return list(json.loads(run.stdout)["data"])
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as err:
        raise InstallError("%s --paths --json did not list the data directories: %s" % (jupyter, err)) from None


def write_spec(spec: Dict[str, object], name: str, user: bool, prefix: Optional[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="awrepl-kernelspec-") as source:
        with open(os.path.join(source, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
        try:
            from jupyter_client.kernelspec import KernelSpecManager
        except ImportError:
            KernelSpecManager = None
        if KernelSpecManager is not None:
            return KernelSpecManager().install_kernel_spec(source, name, user=user, prefix=prefix, replace=True)
        if prefix is not None:
            root = os.path.join(prefix, "share", "jupyter")
        elif user:
            root = data_dirs()[0]
        else:
            raise InstallError("A system-wide install needs jupyter_client in %s; use --user or --prefix DIR" % sys.executable)
        dest = os.path.join(root, "kernels", name)
        os.makedirs(dest, exist_ok=True)
        shutil.copy(os.path.join(source, "kernel.json"), os.path.join(dest, "kernel.json"))
        return dest


#: What usage errors call this command (``awrepl kernel install`` runs it as ``install --prog NAME ...``).
PROG = "python -m awrepl.kernel install"


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Register a Jupyter kernel that is a client of one named awrepl session.")
    p.add_argument("--session", default=os.environ.get("AWREPL_SESSION"), help="the session's name (default: $AWREPL_SESSION)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="into the user's Jupyter data directory (the default)")
    where.add_argument("--prefix", help="into PREFIX/share/jupyter/kernels (a virtual environment, a test's directory)")
    where.add_argument("--system", action="store_true", help="into the system-wide Jupyter directory")
    p.add_argument("--name", help="the kernel's name (default: awrepl-SESSION, lower-cased)")
    p.add_argument("--display-name", help="the name frontends show (default: 'awrepl: SESSION')")
    p.add_argument("--python", default=sys.executable, help="the Python that runs the kernel; it must import ipykernel (default: this one)")
    p.add_argument(
        "--interrupt-mode",
        choices=("message", "signal"),
        default="message",
        help="how Jupyter interrupts the kernel: an interrupt_request message (default) or SIGINT; either interrupts the session's cell",
    )
    p.add_argument("--timeout-ms", type=int, help="each cell's timeout in ms (default 0: none, as in Jupyter)")
    p.add_argument("--awrepl-bin", help="the awrepl executable the kernel uses (default: $AWREPL_BIN if set, else found when the kernel starts)")
    p.add_argument("--home", help="the awrepl state directory (default: $AWREPL_HOME if set, else awrepl's default)")
    return p


def main(argv: List[str]) -> int:
    prog = PROG
    if argv[:1] == ["--prog"] and len(argv) > 1:  # the awrepl executable's own command name, first when given
        prog, argv = argv[1], argv[2:]
    p = parser(prog)
    args = p.parse_args(argv)
    if not args.session:
        p.error("name the session: --session NAME (or set AWREPL_SESSION)")
    from awrepl._names import check_session_name

    try:
        check_session_name(args.session)
    except ValueError as err:
        p.error(str(err))
    if args.timeout_ms is not None and args.timeout_ms < 0:
        p.error("--timeout-ms must be at least 0 (0: no timeout), not %d" % args.timeout_ms)
    name = (args.name or "awrepl-%s" % args.session).lower()
    if not _KERNEL_NAME.match(name):
        p.error("--name %r is not a kernel name: letters, digits, '.', '_' and '-' only" % args.name)
    try:
        command = kernel_command(args.python)
        probe(command)
        dest = write_spec(kernel_spec(args, command), name, user=not (args.system or args.prefix), prefix=args.prefix)
    except InstallError as err:
        print("%s: %s" % (prog, err), file=sys.stderr)
        return 1
    print("Installed kernelspec %s in %s (session %s)" % (name, dest, args.session))
    return 0
