"""awrepl: persistent Python sessions for agents, as a client of the awrepl executable's supervisor.

    from awrepl import ReplSession
    with ReplSession("agent-1") as session:
        session.execute("items = [1, 2, 3]")
        print(session.execute("print(len(items))").stdout)

Importing this package loads nothing else: each name is imported on first use (module ``__getattr__``).
"""

# Not `typing` (it costs more than the rest of the import): type checkers read TYPE_CHECKING as True.
TYPE_CHECKING = False

# name -> the module that defines it
_EXPORTS = {
    "ReplSession": "._session",
    "RemoteSession": "._attach",
    "DetachedCell": "._attach",
    "Collected": "._attach",
    "History": "._history",
    "HistoryCell": "._history",
    "attach": "._attach",
    "sessions": "._attach",
    "ExecResult": "._result",
    "SessionPool": "._pool",
    "AsyncReplSession": "._aio",
    "AsyncRemoteSession": "._aio",
    "attach_async": "._aio",
    "AwreplError": ".errors",
    "UsageError": ".errors",
    "InvalidSessionName": ".errors",
    "SessionNotFound": ".errors",
    "SessionClosed": ".errors",
    "SupervisorUnreachable": ".errors",
    "VersionMismatch": ".errors",
    "NameNotFound": ".errors",
    "ProtocolError": ".errors",
    "CancelledCall": ".errors",
    "ERROR_CODES": ".errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> "Any":
    if name == "__version__":
        value = _version()
        globals()[name] = value
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError("module 'awrepl' has no attribute %r" % name)
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def _version() -> str:
    """The installed distribution's version (the wheel's); in a checkout, package.json's: one source each.
    The copy an awrepl executable writes for its kernel (``awrepl kernel install``) carries its own
    ``_version.txt``, which comes first: another awrepl that pip installed beside it is not this one."""
    import os

    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_version.txt"), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("awrepl")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    import json

    try:
        with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "package.json"), encoding="utf-8") as f:
            return str(json.load(f)["version"])
    except (OSError, ValueError, KeyError):
        return "unknown"


def __dir__() -> list:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and IDEs; never executed
    from typing import Any

    from ._aio import AsyncRemoteSession, AsyncReplSession, attach_async
    from ._pool import SessionPool
    from ._result import ExecResult
    from ._attach import Collected, DetachedCell, RemoteSession, attach, sessions
    from ._history import History, HistoryCell
    from ._session import ReplSession
    from .errors import (
        ERROR_CODES,
        AwreplError,
        CancelledCall,
        InvalidSessionName,
        NameNotFound,
        ProtocolError,
        SessionClosed,
        SessionNotFound,
        SupervisorUnreachable,
        UsageError,
        VersionMismatch,
    )
