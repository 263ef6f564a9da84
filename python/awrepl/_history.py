"""A session's history (``history``'s answer, ``HistoryValue`` of lib/protocol/supervisor.ts) as dataclasses."""

from dataclasses import dataclass, field
from typing import Any, List, Optional

from ._result import ExecResult


@dataclass
class HistoryCell:
    """One cell: its number in the session (never reused), its code, the client that ran it (``python``,
    ``cli``, ``mcp``, ``kernel``, ...), its start (ISO 8601, UTC), and its result as that client got it."""

    n: int
    code: str
    client: str
    started_at: str
    duration_ms: float
    status: str
    result: ExecResult


@dataclass
class History:
    """The session's cells, oldest first; ``total``: cells ever recorded; ``dropped``: the oldest ones the
    history's bounds left out."""

    session: str
    cells: List[HistoryCell] = field(default_factory=list)
    total: int = 0
    dropped: int = 0

    @classmethod
    def from_value(cls, value: Any) -> "History":
        value = value or {}
        cells = [
            HistoryCell(
                n=c.get("n", 0),
                code=c.get("code", ""),
                client=c.get("client", "library"),
                started_at=c.get("started_at", ""),
                duration_ms=c.get("duration_ms", 0.0),
                status=c.get("status", "ok"),
                result=ExecResult.from_json(c.get("result") or {}),
            )
            for c in value.get("cells") or []
        ]
        return cls(session=value.get("session", ""), cells=cells, total=value.get("total", len(cells)), dropped=value.get("dropped", 0))


def check_last(last: object) -> Optional[int]:
    """``history``'s ``last``: None (every cell) or a whole number of cells."""
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 0):
        raise ValueError("history's last must be a whole number of cells (at least 0), not %r" % (last,))
    return last  # type: ignore[return-value]
