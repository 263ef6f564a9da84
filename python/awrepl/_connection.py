"""One connection to the supervisor (blocking): requests multiplexed by id over one socket.

Whoever waits reads: a thread waiting for its reply takes the read lock and reads the socket itself,
routing every reply to the request it answers (its own stream events too, handled in the waiting
thread, so callbacks run in the caller's thread); another thread waiting meanwhile sleeps on its own
event until its reply is routed to it, or until the reader leaves and it can read. A single-threaded
caller therefore pays one ``recv`` per reply, with no thread hand-off.

Ctrl-C: while the main thread waits, SIGINT only sets a flag (when the handler in place is Python's
default), so a line is never half consumed; the wait then sends ``cancel`` for its request (a running
cell is interrupted, a queued one withdrawn), waits for the answer and raises ``KeyboardInterrupt``.
Any other exception that escapes while the socket is read discards the connection: the next call
makes a new one, never reads a stream whose framing it lost.
"""

import collections
import os
import socket
import threading
import time
from typing import Any, Callable, Deque, Dict, Optional

from ._home import Layout
from ._start import Handshake
from ._lines import FINAL, LineRouter, encode_request, foreign_connection_error, reply_error
from .errors import AwreplError, SupervisorUnreachable

try:  # the C module: the same calls without the enum conversions of ``signal`` (a few µs per call)
    import _signal as signal
except ImportError:  # pragma: no cover
    import signal  # type: ignore[no-redef]

#: How often a waiting thread looks at its flags (Ctrl-C, a closed connection, a reader that left).
POLL_S = 0.1
#: How long a wait keeps going after Ctrl-C sent `cancel`, for the call's answer (a second Ctrl-C stops it).
CANCEL_WAIT_S = 10.0
#: The read buffer, made once per connection and read into (``recv(n)`` allocates n bytes per call: at
#: this size an mmap and its page faults, ~20 µs, a tenth of a round trip).
READ_CHUNK = 262144

EventHandler = Callable[[Dict[str, Any]], None]


class Pending:
    __slots__ = ("id", "events", "reply", "wake")

    def __init__(self, rid: int) -> None:
        self.id = rid
        self.events: Deque[Dict[str, Any]] = collections.deque()
        self.reply: Optional[Dict[str, Any]] = None
        #: Made only when another thread reads for this one (a single-threaded caller never needs it).
        self.wake: Optional[threading.Event] = None

    def alarm(self) -> None:
        wake = self.wake
        if wake is not None:
            wake.set()

    def sleep(self, seconds: float) -> None:
        """Waits until alarmed or ``seconds`` pass. The event is made before the reply is looked at, and
        the reader sets the reply before it looks for the event: one of the two always sees the other."""
        wake = self.wake
        if wake is None:
            wake = self.wake = threading.Event()
        if self.reply is None and not self.events:
            wake.wait(seconds)
        wake.clear()


_MAIN_THREAD = threading.main_thread().ident
#: This process's pid, kept current in a fork child by the hook below: the fork check of every call
#: costs no getpid() syscall.
_PID = [os.getpid()]


def _forked() -> None:
    _PID[0] = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class _SigintFlag:
    """Turns SIGINT into a flag while the main thread waits, when the handler in place is Python's default."""

    def __init__(self) -> None:
        self.hit = 0
        self.previous: Any = None

    def __enter__(self) -> "_SigintFlag":
        if threading.get_ident() == _MAIN_THREAD:
            try:
                if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                    self.previous = signal.signal(signal.SIGINT, self._handle)
            except (ValueError, OSError):  # not the main interpreter, or no signals here
                self.previous = None
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.hit += 1

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


class Connection(LineRouter):
    def __init__(self, hs: Handshake, layout: Layout) -> None:
        self.layout = layout
        self.supervisor_pid: int = hs.hello.get("pid", 0)
        self._sock = hs.sock
        self._sock.settimeout(POLL_S)
        #: A line begun but not ended yet (the rest of it is in a later read).
        self._buf = bytearray()
        self._chunk = bytearray(READ_CHUNK)
        self._chunk_view = memoryview(self._chunk)
        self._pid = _PID[0]
        self._next_id = 1
        self._pending: Dict[int, Pending] = {}
        self._write = threading.Lock()
        self._reader = threading.Lock()
        self._error: Optional[AwreplError] = None
        self._last_words: Optional[AwreplError] = None
        for line in hs.rest.split(b"\n")[:-1]:  # what came after hello's answer (no request is pending yet)
            self._route(line)
        self._buf += hs.rest[hs.rest.rfind(b"\n") + 1 :]

    @property
    def closed(self) -> bool:
        return self._error is not None

    def foreign(self) -> bool:
        """True in a child process after os.fork(): the connection is its parent's."""
        return _PID[0] != self._pid

    def _check_usable(self) -> None:
        if self.foreign():
            raise foreign_connection_error(self._pid, os.getpid())
        if self._error is not None:
            raise self._error

    # --- sending -------------------------------------------------------------------------------

    def start(self, request: Dict[str, Any]) -> Pending:
        """Writes one request (its id added) and returns its pending entry. A write that fails means the
        supervisor had closed the connection: nothing of it was read (``never_ran``)."""
        self._check_usable()
        with self._write:
            rid = self._next_id
            request["id"] = rid
            data = encode_request(request)
            self._next_id += 1
            pending = Pending(rid)
            self._pending[rid] = pending
            try:
                self._send_all(data)
            except OSError as err:
                self._pending.pop(rid, None)
                # What it said before closing (a request too large is refused so) is the reason.
                self._read_last_words()
                if self._last_words is not None:
                    self._fail(self._last_words)
                    raise self._last_words from None
                self._fail(SupervisorUnreachable("supervisor_unreachable", "The supervisor closed the connection: %s (its log: %s)" % (err, self.layout.log)))
                raise NeverSent(self._error) from None
            except BaseException:
                self._pending.pop(rid, None)
                raise
        return pending

    def _read_last_words(self) -> None:
        """Routes what the supervisor wrote before it closed the connection (a write to it just failed)."""
        if not self._reader.acquire(timeout=1):
            return
        try:
            for _ in range(64):
                try:
                    n = self._sock.recv_into(self._chunk)
                except OSError:
                    return
                if not n:
                    return
                self._take(n)
        finally:
            self._reader.release()

    def _send_all(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                try:
                    n = self._sock.send(view)
                except socket.timeout:
                    continue
                view = view[n:]
        except BaseException as err:
            if 0 < len(view) < len(data) and not isinstance(err, OSError):
                # Half a line went out (Ctrl-C in a long write): the supervisor's framing is lost with it.
                self._fail(AwreplError("internal", "The connection to the supervisor was dropped: a request was cut off mid-line by %r" % err))
            raise

    def notify(self, request: Dict[str, Any]) -> None:
        """Fire and forget (cancel, host_reply): its answer is dropped when it comes."""
        try:
            pending = self.start(request)
        except AwreplError:
            return
        self._pending.pop(pending.id, None)

    # --- waiting -------------------------------------------------------------------------------

    def wait(self, pending: Pending, on_event: Optional[EventHandler] = None, sigint_does: str = "cancel", timeout_s: Optional[float] = None) -> Dict[str, Any]:
        """The request's final reply (``result`` / ``ok``; an ``error`` is raised), handing each stream
        event to ``on_event`` in this thread as it arrives. Ctrl-C (``sigint_does``): ``cancel`` the
        request and raise ``KeyboardInterrupt`` once it answered; ``leave`` it pending and raise at once
        (a detached cell runs on); ``defer``: raise once it answered. ``timeout_s``: give up waiting
        (``timeout``), leaving the request to run."""
        cancellable = sigint_does == "cancel"
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        with _SigintFlag() as sigint:
            cancel_sent_at: Optional[float] = None
            while pending.reply is None:
                if give_up is not None and time.monotonic() > give_up:
                    self._pending.pop(pending.id, None)
                    raise AwreplError("timeout", "No answer from the supervisor within %.1f s" % timeout_s)
                if sigint.hit and sigint_does == "leave":
                    raise KeyboardInterrupt
                self._step(pending)
                while pending.events:
                    event = pending.events.popleft()
                    if on_event is not None:
                        try:
                            on_event(event)
                        except BaseException:
                            # The caller's callback raised: the call is given up, and withdrawn.
                            self._pending.pop(pending.id, None)
                            self.notify({"type": "cancel", "target": pending.id})
                            raise
                if pending.reply is not None:
                    break
                if sigint.hit and cancellable:
                    if cancel_sent_at is None:
                        cancel_sent_at = time.monotonic()
                        self.notify({"type": "cancel", "target": pending.id})
                    elif sigint.hit > 1 or time.monotonic() - cancel_sent_at > CANCEL_WAIT_S:
                        self._pending.pop(pending.id, None)
                        raise KeyboardInterrupt
                if self._error is not None and pending.reply is None:
                    self._pending.pop(pending.id, None)
                    raise self._error
            reply = pending.reply
            if sigint.hit:
                interrupted = KeyboardInterrupt()
                interrupted.reply = reply  # type: ignore[attr-defined]
                raise interrupted
        if reply.get("event") == "error":
            raise reply_error(reply)
        return reply

    def call(self, request: Dict[str, Any]) -> Any:
        """A request answered by ``ok``: its value."""
        return self.wait(self.start(request)).get("value")

    def _step(self, pending: Pending) -> None:
        """Reads once if no other thread is reading, else sleeps a little on this request's event."""
        if self._error is not None:
            return
        if self.foreign():
            self._check_usable()
        if not self._reader.acquire(blocking=False):
            pending.sleep(POLL_S / 2)
            return
        try:
            self._read_some()
        except BaseException as err:
            # Whatever escaped, what was read may be half routed: this connection's framing is lost.
            self._fail(AwreplError("internal", "The connection to the supervisor was dropped: reading it was interrupted by %r" % err))
            raise
        finally:
            self._reader.release()
            for other in list(self._pending.values()):
                if other is not pending:
                    other.alarm()

    def _read_some(self) -> None:
        try:
            n = self._sock.recv_into(self._chunk)
        except socket.timeout:
            return
        except OSError as err:
            self._fail(self._closed_error(": %s" % err))
            return
        if not n:
            self._fail(self._closed_error(""))
            return
        self._take(n)

    def _take(self, n: int) -> None:
        """Routes every whole line of the ``n`` bytes just read into the read buffer; a line's beginning
        from an earlier read is in ``_buf``, and so goes the end of this read that is no whole line yet.
        A line read whole is decoded straight from the read buffer (no copy); routing never reads, so the
        buffer is not overwritten under it."""
        chunk = self._chunk
        view = self._chunk_view
        start = 0
        buf = self._buf
        if buf:
            end = chunk.find(b"\n", 0, n)
            if end < 0:
                buf += view[:n]
                return
            buf += view[:end]
            line = bytes(buf)
            buf.clear()
            self._route(line)
            start = end + 1
        while True:
            end = chunk.find(b"\n", start, n)
            if end < 0:
                break
            self._route(view[start:end])
            start = end + 1
        if start < n:
            buf += view[start:n]

    def _deliver(self, rid: Any, event: Any, reply: Dict[str, Any]) -> None:
        pending = self._pending.get(rid)  # type: ignore[arg-type]
        if pending is None:
            return  # an answer to a request given up on (notify, a cancelled wait)
        if event in FINAL:
            del self._pending[rid]  # type: ignore[arg-type]
            pending.reply = reply
        else:
            pending.events.append(reply)
        pending.alarm()

    # --- closing -------------------------------------------------------------------------------

    def _closed_error(self, why: str) -> AwreplError:
        if self._last_words is not None:
            return self._last_words
        return SupervisorUnreachable("supervisor_unreachable", "The supervisor closed the connection%s (its log: %s)" % (why, self.layout.log))

    def _fail(self, error: AwreplError) -> None:
        if self._error is not None:
            return
        self._error = error
        for p in list(self._pending.values()):
            p.alarm()
        try:
            self._sock.close()
        except OSError:
            pass

    def discard(self) -> None:
        """Closes this process's copy of the socket, sending nothing (a fork child's copy of its parent's)."""
        self._error = self._error or AwreplError("session_closed", "This connection belongs to another process")
        try:
            self._sock.close()
        except OSError:
            pass

    def close(self, reason: Optional[AwreplError] = None) -> None:
        """Closes the socket; every pending and later request fails with ``reason``."""
        self._fail(reason or AwreplError("session_closed", "This connection to the supervisor was closed"))


class NeverSent(AwreplError):
    """A request whose write failed because the supervisor had gone: it never ran, so it may be sent again."""

    def __init__(self, cause: Optional[AwreplError]) -> None:
        super().__init__(cause.code if cause else "supervisor_unreachable", cause.message if cause else "The supervisor went away")
        self.cause = cause
