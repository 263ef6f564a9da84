"""``SessionPool``: ReplSessions indexed by id, as the original package's."""

import threading
from typing import Dict, List, Optional

from ._session import ReplSession
from ._spec import Limits


class SessionPool:
    """Several sessions, each its own namespace, created and closed by id."""

    def __init__(self, timeout_ms: int = 30000, max_output_bytes: int = 65536, *, limits: Limits = None, venv: Optional[str] = None) -> None:
        self.timeout_ms = timeout_ms
        self.max_output_bytes = max_output_bytes
        #: Every session of the pool gets these (one venv is shared: created by the first session).
        self.limits = limits
        self.venv = venv
        self._sessions: Dict[str, ReplSession] = {}
        self._lock = threading.Lock()

    def create_session(self, session_id: Optional[str] = None) -> str:
        """Starts a session and returns its id (generated when not given); ``ValueError`` for an id in use."""
        with self._lock:
            if session_id is not None and session_id in self._sessions:
                raise ValueError("Session %r already exists in this pool" % session_id)
            session = ReplSession(session_id, self.timeout_ms, self.max_output_bytes, limits=self.limits, venv=self.venv)
            self._sessions[session.session_id] = session
            return session.session_id

    def get_session(self, session_id: str) -> ReplSession:
        """The session of that id; ``KeyError`` when there is none."""
        try:
            return self._sessions[session_id]
        except KeyError:
            raise KeyError("No session %r in this pool" % (session_id,)) from None

    def list_sessions(self) -> List[str]:
        return list(self._sessions)

    def delete_session(self, session_id: str) -> None:
        """Closes the session and forgets it; ``KeyError`` when there is none."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise KeyError("No session %r in this pool" % (session_id,))
        session.close()

    def close_all(self) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.close()

    def __enter__(self) -> "SessionPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions
