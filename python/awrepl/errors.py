"""The errors awrepl reports: one class, ``AwreplError``, carrying a stable ``code``.

The codes (and the CLI's exit status for each) are the executable's (``lib/core/errors.ts``); they are
listed once, in ``ERROR_CODES``, and a test compares that table with the TypeScript one. A few codes
have a subclass of their own, so a caller can catch them by type; every other code is a plain
``AwreplError`` whose ``code`` says which.
"""

from typing import Dict, Type

#: Every error code awrepl reports, and the exit status the CLI gives it (``lib/core/errors.ts``).
ERROR_CODES: Dict[str, int] = {
    "usage": 2,
    "no_interpreter": 125,
    "worker_died": 125,
    "worker_closed": 125,
    "timeout": 124,
    "protocol": 125,
    "supervisor_unreachable": 125,
    "version_mismatch": 125,
    "session_not_found": 2,
    "session_exists": 2,
    "session_busy": 2,
    "session_closed": 125,
    "cancelled": 130,
    "name_not_found": 1,
    "snapshot_failed": 125,
    "restore_failed": 125,
    "internal": 125,
}


class AwreplError(Exception):
    """An error awrepl itself reports. ``code`` is one of ``ERROR_CODES``; ``exit_code`` the CLI's status for it."""

    code: str = "internal"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code if code in ERROR_CODES else "internal"
        self.message = message

    @property
    def exit_code(self) -> int:
        return ERROR_CODES[self.code]

    def __reduce__(self):  # picklable (multiprocessing, concurrent.futures) whatever the subclass
        return (_rebuild, (type(self).__name__, self.code, self.message))


class UsageError(AwreplError):
    """Bad input: a bad option or value (code ``usage``)."""


class InvalidSessionName(UsageError, ValueError):
    """A session name that breaks the naming rule (code ``usage``); also a ``ValueError``."""


class SessionNotFound(AwreplError):
    """No such session runs, and none was created (code ``session_not_found``)."""


class SessionClosed(AwreplError):
    """The session, or this client object, is closed (code ``session_closed``)."""


class SupervisorUnreachable(AwreplError):
    """The supervisor could not be found, started or reached, or went away mid-call (code ``supervisor_unreachable``)."""


class VersionMismatch(AwreplError):
    """The supervisor is another version of awrepl (code ``version_mismatch``)."""


class NameNotFound(AwreplError, KeyError):
    """``inspect`` of a name the session does not define (code ``name_not_found``); also a ``KeyError``."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class ProtocolError(AwreplError):
    """The supervisor sent something that is not the protocol (code ``protocol``)."""


class CancelledCall(AwreplError):
    """The call was withdrawn before it ran (code ``cancelled``)."""


_BY_CODE: Dict[str, Type[AwreplError]] = {
    "usage": UsageError,
    "session_not_found": SessionNotFound,
    "session_closed": SessionClosed,
    "supervisor_unreachable": SupervisorUnreachable,
    "version_mismatch": VersionMismatch,
    "name_not_found": NameNotFound,
    "protocol": ProtocolError,
    "cancelled": CancelledCall,
}


def error_for(code: str, message: str) -> AwreplError:
    """The error of ``code``: its subclass when it has one. An unknown code (another build's) is ``internal``."""
    cls = _BY_CODE.get(code, AwreplError)
    return cls(code, message)


def _rebuild(cls_name: str, code: str, message: str) -> AwreplError:
    cls = globals().get(cls_name)
    if isinstance(cls, type) and issubclass(cls, AwreplError):
        return cls(code, message)
    return AwreplError(code, message)


__all__ = [
    "ERROR_CODES",
    "AwreplError",
    "UsageError",
    "InvalidSessionName",
    "SessionNotFound",
    "SessionClosed",
    "SupervisorUnreachable",
    "VersionMismatch",
    "NameNotFound",
    "ProtocolError",
    "CancelledCall",
    "error_for",
]
