"""``attach(name)``: a named session the supervisor holds (``RemoteSession``), the very one
``awrepl -s NAME``, ``awrepl mcp`` and the TypeScript ``attach`` reach; its detached cells
(``DetachedCell``, ``collect``, ``wait``); and ``sessions()``."""

import os
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from ._binary import Executable, describe, find_executable
from ._connection import Connection, Pending
from ._home import Layout, layout_of
from ._lines import Encoded
from ._result import ExecResult
from ._session import DisplayCallback, HostHandler, TextCallback, _Link, _SessionBase, check_code, check_key
from ._history import History, check_last
from ._spec import Limits, Sandbox, check_count, named_setup
from ._start import handshake
from .errors import AwreplError, SessionClosed


@dataclass
class Collected:
    """What ``collect`` found: ``done`` (``result``; ``mine``: sent through this object's connection),
    ``running`` (``elapsed_ms`` None while it is still queued), ``idle`` (nothing to wait for), or,
    asked by key, ``dropped`` (``reason``)."""

    state: str
    result: Optional[ExecResult] = None
    mine: Optional[bool] = None
    elapsed_ms: Optional[float] = None
    #: ``collect(key=...)``: how long ago the cell finished; ``dropped``: why the session no longer keeps it.
    finished_ms_ago: Optional[float] = None
    reason: Optional[str] = None

    @classmethod
    def from_value(cls, value: Any) -> "Collected":
        value = value or {}
        result = value.get("result")
        return cls(
            state=value.get("state", "idle"),
            result=ExecResult.from_json(result) if result else None,
            mine=value.get("mine"),
            elapsed_ms=value.get("elapsed_ms"),
            finished_ms_ago=value.get("finished_ms_ago"),
            reason=value.get("reason"),
        )


class DetachedCell:
    """A cell sent with ``execute_detached``: it runs to its end even if this process goes away, and a
    result nobody received is kept in the session for ``collect`` / ``wait``."""

    def __init__(self, session: "RemoteSession", conn: Connection, pending: Pending, callbacks: tuple) -> None:
        self._session = session
        self._conn = conn
        self._pending = pending
        self._callbacks = callbacks
        self._result: Optional[ExecResult] = None

    @property
    def id(self) -> int:
        return self._pending.id

    def done(self) -> bool:
        return self._result is not None or self._pending.reply is not None

    def result(self) -> ExecResult:
        """Waits for the cell's result (Ctrl-C stops waiting, and leaves the cell running)."""
        if self._result is None:
            self._result = self._session._finish_execute(self._conn, self._pending, *self._callbacks, sigint_does="leave")
        return self._result

    def keep_result(self) -> bool:
        """Has the supervisor also keep the result for ``collect`` (it still comes to ``result()``): for a
        caller that may end before it hands the result on. False: the cell finished already."""
        if self.done() or self._conn.closed:
            return False
        return bool((self._conn.wait(self._conn.start({"type": "keep_result", "target": self._pending.id})).get("value") or {}).get("kept"))


class RemoteSession(_SessionBase):
    """A named session held by the supervisor (``attach``): the very one ``awrepl -s NAME`` reaches.
    ``close()`` only detaches this object; the session lives on until ``awrepl close NAME``."""

    def __init__(self, name: str, spec: Dict[str, Any], layout: Layout, exe: Executable, env: Dict[str, str]) -> None:
        self._spec = spec
        self._spec_line = Encoded(spec)
        self._link = _Link(layout, exe, env, name, owned=False)
        self._used = False
        # Collected unclosed: only the socket is closed (the session lives on in the supervisor).
        self._finalizer = weakref.finalize(self, _Link.shutdown, self._link, 0, SessionClosed("session_closed", "closed"))
        self._link.connect()

    def __repr__(self) -> str:
        return "RemoteSession(%r%s)" % (self._link.name, ", closed" if self._link.closed else "")

    def _closed_error(self) -> AwreplError:
        name = self._link.name
        return SessionClosed(
            "session_closed",
            "The attach(%r) object is closed (its close() was called): no call goes through it any more; the session itself lives on in the supervisor: attach(%r) to use it again"
            % (name, name),
        )

    def _execute_request(self, request: Dict[str, Any]) -> None:
        request["spec"] = self._spec_line
        if self._used:
            request["known"] = True

    def _after_result(self) -> None:
        self._used = True

    def execute_detached(
        self,
        code: str,
        timeout_ms: Optional[int] = None,
        *,
        max_output_bytes: Optional[int] = None,
        on_stdout: Optional[TextCallback] = None,
        on_stderr: Optional[TextCallback] = None,
        on_display: Optional[DisplayCallback] = None,
        on_host_request: Optional[HostHandler] = None,
        idempotency_key: Optional[str] = None,
    ) -> DetachedCell:
        """Sends the cell detached and returns at once: ``.result()`` waits for it, ``.keep_result()``
        keeps its result for a later ``collect``; it keeps running if this process ends. With
        ``idempotency_key``, any process can ask for it by that key: ``collect(key=...)``."""
        streaming = on_stdout is not None or on_stderr is not None or on_display is not None
        conn, pending = self._start_execute(code, timeout_ms, max_output_bytes, streaming, on_host_request, detach=True, idempotency_key=idempotency_key)
        return DetachedCell(self, conn, pending, (on_stdout, on_stderr, on_display, on_host_request))

    def collect(self, wait_ms: int = 0, key: Optional[str] = None) -> Collected:
        """The session's kept result at once, else waits up to ``wait_ms`` for its oldest detached cell;
        with ``key``, for the cell sent with that idempotency key, whoever sent it."""
        check_count("wait_ms", wait_ms)
        check_key(key)

        def build(conn: Connection) -> Dict[str, Any]:
            request = {"type": "collect", "session": self._link.name, "wait_ms": min(wait_ms, 2**31 - 1)}
            if key is not None:
                request["key"] = key
            return request

        conn, pending = self._send(build)
        return Collected.from_value(conn.wait(pending).get("value"))

    def wait(self, timeout_ms: Optional[int] = None) -> Optional[ExecResult]:
        """Waits for the session's detached cell (one this or another process sent) and returns its
        result; None when there is none to wait for; ``TimeoutError`` when it still runs after ``timeout_ms``."""
        import time

        end = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        while True:
            left = 60_000 if end is None else max(0, int((end - time.monotonic()) * 1000))
            found = self.collect(min(left, 60_000))
            if found.state == "done":
                return found.result
            if found.state == "idle":
                return None
            if end is not None and time.monotonic() >= end:
                raise TimeoutError("The detached cell of session %s still runs after %d ms" % (self._link.name, timeout_ms))

    def snapshot(self, path: Optional[str] = None, timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """Saves the namespace (default: the session's own snapshot, restored on its next start)."""
        return self._request("snapshot", path=os.fspath(path) if path is not None else None, timeout_ms=check_count("timeout_ms", timeout_ms))

    def restore(self, path: Optional[str] = None, timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """Loads a snapshot into the namespace (default: the session's own)."""
        return self._request("restore", path=os.fspath(path) if path is not None else None, timeout_ms=check_count("timeout_ms", timeout_ms))

    def history(self, last: Optional[int] = None) -> History:
        """The session's history (docs/history.md), oldest first: each cell's code, the client that ran
        it, when, and its result as that client got it; ``last``: only the newest N cells."""
        check_last(last)

        def build(conn: Connection) -> Dict[str, Any]:
            request: Dict[str, Any] = {"type": "history", "session": self._link.name}  # no spec: history never creates a session
            if last is not None:
                request["last"] = last
            return request

        conn, pending = self._send(build)
        return History.from_value(conn.wait(pending).get("value"))

    def complete(self, code: str, cursor: Optional[int] = None) -> List[str]:
        return self._request("complete", code=check_code(code), cursor=cursor)

    def is_complete(self, code: str) -> Dict[str, Any]:
        """Whether ``code`` is a whole cell (``{"status": "complete" | "incomplete" | "invalid", "indent"}``)."""
        return self._request("is_complete", code=check_code(code))

    def close(self) -> None:
        """Detaches this object; the session lives on in the supervisor. Idempotent."""
        self._finalizer.detach()
        self._link.shutdown(0, self._closed_error())


def attach(
    name: str,
    *,
    python: Optional[str] = None,
    cwd: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    sandbox: Sandbox = None,
    timeout_ms: Optional[int] = None,
    max_output_bytes: Optional[int] = None,
    grace_ms: Optional[int] = None,
    autosave: Optional[bool] = None,
    existing: bool = False,
    home: Optional[str] = None,
    limits: Limits = None,
    venv: Optional[str] = None,
) -> RemoteSession:
    """The named session the supervisor holds (created on first use with this spec; an existing one
    keeps its own). Starts the supervisor if none runs. ``home``: the state directory (default as the CLI's).
    ``limits``: the worker's resource limits; ``venv``: the virtual environment it runs in (created on first use)."""
    fields = dict(python=python, cwd=cwd, env=env, sandbox=sandbox, timeout_ms=timeout_ms, max_output_bytes=max_output_bytes, grace_ms=grace_ms, autosave=autosave, limits=limits, venv=venv)
    setup = named_setup(name, existing, home, **fields)
    return RemoteSession(name, setup.spec, setup.layout, setup.exe, setup.env)


def sessions(home: Optional[str] = None) -> List[Dict[str, Any]]:
    """The sessions the supervisor holds (``awrepl sessions --json``); empty when none runs (none is started)."""
    from ._start import try_connect

    caller = dict(os.environ)
    layout = layout_of(caller, home)
    probe = try_connect(layout)
    if probe is None:
        return []
    probe.close()
    hs = handshake(layout, describe(find_executable(caller)), caller, autostart=False)
    if hs is None:
        return []
    conn = Connection(hs, layout)
    try:
        return conn.call({"type": "list"})
    finally:
        conn.close()
