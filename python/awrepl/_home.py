"""The state directory and the paths in it the client needs, derived as ``lib/settings/home.ts`` does.

Client and supervisor agree on the socket's path without talking because both derive it from the
state directory alone: ``<state>/supervisor.sock``, or, when that is longer than 100 bytes, a short
path under ``/tmp/awrepl-<uid>/`` named after a 64-bit FNV-1a hash of the state directory.
"""

import os
import sys
from typing import Mapping, NamedTuple, Optional

#: Longest Unix socket path the supervisor binds (sun_path is 104 bytes on macOS, 108 on Linux).
MAX_SOCKET_PATH = 100


class Layout(NamedTuple):
    home: str
    socket: str
    log: str
    lock: str


def _normalize(path: str) -> str:
    """node:path's posix normalisation (``posixpath.normpath`` keeps a leading ``//``, node does not)."""
    absolute = path.startswith("/")
    out = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == ".." and out and out[-1] != "..":
            out.pop()
        elif segment != ".." or not absolute:
            out.append(segment)
    joined = "/".join(out)
    return "/" + joined if absolute else (joined or ".")


def state_dir(env: Mapping[str, str]) -> str:
    """``$AWREPL_HOME``, else ``$XDG_STATE_HOME/awrepl``, else ``~/.local/state/awrepl``; absolute."""
    if env.get("AWREPL_HOME"):
        home = env["AWREPL_HOME"]
    elif sys.platform == "win32":
        home = os.path.join(env.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local"), "awrepl")
    else:
        xdg = env.get("XDG_STATE_HOME")
        base = xdg if xdg is not None else os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
        home = base + "/awrepl" if base else "awrepl"
    if sys.platform == "win32":
        return os.path.abspath(home)
    return _normalize(home if home.startswith("/") else os.getcwd() + "/" + home)


def short_hash(text: str) -> str:
    """64-bit FNV-1a of the UTF-8 bytes, in hex (``shortHash`` of lib/settings/home.ts)."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def socket_path(home: str) -> str:
    if sys.platform == "win32":
        return "\\\\.\\pipe\\awrepl-" + short_hash(home.lower())
    preferred = _normalize(home + "/supervisor.sock")
    if len(preferred.encode("utf-8")) <= MAX_SOCKET_PATH:
        return preferred
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return "/tmp/awrepl-%d/%s.sock" % (uid, short_hash(home))


def layout_of(env: Mapping[str, str], home: Optional[str] = None) -> Layout:
    home = state_dir({"AWREPL_HOME": home} if home else env)
    return Layout(home=home, socket=socket_path(home), log=os.path.join(home, "supervisor.log"), lock=os.path.join(home, "supervisor.lock"))


def ensure_private_dir(path: str) -> None:
    """Creates the state directory 0700; an existing one must be a real directory of this user's that nobody else may write."""
    from .errors import UsageError

    try:
        os.makedirs(path, mode=0o700)
        return
    except FileExistsError:
        pass
    if sys.platform == "win32":
        return
    st = os.lstat(path)
    import stat

    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link: awrepl keeps its socket and snapshots only in a real directory of its own (point AWREPL_HOME at one)"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a directory"
    elif st.st_uid != os.getuid():
        problem = "belongs to uid %d, not to you (uid %d): awrepl does not use or change it" % (st.st_uid, os.getuid())
    elif st.st_mode & 0o022:
        problem = "can be written by other users (mode %04o): run `chmod go-w %s` or point AWREPL_HOME at a new directory" % (st.st_mode & 0o7777, path)
    else:
        return
    raise UsageError("usage", "Directory %s %s" % (path, problem))
