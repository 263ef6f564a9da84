"""The lines of the supervisor protocol: one request written, one reply read (the blocking and the
asyncio transports both use these)."""

import json
from typing import Any, Dict, Optional

from .errors import AwreplError, ProtocolError, error_for

#: The replies that end a request; the others (stdout, stderr, display, host_request) stream before them.
FINAL = ("result", "ok", "error")


#: One encoder for every line (json.dumps with options builds a new one per call).
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_DECODE = json.JSONDecoder().decode


class Encoded:
    """A request's ``spec`` already in JSON (the same on every request of a session): spliced in, not encoded again."""

    __slots__ = ("text",)

    def __init__(self, value: Any) -> None:
        self.text = _ENCODE(value)


def encode_request(request: Dict[str, Any]) -> bytes:
    """One request line. Text that UTF-8 cannot carry (a lone surrogate) is a ``ValueError`` here, before
    anything is sent."""
    spec = request.get("spec")
    if type(spec) is Encoded:
        rest = dict(request)
        del rest["spec"]
        text = '%s,"spec":%s}' % (_ENCODE(rest)[:-1], spec.text)
    else:
        text = _ENCODE(request)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError as err:
        raise ValueError("The %s request cannot be sent: its text is not valid Unicode (%s)" % (request.get("type"), err)) from None


def foreign_connection_error(owner_pid: int, pid: int) -> AwreplError:
    """What a fork child gets for using its parent's connection."""
    return AwreplError(
        "usage",
        "This connection to the supervisor belongs to process %d, not to this one (pid %d, a child after os.fork()): "
        "two processes on one socket would mix their replies; create a new session object (or attach() again) in the child" % (owner_pid, pid),
    )


def parse_reply(line: bytes) -> Dict[str, Any]:
    """The reply object of one line; ``ProtocolError`` when it is not one."""
    try:
        reply = _DECODE(line.decode("utf-8"))
    except ValueError:
        raise ProtocolError("protocol", "The supervisor sent a line that is not JSON: %r" % line[:80]) from None
    if not isinstance(reply, dict):
        raise ProtocolError("protocol", "The supervisor sent a line that is not an object: %r" % line[:80])
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

    def _route(self, line: bytes) -> None:
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
