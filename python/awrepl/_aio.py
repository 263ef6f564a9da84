"""The asyncio flavour: ``AsyncReplSession`` and ``attach_async``. One connection per object, read by
one task that routes each reply to the future of the request it answers; stream events call the
callbacks from that task. Cancelling the task that awaits ``execute`` sends ``cancel`` for the cell:
a running one is interrupted, a queued one withdrawn. Finding or starting the supervisor and the
hello (blocking, ``_start``) run in the loop's default executor.
"""

import asyncio
import inspect as _inspect
import os
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Union

from ._binary import Executable
from ._home import Layout
from ._result import ExecResult
from ._attach import Collected
from ._history import History, check_last
from ._session import answer_host_request, check_code, check_key, check_name
from ._spec import Limits, Sandbox, check_count, named_setup, owned_setup
from ._start import handshake
from ._lines import FINAL, LineRouter, encode_request, foreign_connection_error, reply_error
from .errors import AwreplError, SessionClosed, SupervisorUnreachable

#: Longest reply line read (a result whose output limit is 0, no limit, can be large).
LINE_LIMIT = 1 << 30

EventHandler = Callable[[Dict[str, Any]], None]
HostHandler = Callable[[Dict[str, Any]], Union[Any, Awaitable[Any]]]


class AsyncConnection(LineRouter):
    def __init__(self, layout: Layout, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rest: bytes, supervisor_pid: int) -> None:
        self.layout = layout
        self.supervisor_pid = supervisor_pid
        self._reader = reader
        self._writer = writer
        self._pid = os.getpid()
        self._next_id = 1
        self._pending: Dict[int, "tuple[asyncio.Future, Optional[EventHandler]]"] = {}
        self._error: Optional[AwreplError] = None
        self._last_words: Optional[AwreplError] = None
        self._task = asyncio.ensure_future(self._read_loop(rest))

    @classmethod
    async def open(cls, layout: Layout, exe: Executable, env: Dict[str, str]) -> "AsyncConnection":
        loop = asyncio.get_running_loop()
        hs = await loop.run_in_executor(None, handshake, layout, exe, env)
        assert hs is not None
        hs.sock.setblocking(False)
        reader, writer = await asyncio.open_unix_connection(sock=hs.sock, limit=LINE_LIMIT)
        return cls(layout, reader, writer, hs.rest, hs.hello.get("pid", 0))

    @property
    def closed(self) -> bool:
        return self._error is not None

    def _check_usable(self) -> None:
        if os.getpid() != self._pid:
            raise foreign_connection_error(self._pid, os.getpid())
        if self._error is not None:
            raise self._error

    def send(self, request: Dict[str, Any], on_event: Optional[EventHandler] = None) -> "tuple[int, asyncio.Future]":
        """Writes one request; its future resolves with the final reply (an ``error`` reply raises)."""
        self._check_usable()
        rid = self._next_id
        request["id"] = rid
        data = encode_request(request)
        self._next_id += 1
        future = asyncio.get_running_loop().create_future()
        self._pending[rid] = (future, on_event)
        self._writer.write(data)
        return rid, future

    def notify(self, request: Dict[str, Any]) -> None:
        try:
            rid, future = self.send(request)
        except AwreplError:
            return
        self._pending.pop(rid, None)
        future.cancel()

    async def call(self, request: Dict[str, Any]) -> Any:
        rid, future = self.send(request)
        try:
            reply = await future
        except asyncio.CancelledError:
            self.notify({"type": "cancel", "target": rid})
            raise
        return reply.get("value")

    async def _read_loop(self, rest: bytes) -> None:
        try:
            for line in rest.split(b"\n")[:-1] if rest else []:
                self._route(line)
            while self._error is None:
                try:
                    line = await self._reader.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    self._fail(self._last_words or SupervisorUnreachable("supervisor_unreachable", "The supervisor closed the connection (its log: %s)" % self.layout.log))
                    return
                except (asyncio.LimitOverrunError, ValueError, OSError) as err:
                    self._fail(SupervisorUnreachable("supervisor_unreachable", "The connection to the supervisor failed: %s (its log: %s)" % (err, self.layout.log)))
                    return
                self._route(line)
        except asyncio.CancelledError:
            self._fail(AwreplError("session_closed", "This connection to the supervisor was closed"))
            raise

    def _deliver(self, rid: Any, event: Any, reply: Dict[str, Any]) -> None:
        entry = self._pending.get(rid)  # type: ignore[arg-type]
        if entry is None:
            return
        future, on_event = entry
        if event in FINAL:
            del self._pending[rid]  # type: ignore[arg-type]
            if future.done():
                return
            if event == "error":
                future.set_exception(reply_error(reply))
            else:
                future.set_result(reply)
        elif on_event is not None:
            on_event(reply)

    def _fail(self, error: AwreplError) -> None:
        if self._error is not None:
            return
        self._error = error
        for future, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        try:
            self._writer.close()
        except (OSError, RuntimeError):
            pass

    async def close(self, reason: Optional[AwreplError] = None) -> None:
        self._fail(reason or AwreplError("session_closed", "This connection to the supervisor was closed"))
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, AwreplError):
            pass


class _AsyncSessionBase:
    _name: str
    _spec: Dict[str, Any]
    _layout: Layout
    _exe: Executable
    _env: Dict[str, str]
    _conn: Optional[AsyncConnection] = None
    _connecting: Optional[asyncio.Lock] = None
    _closed = False

    @property
    def name(self) -> str:
        return self._name

    def _closed_error(self) -> AwreplError:
        raise NotImplementedError

    async def _connection(self) -> AsyncConnection:
        if self._closed:
            raise self._closed_error()
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:  # tasks that find no connection at once make one between them
            if self._closed:
                raise self._closed_error()
            if self._conn is None or self._conn.closed:
                conn = await AsyncConnection.open(self._layout, self._exe, self._env)
                self._conn = conn
                await self._on_new_connection(conn)
            return self._conn

    async def _on_new_connection(self, conn: AsyncConnection) -> None:
        pass

    def _execute_request(self, request: Dict[str, Any]) -> None:
        request["spec"] = self._spec

    def _call_fields(self, request: Dict[str, Any]) -> Dict[str, Any]:
        request["spec"] = self._spec
        return request

    def _after_result(self) -> None:
        pass

    async def execute(
        self,
        code: str,
        timeout_ms: Optional[int] = None,
        *,
        max_output_bytes: Optional[int] = None,
        on_stdout: Optional[Callable[[str], Any]] = None,
        on_stderr: Optional[Callable[[str], Any]] = None,
        on_display: Optional[Callable[[Dict[str, Any]], Any]] = None,
        on_host_request: Optional[HostHandler] = None,
        filename: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> ExecResult:
        """As the blocking ``execute``; cancelling the awaiting task interrupts the cell."""
        check_code(code)
        check_key(idempotency_key)
        conn = await self._connection()
        timeout_ms = check_count("timeout_ms", self._timeout(timeout_ms))
        max_output_bytes = check_count("max_output_bytes", self._max_output(max_output_bytes))
        request: Dict[str, Any] = {"type": "execute", "session": self._name, "code": code}
        if timeout_ms is not None:
            request["timeout_ms"] = timeout_ms
        if max_output_bytes is not None:
            request["max_output_bytes"] = max_output_bytes
        if on_stdout is not None or on_stderr is not None or on_display is not None:
            request["stream"] = True
        if on_host_request is not None:
            request["host_bridge"] = True
        if filename is not None:
            request["filename"] = filename
        if idempotency_key is not None:
            request["idempotency_key"] = idempotency_key
        self._execute_request(request)
        rid = 0

        def on_event(event: Dict[str, Any]) -> None:
            kind = event.get("event")
            callback = {"stdout": on_stdout, "stderr": on_stderr}.get(kind)  # type: ignore[arg-type]
            if callback is not None:
                _spawn(callback(event.get("text", "")))
            elif kind == "display" and on_display is not None:
                _spawn(on_display(event.get("item") or {}))
            elif kind == "host_request":
                asyncio.ensure_future(_answer(conn, rid, event, on_host_request))

        rid, future = conn.send(request, on_event)
        try:
            reply = await future
        except asyncio.CancelledError:
            conn.notify({"type": "cancel", "target": rid})
            raise
        self._after_result()
        return ExecResult.from_json(reply["result"])

    def _timeout(self, timeout_ms: Optional[int]) -> Optional[int]:
        return timeout_ms

    def _max_output(self, max_output_bytes: Optional[int]) -> Optional[int]:
        return max_output_bytes

    async def _request(self, rtype: str, **fields: Any) -> Any:
        conn = await self._connection()
        request = {"type": rtype, "session": self._name}
        request.update({k: v for k, v in fields.items() if v is not None})
        return await conn.call(self._call_fields(request))

    async def variables(self) -> Dict[str, str]:
        return await self._request("variables")

    async def inspect(self, name: str, *, full: bool = False) -> Dict[str, Any]:
        """As the blocking ``inspect`` (``full``: the whole docstring and every attribute name)."""
        return await self._request("inspect", name=check_name(name), full=True if full else None)

    async def reset(self) -> None:
        await self._request("reset")

    async def interrupt(self) -> bool:
        conn = await self._connection()
        value = await conn.call({"type": "interrupt", "session": self._name})
        return bool((value or {}).get("interrupted"))

    async def __aenter__(self):
        await self._connection()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        raise NotImplementedError


def _spawn(value: Any) -> None:
    if _inspect.isawaitable(value):
        asyncio.ensure_future(value)


async def _answer(conn: AsyncConnection, target: int, event: Dict[str, Any], handler: Optional[HostHandler]) -> None:
    data = event.get("data")
    answer: Dict[str, Any]
    if handler is not None and asyncio.iscoroutinefunction(handler):
        try:
            value = await handler(data if isinstance(data, dict) else {})
            answer = answer_host_request(lambda _: value, data)
        except Exception as err:
            answer = {"error": "the host's handler failed: %s" % err}
    else:
        answer = answer_host_request(handler, data)  # type: ignore[arg-type]
    conn.notify({"type": "host_reply", "target": target, "host_id": event.get("host_id"), "data": answer})


class AsyncReplSession(_AsyncSessionBase):
    """``ReplSession`` for asyncio: a session of its own, started by the first call (or ``async with``)
    and ended by ``await close()``, or when this process's connection closes."""

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
        self.session_id, self._name, setup = owned_setup(session_id, timeout_ms, max_output_bytes, python, cwd, env, sandbox, limits, venv)
        self.timeout_ms = timeout_ms
        self.max_output_bytes = max_output_bytes
        self._spec, self._layout, self._exe, self._env = setup
        self._fresh = True
        self._opened = False

    def _closed_error(self) -> AwreplError:
        return SessionClosed("session_closed", "AsyncReplSession %r (supervisor name %s) is closed: its close() was called" % (self.session_id, self._name))

    async def _on_new_connection(self, conn: AsyncConnection) -> None:
        if not self._opened:  # the first connection: the session is created now, owned by it
            await conn.call({"type": "open", "session": self._name, "spec": self._spec, "owned": True})
            self._opened = True
            self._fresh = False
        else:
            self._fresh = True

    def _execute_request(self, request: Dict[str, Any]) -> None:
        if self._fresh:
            request.update(spec=self._spec, owned=True, known=True)

    def _call_fields(self, request: Dict[str, Any]) -> Dict[str, Any]:
        return request

    async def _request(self, rtype: str, **fields: Any) -> Any:
        conn = await self._connection()
        if self._fresh:
            await conn.call({"type": "open", "session": self._name, "spec": self._spec, "owned": True})
            self._fresh = False
        return await super()._request(rtype, **fields)

    def _after_result(self) -> None:
        self._fresh = False

    def _timeout(self, timeout_ms: Optional[int]) -> Optional[int]:
        return self.timeout_ms if timeout_ms is None else timeout_ms

    def _max_output(self, max_output_bytes: Optional[int]) -> Optional[int]:
        return self.max_output_bytes if max_output_bytes is None else max_output_bytes

    async def close(self) -> None:
        """Ends the session's worker. Idempotent."""
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        if conn is None or conn.closed or os.getpid() != conn._pid:
            return
        try:
            await asyncio.wait_for(conn.call({"type": "close", "session": self._name}), 10)
        except (AwreplError, asyncio.TimeoutError):
            pass
        await conn.close(self._closed_error())


class AsyncRemoteSession(_AsyncSessionBase):
    """``attach`` for asyncio: a named session the supervisor holds; ``close()`` only detaches."""

    def __init__(self, name: str, spec: Dict[str, Any], layout: Layout, exe: Executable, env: Dict[str, str]) -> None:
        self._name = name
        self._spec = spec
        self._layout = layout
        self._exe = exe
        self._env = env
        self._used = False

    def _closed_error(self) -> AwreplError:
        return SessionClosed("session_closed", "The attach_async(%r) object is closed (its close() was called); the session lives on in the supervisor" % self._name)

    def _execute_request(self, request: Dict[str, Any]) -> None:
        request["spec"] = self._spec
        if self._used:
            request["known"] = True

    def _after_result(self) -> None:
        self._used = True

    async def collect(self, wait_ms: int = 0, key: Optional[str] = None) -> Collected:
        check_count("wait_ms", wait_ms)
        check_key(key)
        conn = await self._connection()
        request = {"type": "collect", "session": self._name, "wait_ms": min(wait_ms, 2**31 - 1)}
        if key is not None:
            request["key"] = key
        return Collected.from_value(await conn.call(request))

    async def snapshot(self, path: Optional[str] = None, timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        return await self._request("snapshot", path=os.fspath(path) if path is not None else None, timeout_ms=check_count("timeout_ms", timeout_ms))

    async def restore(self, path: Optional[str] = None, timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        return await self._request("restore", path=os.fspath(path) if path is not None else None, timeout_ms=check_count("timeout_ms", timeout_ms))

    async def history(self, last: Optional[int] = None) -> History:
        """As the blocking ``history``: the session's cells, oldest first (``last``: only the newest N)."""
        conn = await self._connection()
        request: Dict[str, Any] = {"type": "history", "session": self._name}
        if check_last(last) is not None:
            request["last"] = last
        return History.from_value(await conn.call(request))

    async def complete(self, code: str, cursor: Optional[int] = None) -> List[str]:
        return await self._request("complete", code=check_code(code), cursor=cursor)

    async def is_complete(self, code: str) -> Dict[str, Any]:
        """Whether ``code`` is a whole cell (``{"status": "complete" | "incomplete" | "invalid", "indent"}``)."""
        return await self._request("is_complete", code=check_code(code))

    async def close(self) -> None:
        """Detaches; the session lives on in the supervisor. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._conn is not None and not self._conn.closed:
            await self._conn.close(self._closed_error())


async def attach_async(
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
) -> AsyncRemoteSession:
    """``attach`` for asyncio: connects (starting the supervisor if none runs) and returns the session."""
    fields = dict(python=python, cwd=cwd, env=env, sandbox=sandbox, timeout_ms=timeout_ms, max_output_bytes=max_output_bytes, grace_ms=grace_ms, autosave=autosave, limits=limits, venv=venv)
    setup = named_setup(name, existing, home, **fields)
    session = AsyncRemoteSession(name, setup.spec, setup.layout, setup.exe, setup.env)
    await session._connection()
    return session
