"""The rule for session names: one copy of ``lib/core/names.ts``'s (a test compares the two)."""

import re

from .errors import InvalidSessionName

#: ``SESSION_NAME`` of ``lib/core/names.ts``: names become file names (snapshots, display folders).
SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NAME_RULE = "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def check_session_name(name: object, where: str = "Session name") -> str:
    """``name`` if it is a valid session name; otherwise ``InvalidSessionName`` (a ``ValueError``) naming it and the rule."""
    if isinstance(name, str) and SESSION_NAME.fullmatch(name):
        return name
    shown = repr(name)
    if len(shown) > 80:
        shown = "%s... (%d characters)" % (shown[:80], len(shown))
    raise InvalidSessionName("usage", "%s %s is invalid: %s" % (where, shown, NAME_RULE))
