"""``ExecResult``: the result of one cell, the JSON result of ``lib/protocol/result.ts`` as a dataclass."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

#: The keys that are left out of the JSON when they have no value (``to_dict``).
_OPTIONAL = ("display_dropped", "notice", "restored", "replayed")


@dataclass
class ExecResult:
    """The result of one cell: the original package's eight fields, then this project's.

    ``status`` is ``ok``, ``error``, ``timeout``, ``interrupted`` or ``died``; ``session`` the
    supervisor's name of the session; ``display`` the rich-output entries (MIME type -> data, or the
    path of the file a binary payload was written to); ``display_dropped`` how many entries were left
    out (None: none); ``notice`` what happened when this call ran in a fresh worker; ``restored`` the
    report of the snapshot this call's new worker was restored from; ``replayed`` True when the call
    repeated an idempotency key and nothing ran (this is the first call's result).
    """

    stdout: str
    stderr: str
    value: Optional[str]
    exception: Optional[str]
    traceback: str
    duration_ms: float
    truncated: bool
    truncated_bytes: int
    status: str = "ok"
    session: Optional[str] = None
    display: List[Dict[str, Any]] = field(default_factory=list)
    display_dropped: Optional[int] = None
    notice: Optional[str] = None
    restored: Optional[Dict[str, Any]] = None
    replayed: Optional[bool] = None

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "ExecResult":
        try:
            return cls(**obj)  # the usual case: exactly this shape
        except TypeError:  # a key this version does not know (a newer supervisor), or one missing
            pass
        return cls(
            stdout=obj.get("stdout", ""),
            stderr=obj.get("stderr", ""),
            value=obj.get("value"),
            exception=obj.get("exception"),
            traceback=obj.get("traceback", ""),
            duration_ms=obj.get("duration_ms", 0.0),
            truncated=obj.get("truncated", False),
            truncated_bytes=obj.get("truncated_bytes", 0),
            status=obj.get("status", "ok"),
            session=obj.get("session"),
            display=obj.get("display") or [],
            display_dropped=obj.get("display_dropped"),
            notice=obj.get("notice"),
            restored=obj.get("restored"),
            replayed=obj.get("replayed"),
        )

    def to_dict(self) -> Dict[str, Any]:
        """The JSON result (``awrepl run --json``'s shape): the optional keys only when set."""
        out = dict(self.__dict__)
        for key in _OPTIONAL:
            if out[key] is None:
                del out[key]
        return out
