"""The editing side of the kernel, as Jupyter asks it: where a completion starts (the session's
``complete`` answers matches only), which name a cursor points at (for ``inspect``), an ``inspect``
answer as the text a frontend shows, and the ``%awrepl`` magic line.
"""

import re
from typing import Any, Dict, List, Optional

from . import MAGIC

# The three shapes runtime.py's complete request reads before the cursor, in its order; each match
# replaces the text from the group named here: a dict key, a dotted name (matches are whole `a.b`),
# a bare name.
_KEY = re.compile(r"([A-Za-z_][\w.]*)\[\s*(['\"])([^'\"]*)$")
_ATTRIBUTE = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.(\w*)$")
_NAME = re.compile(r"[A-Za-z_]\w*$")
_DOTTED_BEFORE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\.?$")
_WORD_AFTER = re.compile(r"^\w*")
_CALLEE = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*$")
# IPython's help syntax, a cell of its own: `name?`, `name??`, `?name`.
_HELP = re.compile(r"^\s*(?:\?{1,2}([A-Za-z_][\w.]*)|([A-Za-z_][\w.]*)\?{1,2})\s*$")

#: The facts of an inspect answer shown first, in this order, with their labels.
_FACTS = (
    ("type", "Type"),
    ("shape", "Shape"),
    ("len", "Length"),
    ("dtype", "Dtype"),
    ("columns", "Columns"),
    ("summary", "Summary"),
    ("signature", "Signature"),
    ("module", "Module"),
    ("file", "File"),
    ("repr", "Repr"),
)


def completion_start(code: str, cursor: int) -> int:
    """Where the text the session's matches replace begins."""
    text = code[:cursor]
    m = _KEY.search(text)
    if m:
        return m.start(3)
    m = _ATTRIBUTE.search(text)
    if m:
        return m.start(1)
    m = _NAME.search(text)
    return m.start(0) if m else cursor


def name_at(code: str, cursor: int) -> Optional[str]:
    """The dotted name the cursor is in or just after; else the callee of the innermost open call
    (``f(1, |`` inspects ``f``, as IPython does); None when there is neither."""
    cursor = max(0, min(cursor, len(code)))
    before, after = code[:cursor], code[cursor:]
    m = _DOTTED_BEFORE.search(before)
    if m and m.group(0).rstrip("."):
        tail = _WORD_AFTER.match(after)
        name = m.group(0) + (tail.group(0) if tail else "")
        return name.rstrip(".")
    depth = 0
    for i in range(len(before) - 1, -1, -1):
        ch = before[i]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth == 0:
                if ch != "(":
                    return None
                callee = _CALLEE.search(before[:i])
                return callee.group(1) if callee else None
            depth -= 1
    return None


def format_inspection(info: Dict[str, Any]) -> str:
    """An inspect answer as the plain text a frontend's help pane shows."""
    lines: List[str] = []
    for key, label in _FACTS:
        value = info.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, (list, dict)):
            value = ", ".join(map(str, value)) if isinstance(value, list) else ", ".join("%s: %s" % kv for kv in value.items())
        text = str(value)
        lines.append("%-11s%s" % (label + ":", text.replace("\n", "\n" + " " * 11)))
    if info.get("keys"):
        lines.append("%-11s%s" % ("Keys:", ", ".join(map(str, info["keys"]))))
    if info.get("docstring"):
        lines.append("Docstring:")
        lines.append(str(info["docstring"]))
    if info.get("dir"):
        lines.append("%-11s%s" % ("Names:", ", ".join(map(str, info["dir"]))))
    return "\n".join(lines)


def help_target(code: str) -> Optional[str]:
    """The name of a ``name?`` / ``?name`` cell (IPython's way to ask about it); None for any other cell."""
    m = _HELP.match(code)
    return (m.group(1) or m.group(2)).rstrip(".") if m else None


def magic_words(code: str) -> Optional[List[str]]:
    """The words after ``%awrepl`` when the cell is that one line (blank lines around it allowed);
    None for any other cell, which goes to the session as it is."""
    text = code.strip()
    if "\n" in text or not (text == MAGIC or text.startswith(MAGIC + " ")):
        return None
    return text.split()[1:]
