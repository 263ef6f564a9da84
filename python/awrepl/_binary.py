"""Finding the awrepl executable, and which version and build it is.

The order: the executable the wheel installed (the environment's scripts directory, the one beside
the running Python, the user scheme's, as ruff's ``find_ruff_bin`` looks), else ``$AWREPL_BIN``, else
``awrepl`` on ``PATH``. The client speaks for that executable: it starts the supervisor with it and
says its version in ``hello``.
"""

import os
import sys
from typing import Dict, List, Mapping, NamedTuple, Tuple

from .errors import AwreplError

EXE = "awrepl.exe" if sys.platform == "win32" else "awrepl"


class Executable(NamedTuple):
    path: str
    version: str
    #: ``<size>-<mtime ms>``, as ``buildId()`` of lib/core/version.ts (informational).
    build: str


def _user_scheme() -> str:
    if sys.platform == "win32":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"


def wheel_candidates() -> List[str]:
    """Where a wheel puts the executable, in the order they are tried."""
    import sysconfig

    dirs = []
    try:
        dirs.append(sysconfig.get_path("scripts"))
    except KeyError:
        pass
    dirs.append(os.path.dirname(os.path.realpath(sys.executable)) if sys.executable else "")
    dirs.append(os.path.dirname(sys.executable) if sys.executable else "")
    try:
        dirs.append(sysconfig.get_path("scripts", scheme=_user_scheme()))
    except KeyError:
        pass
    seen: List[str] = []
    for d in dirs:
        if d and os.path.join(d, EXE) not in seen:
            seen.append(os.path.join(d, EXE))
    return seen


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_executable(env: Mapping[str, str]) -> str:
    """The awrepl executable to run, or an ``AwreplError`` naming every place looked in."""
    candidates = wheel_candidates()
    for path in candidates:
        if _runnable(path):
            return path
    given = env.get("AWREPL_BIN")
    if given:
        if _runnable(given):
            return os.path.abspath(given)
        raise AwreplError("supervisor_unreachable", "AWREPL_BIN is %r, which is not an executable file" % given)
    import shutil

    on_path = shutil.which(EXE, path=env.get("PATH"))
    if on_path:
        return on_path
    raise AwreplError(
        "supervisor_unreachable",
        "Cannot find the awrepl executable: not installed by the awrepl wheel (looked for %s), AWREPL_BIN is not set, "
        "and there is no awrepl on PATH; `pip install awrepl`, or set AWREPL_BIN to an awrepl executable" % ", ".join(candidates),
    )


_versions: Dict[Tuple[str, int, int], str] = {}


def describe(path: str) -> Executable:
    """The version of the executable at ``path`` (asked once per build: ``awrepl --version``)."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    version = _versions.get(key)
    if version is None:
        import subprocess

        try:
            run = subprocess.run([path, "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise AwreplError("supervisor_unreachable", "Cannot run %s --version: %s" % (path, err)) from None
        version = run.stdout.decode("utf-8", "replace").strip()
        if run.returncode != 0 or not version:
            raise AwreplError("supervisor_unreachable", "%s --version failed (exit %d): %s" % (path, run.returncode, run.stderr.decode("utf-8", "replace").strip()[:300]))
        _versions[key] = version
    # Whole milliseconds, cut down as the executable's own Bun.file().lastModified gives them.
    return Executable(path, version, "%d-%d" % (st.st_size, st.st_mtime_ns // 1_000_000))
