"""The blocking session objects' common part (``_SessionBase``: execute, variables, inspect, reset,
interrupt, reconnecting) and ``ReplSession``, a session of its own, ended with the object. ``attach``
and ``RemoteSession`` are in ``_attach``. Each object speaks through one persistent connection (``_connection``).

Reconnecting lives here: a connection found gone (``daemon stop``, a crash) is replaced before the
next call, which starts a supervisor if none runs; a request whose write failed because the
supervisor had gone never ran and is sent again, once. A call cut off mid-way is never repeated: it
fails with ``SupervisorUnreachable``.
"""

from __future__ import annotations  # nested functions' annotations are not evaluated on every call

import os
import threading
import weakref
from typing import Any, Callable, Dict, Mapping, Optional

from ._binary import Executable
from ._connection import Connection, NeverSent, Pending
from ._home import Layout
from ._lines import Encoded
from ._result import ExecResult
from ._spec import Limits, Sandbox, check_count, owned_setup
from ._start import handshake
from .errors import AwreplError, SessionClosed

TextCallback = Callable[[str], None]
DisplayCallback = Callable[[Dict[str, Any]], None]
HostHandler = Callable[[Dict[str, Any]], Any]
#: How long closing an owned session waits for the supervisor to say it closed it.
CLOSE_WAIT_S = 10.0
#: ... and at interpreter exit or when the object is collected.
FINALIZE_WAIT_S = 3.0


def answer_host_request(handler: Optional[HostHandler], data: Any) -> Dict[str, Any]:
    """The reply to one host request (lib/core/host_bridge.ts's rules): the handler's dict, else ``{value}``;
    a handler that raises, or an answer JSON cannot carry, is an ``{error}`` reply. Never raises."""
    if handler is None:
        return {"error": "no host bridge in this awrepl host"}
    try:
        value = handler(data if isinstance(data, dict) else {})
    except Exception as err:
        return {"error": "the host's handler failed: %s" % err}
    reply = value if isinstance(value, dict) else {"value": value}
    import json

    try:
        json.dumps(reply)
    except (TypeError, ValueError) as err:
        return {"error": "the host's reply is not JSON: %s" % err}
    return reply


def check_key(key: object) -> Optional[str]:
    if key is not None and not isinstance(key, str):
        raise TypeError("an idempotency key must be a str, not %s" % type(key).__name__)
    return key


def check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError("name must be a str, not %s" % type(name).__name__)
    return name


def check_code(code: object) -> str:
    if not isinstance(code, str):
        raise TypeError("code must be a str, not %s" % type(code).__name__)
    return code


class _Link:
    """What a session object shares with its finalizer: the connection, and whose it is."""

    def __init__(self, layout: Layout, exe: Executable, env: Dict[str, str], name: str, owned: bool) -> None:
        self.layout = layout
        self.exe = exe
        self.env = env
        self.name = name
        self.owned = owned
        self.conn: Optional[Connection] = None
        self.pid = os.getpid()
        self.closed = False
        self.lock = threading.Lock()

    def connect(self) -> Connection:
        hs = handshake(self.layout, self.exe, self.env)
        assert hs is not None
        self.conn = Connection(hs, self.layout)
        return self.conn

    def shutdown(self, wait_s: float, reason: AwreplError) -> None:
        """Closes the connection; an owned session is closed first (nothing of it is kept)."""
        if self.closed:
            return
        self.closed = True
        conn = self.conn
        if conn is None:
            return
        if os.getpid() != self.pid:
            conn.discard()  # a child after fork: the session is its parent's; only this copy of the socket goes
            return
        if self.owned and not conn.closed:
            try:
                conn.wait(conn.start({"type": "close", "session": self.name}), sigint_does="defer", timeout_s=wait_s)
            except AwreplError:
                pass  # the supervisor is gone, or busy: the socket's close ends an owned session anyway
        conn.close(reason)


class _SessionBase:
    _link: _Link
    #: Whether every request carries the spec (a named session is re-created from it when missing).
    _spec_always = True
    _spec: Dict[str, Any]
    _spec_line: Encoded

    @property
    def name(self) -> str:
        """The supervisor's name of the session (``awrepl sessions`` lists it)."""
        return self._link.name

    def _closed_error(self) -> AwreplError:
        raise NotImplementedError

    def _connection(self) -> Connection:
        link = self._link
        if link.closed:
            raise self._closed_error()
        conn = link.conn
        if conn is None or conn.closed:
            conn = self._reconnect()
        return conn

    def _reconnect(self) -> Connection:
        with self._link.lock:
            if self._link.closed:
                raise self._closed_error()
            old = self._link.conn
            if old is not None and not old.closed:
                if old.foreign():
                    old._check_usable()  # raises: the parent's connection, in a fork child
                return old
            conn = self._link.connect()
            self._on_new_connection(conn)
            return conn

    def _on_new_connection(self, conn: Connection) -> None:
        pass

    def _send(self, build: Callable[[Connection], Dict[str, Any]]) -> "tuple[Connection, Pending]":
        conn = self._connection()
        try:
            return conn, conn.start(build(conn))
        except NeverSent:
            conn = self._reconnect()
            return conn, conn.start(build(conn))

    def _request(self, rtype: str, **fields: Any) -> Any:
        def build(conn: Connection) -> Dict[str, Any]:
            request = {"type": rtype, "session": self._link.name}
            request.update({k: v for k, v in fields.items() if v is not None})
            self._add_spec(request)
            return request

        conn, pending = self._send(build)
        return conn.wait(pending).get("value")

    def _add_spec(self, request: Dict[str, Any]) -> None:
        if self._spec_always:
            request["spec"] = self._spec_line

    def _execute_request(self, request: Dict[str, Any]) -> None:
        self._add_spec(request)

    def _start_execute(
        self,
        code: object,
        timeout_ms: Optional[int],
        max_output_bytes: Optional[int],
        streaming: bool,
        on_host_request: Optional[HostHandler],
        detach: bool = False,
        filename: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> "tuple[Connection, Pending]":
        check_code(code)
        check_key(idempotency_key)
        check_count("timeout_ms", timeout_ms)
        check_count("max_output_bytes", max_output_bytes)

        def build(conn: Connection) -> Dict[str, Any]:
            request: Dict[str, Any] = {"type": "execute", "session": self._link.name, "code": code}
            if timeout_ms is not None:
                request["timeout_ms"] = timeout_ms
            if max_output_bytes is not None:
                request["max_output_bytes"] = max_output_bytes
            if streaming:
                request["stream"] = True
            if on_host_request is not None:
                request["host_bridge"] = True
            if detach:
                request["detach"] = True
            if filename is not None:
                request["filename"] = filename
            if idempotency_key is not None:
                request["idempotency_key"] = idempotency_key
            self._execute_request(request)
            return request

        return self._send(build)

    def _finish_execute(
        self,
        conn: Connection,
        pending: Pending,
        on_stdout: Optional[TextCallback],
        on_stderr: Optional[TextCallback],
        on_display: Optional[DisplayCallback],
        on_host_request: Optional[HostHandler],
        sigint_does: str = "cancel",
    ) -> ExecResult:
        def on_event(event: Dict[str, Any]) -> None:
            kind = event.get("event")
            if kind == "stdout":
                if on_stdout is not None:
                    on_stdout(event.get("text", ""))
            elif kind == "stderr":
                if on_stderr is not None:
                    on_stderr(event.get("text", ""))
            elif kind == "display":
                if on_display is not None:
                    on_display(event.get("item") or {})
            elif kind == "host_request":
                answer = answer_host_request(on_host_request, event.get("data"))
                conn.notify({"type": "host_reply", "target": pending.id, "host_id": event.get("host_id"), "data": answer})

        # Without callbacks or a host handler no event comes (none was asked for): nothing to hand them to.
        listening = on_stdout is not None or on_stderr is not None or on_display is not None or on_host_request is not None
        try:
            reply = conn.wait(pending, on_event if listening else None, sigint_does=sigint_does)
        except KeyboardInterrupt as interrupted:
            reply = getattr(interrupted, "reply", None)
            if isinstance(reply, dict) and reply.get("event") == "result":
                interrupted.result = ExecResult.from_json(reply["result"])  # type: ignore[attr-defined]
                self._after_result()
            raise
        self._after_result()
        return ExecResult.from_json(reply["result"])

    def _after_result(self) -> None:
        pass

    def execute(
        self,
        code: str,
        timeout_ms: Optional[int] = None,
        *,
        max_output_bytes: Optional[int] = None,
        on_stdout: Optional[TextCallback] = None,
        on_stderr: Optional[TextCallback] = None,
        on_display: Optional[DisplayCallback] = None,
        on_host_request: Optional[HostHandler] = None,
        filename: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> ExecResult:
        """Runs ``code`` in the session's namespace. The callbacks hear output and display entries as
        they arrive (in this thread); ``on_host_request`` answers the cell's ``await awrepl.host_request(data)``.
        ``idempotency_key``: a repeat of the key runs nothing and answers the first call's result
        (``replayed``). Ctrl-C interrupts the cell and raises ``KeyboardInterrupt`` (its ``result``
        attribute: the cell's)."""
        streaming = on_stdout is not None or on_stderr is not None or on_display is not None
        conn, pending = self._start_execute(
            code, self._timeout(timeout_ms), self._max_output(max_output_bytes), streaming, on_host_request, filename=filename, idempotency_key=idempotency_key
        )
        return self._finish_execute(conn, pending, on_stdout, on_stderr, on_display, on_host_request)

    def _timeout(self, timeout_ms: Optional[int]) -> Optional[int]:
        return timeout_ms

    def _max_output(self, max_output_bytes: Optional[int]) -> Optional[int]:
        return max_output_bytes

    def variables(self) -> Dict[str, str]:
        """Every bound name of the namespace, with its type and short repr."""
        return self._request("variables")

    def inspect(self, name: str, *, full: bool = False) -> Dict[str, Any]:
        """Facts about one name: type, repr, docstring, len, keys, signature, dir, ... (``NameNotFound``, a
        ``KeyError``, when it is not defined), sized for a context window; ``full``: the whole docstring
        and every attribute name."""
        return self._request("inspect", name=check_name(name), full=True if full else None)

    def reset(self) -> None:
        """Clears the namespace (the worker keeps running)."""
        self._request("reset")

    def interrupt(self) -> bool:
        """Interrupts the session's running cell, whoever sent it (from any thread). False: nothing ran."""
        conn, pending = self._send(lambda conn: {"type": "interrupt", "session": self._link.name})
        return bool((conn.wait(pending).get("value") or {}).get("interrupted"))

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class ReplSession(_SessionBase):
    """A persistent Python session of its own: ``session_id`` is a label (two objects with one label
    have two namespaces); the worker ends with ``close()``, ``with``, the object's collection, and the
    process's exit (the supervisor also ends it when this process's connection closes)."""

    _spec_always = False

    def __init__(
        self,
        session_id: Optional[str] = None,
        timeout_ms: int = 30000,
        max_output_bytes: int = 65536,
        *,
        python: Optional[str] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        sandbox: Sandbox = None,
        limits: Limits = None,
        venv: Optional[str] = None,
    ) -> None:
        self.session_id, name, setup = owned_setup(session_id, timeout_ms, max_output_bytes, python, cwd, env, sandbox, limits, venv)
        self.timeout_ms = timeout_ms
        self.max_output_bytes = max_output_bytes
        self._spec = setup.spec
        self._link = _Link(setup.layout, setup.exe, setup.env, name, owned=True)
        #: The session must be (re-)created, owned, by the next call: the connection is new.
        self._fresh = True
        #: A session of this object existed before (the next one created means its state is gone).
        self._known = False
        self._finalizer = weakref.finalize(self, _Link.shutdown, self._link, FINALIZE_WAIT_S, SessionClosed("session_closed", "closed"))
        try:
            conn = self._link.connect()
            conn.wait(conn.start({"type": "open", "session": name, "spec": self._spec, "owned": True}))
        except BaseException:
            self.close()
            raise
        self._fresh = False

    def __repr__(self) -> str:
        return "ReplSession(%r, name=%r%s)" % (self.session_id, self._link.name, ", closed" if self._link.closed else "")

    def _closed_error(self) -> AwreplError:
        return SessionClosed(
            "session_closed", "ReplSession %r (supervisor name %s) is closed: its close() was called; create a new ReplSession" % (self.session_id, self._link.name)
        )

    def _on_new_connection(self, conn: Connection) -> None:
        self._fresh = True

    def _add_spec(self, request: Dict[str, Any]) -> None:
        if self._fresh:  # a non-execute call on a new connection: re-create the session first, owned
            conn = self._link.conn
            assert conn is not None
            conn.wait(conn.start({"type": "open", "session": self._link.name, "spec": self._spec, "owned": True}))
            self._fresh = False

    def _execute_request(self, request: Dict[str, Any]) -> None:
        if self._fresh:
            request["spec"] = self._spec
            request["owned"] = True
            request["known"] = True  # the result says the earlier state is gone

    def _after_result(self) -> None:
        self._fresh = False

    def _timeout(self, timeout_ms: Optional[int]) -> Optional[int]:
        return self.timeout_ms if timeout_ms is None else timeout_ms

    def _max_output(self, max_output_bytes: Optional[int]) -> Optional[int]:
        return self.max_output_bytes if max_output_bytes is None else max_output_bytes

    @property
    def closed(self) -> bool:
        return self._link.closed

    def close(self) -> None:
        """Ends the session's worker (nothing of it is kept). Idempotent."""
        self._finalizer.detach()
        self._link.shutdown(CLOSE_WAIT_S, self._closed_error())
