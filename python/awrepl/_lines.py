"""The lines of the supervisor protocol: one request written, one reply read (the blocking and the
asyncio transports both use these)."""

import json
from typing import Any, Dict, Optional, Union

from .errors import AwreplError, ProtocolError, error_for

#: The replies that end a request; the others (stdout, stderr, display, host_request) stream before them.
FINAL = ("result", "ok", "error")


def _encoder() -> Any:
    """One encoder for every line. ``JSONEncoder.encode`` builds its C encoder anew on each call (a
    third of encoding a request); the C encoder made once with the same arguments is reused instead
    (no circular check: a request is plain data). Without the C module, the encoder's own ``encode``."""
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover
        return encoder.encode
    once = make(None, encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    join = "".join
    return lambda value: join(once(value, 0))


_ENCODE = _encoder()
#: The decoder's C scanner itself: ``decode`` around it adds two regex matches and a frame per line.
_SCAN = json.JSONDecoder().scan_once

Line = Union[bytes, bytearray, memoryview]


class Encoded:
    """A request's ``spec`` already encoded (the same on every request of a session, and the largest part
    of it: the caller's environment): its UTF-8 bytes are spliced in as the line's tail, never encoded again."""

    __slots__ = ("text", "tail")

    def __init__(self, value: Any) -> None:
        self.text = _ENCODE(value)
        self.tail = b',"spec":' + self.text.encode("utf-8") + b"}\n"


def encode_request(request: Dict[str, Any]) -> bytes:
    """One request line. Text that UTF-8 cannot carry (a lone surrogate) is a ``ValueError`` here, before
    anything is sent."""
    spec = request.get("spec")
    try:
        if type(spec) is Encoded:
            rest = dict(request)
            del rest["spec"]
            return _ENCODE(rest)[:-1].encode("utf-8") + spec.tail
        return _ENCODE(request).encode("utf-8") + b"\n"
    except UnicodeEncodeError as err:
        raise ValueError("The %s request cannot be sent: its text is not valid Unicode (%s)" % (request.get("type"), err)) from None


def foreign_connection_error(owner_pid: int, pid: int) -> AwreplError:
    """What a fork child gets for using its parent's connection."""
    return AwreplError(
        "usage",
        "This connection to the supervisor belongs to process %d, not to this one (pid %d, a child after os.fork()): "
        "two processes on one socket would mix their replies; create a new session object (or attach() again) in the child" % (owner_pid, pid),
    )


def parse_reply(line: Line) -> Dict[str, Any]:
    """The reply object of one line (bytes, or a view of the read buffer: decoded straight from it);
    ``ProtocolError`` when it is not one."""
    try:
        text = str(line, "utf-8")
        reply, end = _SCAN(text, 0)
    except (ValueError, StopIteration):
        raise ProtocolError("protocol", "The supervisor sent a line that is not JSON: %r" % bytes(line[:80])) from None
    if end != len(text) and text[end:].strip():
        raise ProtocolError("protocol", "The supervisor sent a line that is not one JSON value: %r" % bytes(line[:80]))
    if not isinstance(reply, dict):
        raise ProtocolError("protocol", "The supervisor sent a line that is not an object: %r" % bytes(line[:80]))
    return reply


def reply_error(reply: Dict[str, Any]) -> AwreplError:
    """The error an ``error`` reply carries."""
    return error_for(str(reply.get("code")), str(reply.get("message")))


class LineRouter:
    """The first steps of routing a reply line, for both connections: a line that is not the protocol
    ends the connection; an ``error`` without an id (the supervisor could not read a request: a line too
    large) is kept as the reason, should the connection close next; anything else goes to ``_deliver``."""

    _last_words: Optional[AwreplError] = None

    def _fail(self, error: AwreplError) -> None:
        raise NotImplementedError

    def _deliver(self, rid: Any, event: Any, reply: Dict[str, Any]) -> None:
        raise NotImplementedError

    def _route(self, line: Line) -> None:
        try:
            reply = parse_reply(line)
        except AwreplError as err:
            self._fail(err)
            return
        rid = reply.get("id")
        event = reply.get("event")
        if event == "error" and rid is None:
            self._last_words = reply_error(reply)
            return
        self._deliver(rid, event, reply)
