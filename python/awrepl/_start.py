"""Reaching the supervisor: connect to its socket, or start it (the executable re-run detached as
``awrepl __supervisor``, as ``lib/client/start.ts`` does) and poll until it answers; then ``hello``.

A supervisor of another version is asked to stop and replaced by one of ours. Many clients may start
one at once: the supervisor's start-up lock lets exactly one listen, and a client that finds a live
starter holding the lock waits for it instead of starting another.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Mapping, NamedTuple, Optional

from ._binary import Executable
from ._home import Layout, ensure_private_dir
from .errors import AwreplError, SupervisorUnreachable, VersionMismatch

#: The client <-> supervisor protocol this client speaks (``SUPERVISOR_PROTOCOL`` of lib/core/version.ts).
PROTOCOL = 4
SUPERVISOR_SUBCOMMAND = "__supervisor"
#: How long a client waits for a supervisor it started (or found starting), and for a hello.
START_TIMEOUT_S = 15.0
HELLO_TIMEOUT_S = 15.0
#: A start-up lock older than this belongs to a starter that died (lib/supervisor/start_lock.ts).
STALE_LOCK_S = 10.0
LOG_ROTATE_BYTES = 1024 * 1024
MAX_STARTS = 3
#: Who this client is, sent as hello's ``client``: a session's history names who ran each cell. The
#: Jupyter kernel sets "kernel" for its process (awrepl.kernel._kernel); a supervisor that predates the
#: field ignores it.
client_kind = "python"


class Handshake(NamedTuple):
    sock: socket.socket
    #: The supervisor's hello reply.
    hello: dict
    #: Bytes read after the hello reply's line (normally none).
    rest: bytes


def _unreachable(message: str) -> SupervisorUnreachable:
    return SupervisorUnreachable("supervisor_unreachable", message)


def try_connect(layout: Layout) -> Optional[socket.socket]:
    """A connected socket, or None when nobody listens (no socket, or a stale one)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(layout.socket)
        return sock
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError):
        sock.close()
        return None
    except OSError as err:
        sock.close()
        raise _unreachable("Cannot connect to the supervisor at %s: %s" % (layout.socket, err)) from None


class _ClosedBeforeHello(Exception):
    pass


def _hello(sock: socket.socket, exe: Executable, layout: Layout):
    line = {"type": "hello", "op": "hello", "protocol": PROTOCOL, "version": exe.version, "build": exe.build, "client": client_kind}
    sock.settimeout(HELLO_TIMEOUT_S)
    try:
        sock.sendall(json.dumps(line).encode() + b"\n")
        buf = b""
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                raise _ClosedBeforeHello("the supervisor closed the connection before answering hello")
            buf += chunk
    except socket.timeout:
        sock.close()
        raise _unreachable("The supervisor did not answer within %d s; see its log: %s" % (HELLO_TIMEOUT_S, layout.log)) from None
    except (BrokenPipeError, ConnectionResetError) as err:
        raise _ClosedBeforeHello(str(err)) from None
    head, _, rest = buf.partition(b"\n")
    try:
        reply = json.loads(head)
    except ValueError:
        sock.close()
        raise AwreplError("protocol", "The supervisor sent a line that is not JSON: %r" % head[:80]) from None
    if not isinstance(reply, dict) or (reply.get("event") != "hello" and reply.get("type") != "hello"):
        if isinstance(reply, dict) and reply.get("event") == "error":
            sock.close()
            raise AwreplError(str(reply.get("code")), str(reply.get("message")))
        sock.close()
        raise AwreplError("protocol", "The supervisor's first line is not a hello reply: %r" % head[:200])
    return reply, rest


def handshake(layout: Layout, exe: Executable, env: Mapping[str, str], autostart: bool = True) -> Optional[Handshake]:
    """A connection whose hello said the versions match (started first when ``autostart``), else None."""
    last = "it keeps going away"
    for _ in range(4):
        sock = try_connect(layout)
        if sock is None:
            if not autostart:
                return None
            sock = _start_and_connect(layout, exe, env)
        try:
            hello, rest = _hello(sock, exe, layout)
        except _ClosedBeforeHello as err:  # it was exiting (idle exit, a stop): try again from the start
            sock.close()
            last = str(err)
            continue
        if hello.get("ok"):
            return Handshake(sock, hello, rest)
        if hello.get("version") == exe.version:
            # The executable itself speaks another protocol: replacing its supervisor would not help.
            sock.close()
            raise VersionMismatch(
                "version_mismatch",
                "The awrepl executable %s (awrepl %s) speaks supervisor protocol %s; this Python client speaks protocol %d: "
                "use the client that came with the executable (the same wheel or checkout)" % (exe.path, exe.version, hello.get("protocol"), PROTOCOL),
            )
        last = "a supervisor of awrepl %s (protocol %s) answers; this client is for awrepl %s (protocol %d)" % (hello.get("version"), hello.get("protocol"), exe.version, PROTOCOL)
        _stop_and_wait(sock, hello.get("pid"))
        if not autostart:
            return None
    raise _unreachable("Cannot reach the supervisor at %s: %s (its log: %s)" % (layout.socket, last, layout.log))


def process_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_and_wait(sock: socket.socket, pid: object) -> None:
    """Asks a supervisor of another version to stop and waits until its process is gone."""
    try:
        sock.sendall(b'{"type":"stop","op":"stop"}\n')
    except OSError:
        pass
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process_alive(pid):
        time.sleep(0.01)
    sock.close()


def lock_holder(lock: str) -> Optional[int]:
    """The pid in the start-up lock, when it is a live starter's and fresh."""
    try:
        with open(lock, encoding="utf-8") as f:
            pid = int(f.read().strip() or "0")
        fresh = time.time() - os.stat(lock).st_mtime < STALE_LOCK_S
    except (OSError, ValueError):
        return None
    return pid if fresh and process_alive(pid) else None


class _Started:
    def __init__(self, proc: subprocess.Popen, command: str) -> None:
        self.proc = proc
        self.command = command
        # Reaped as soon as it exits (a supervisor is long-lived; left unreaped it would stay a zombie
        # that looks alive to every pid check while this process runs).
        threading.Thread(target=proc.wait, name="awrepl-supervisor-reaper", daemon=True).start()

    @property
    def exited(self) -> Optional[int]:
        return self.proc.returncode


def _spawn(layout: Layout, exe: Executable, env: Mapping[str, str]) -> _Started:
    try:
        if os.path.getsize(layout.log) > LOG_ROTATE_BYTES:
            os.replace(layout.log, layout.log + ".1")
    except OSError:
        pass
    existed = os.path.exists(layout.log)
    fd = None
    try:
        fd = os.open(layout.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".%03dZ" % (int(time.time() * 1000) % 1000)
        os.write(fd, ("%s [%d] client: starting the supervisor\n" % (stamp, os.getpid())).encode())
    except OSError as err:
        if fd is not None:
            os.close(fd)
        if not existed:
            try:
                os.unlink(layout.log)
            except OSError:
                pass
        raise AwreplError("internal", "Cannot start the supervisor: its log %s cannot be written: %s" % (layout.log, err)) from None
    command = [exe.path, SUPERVISOR_SUBCOMMAND]
    child_env = dict(env)
    child_env["AWREPL_HOME"] = layout.home
    try:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, cwd=layout.home, env=child_env, close_fds=True, start_new_session=sys.platform != "win32"
        )
    except OSError as err:
        raise _unreachable("Cannot start the supervisor (%s): %s" % (" ".join(command), err)) from None
    finally:
        os.close(fd)
    return _Started(proc, " ".join(command))


def _last_log_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode("utf-8", "replace").rstrip().split("\n")
    except OSError:
        return ""
    line = lines[-1].strip() if lines else ""
    return ": " + line[:300] if line and "client: starting the supervisor" not in line else ""


def _start_and_connect(layout: Layout, exe: Executable, env: Mapping[str, str]) -> socket.socket:
    ensure_private_dir(layout.home)
    starts = 0
    mine: Optional[_Started] = None
    if lock_holder(layout.lock) is None:
        mine = _spawn(layout, exe, env)
        starts += 1
    deadline = time.monotonic() + START_TIMEOUT_S
    delay = 0.002
    while True:
        sock = try_connect(layout)
        if sock is not None:
            return sock
        # A starter that failed (not one that lost the race and exited 0) will not come back.
        if mine is not None and mine.exited not in (None, 0):
            raise _unreachable("The supervisor failed to start (exit %s)%s; see its log: %s" % (mine.exited, _last_log_line(layout.log), layout.log))
        # Nobody of ours is starting and the lock is free: its holder finished, or it turned stale.
        if (mine is None or mine.exited == 0) and starts < MAX_STARTS and lock_holder(layout.lock) is None:
            sock = try_connect(layout)
            if sock is not None:
                return sock
            mine = _spawn(layout, exe, env)
            starts += 1
        if time.monotonic() > deadline:
            raise _unreachable("The supervisor did not start within %d s; see its log: %s" % (START_TIMEOUT_S, layout.log))
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
