"""An awrepl result as Jupyter's messages see it: display entries as MIME bundles (the files an entry
points at read back in), the trailing value as ``execute_result`` data, an exception as ``ename`` /
``evalue`` / ``traceback``, and what awrepl says beside a result (a fresh worker, a restore, dropped
entries) as lines for stderr. No Jupyter import: the kernel sends what these functions build.
"""

import base64
import json
from typing import Any, Dict, List, Optional, Tuple

#: The keys of a display entry that are awrepl's, not MIME types (README, "Rich output").
_ENTRY_KEYS = ("metadata", "source", "error")
#: The MIME types whose file holds text (read as UTF-8); every other file is sent base64, as Jupyter does.
_TEXT_TYPES = ("image/svg+xml", "application/javascript", "application/xml")

Bundle = Dict[str, Any]


def is_text_type(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith("+xml") or is_json_type(mime)


def is_json_type(mime: str) -> bool:
    return mime == "application/json" or mime.endswith("+json")


def entry_bundle(entry: Dict[str, Any]) -> Tuple[Bundle, List[str]]:
    """One display entry as Jupyter ``data``, and the problems to tell the person (a repr method that
    raised, a file that is gone). A MIME type whose ``metadata`` gives a size holds a file's path:
    the file is read, and sent base64 unless its type is text."""
    files = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
    data: Bundle = {}
    problems: List[str] = []
    for mime, value in entry.items():
        if mime in _ENTRY_KEYS or "/" not in mime:
            continue
        if mime in files and isinstance(value, str):
            try:
                with open(value, "rb") as f:
                    raw = f.read()
            except OSError as err:
                problems.append("awrepl: the %s display file %s could not be read: %s" % (mime, value, err.strerror or err))
                continue
            value = raw.decode("utf-8", "replace") if is_text_type(mime) else base64.b64encode(raw).decode("ascii")
        if is_json_type(mime) and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass  # not JSON after all: sent as the text it is
        data[mime] = value
    if entry.get("error"):
        problems.append("awrepl: %s" % entry["error"])
    return data, problems


def value_bundle(value: Optional[str], entries: List[Dict[str, Any]]) -> Tuple[Bundle, List[str]]:
    """``execute_result`` data: the rich forms of the trailing value (its entries marked ``source:
    value``), with the repr as ``text/plain`` unless an entry gave one. Empty: nothing to show."""
    data: Bundle = {}
    problems: List[str] = []
    for entry in entries:
        more, trouble = entry_bundle(entry)
        data.update(more)
        problems.extend(trouble)
    if value is not None and "text/plain" not in data:
        data["text/plain"] = value
    return data, problems


def split_exception(exception: Optional[str], status: str) -> Tuple[str, str]:
    """``Type: message`` as (ename, evalue); a result that failed without one names its status."""
    if not exception:
        return {"timeout": "TimeoutError", "interrupted": "KeyboardInterrupt", "died": "WorkerDied"}.get(status, "Error"), ""
    head, sep, rest = exception.partition(": ")
    if sep and head and " " not in head:
        return head, rest
    return (exception, "") if " " not in exception else ("Error", exception)


def traceback_lines(traceback: str, ename: str, evalue: str) -> List[str]:
    """Jupyter's ``traceback``: a list of lines (frontends join them with newlines)."""
    lines = traceback.rstrip("\n").split("\n") if traceback.strip() else []
    return lines or ["%s: %s" % (ename, evalue) if evalue else ename]


def result_notes(result: Any) -> List[str]:
    """What awrepl says beside a result, for stderr: the call ran in a fresh worker (``notice``), it
    was restored from a snapshot, display entries were dropped."""
    notes = []
    if result.notice:
        notes.append("awrepl: %s" % result.notice)
    if result.restored and not result.notice:  # a notice already says the session came back from its snapshot
        restored = result.restored
        names = restored.get("restored") if isinstance(restored, dict) else None
        failed = restored.get("failed") if isinstance(restored, dict) else None
        count = " (%d names)" % len(names) if isinstance(names, list) else ""
        if isinstance(failed, list) and failed:
            count += "; not restored: %s" % ", ".join(str(f.get("name")) for f in failed if isinstance(f, dict))
        notes.append("awrepl: this cell's new worker restored the session's snapshot%s" % count)
    if result.display_dropped:
        notes.append("awrepl: %d display entries were left out (displayMaxEntries or the output budget)" % result.display_dropped)
    return notes
