"""The kernel: ipykernel's ``Kernel`` base class (Jupyter's wrapper-kernel pattern) in front of a named
awrepl session, reached with ``awrepl.attach``. ipykernel owns the sockets, the message signing, the
heartbeat and the control thread; this class answers the requests.

- ``execute``: the cell runs in the session (the agent's namespace). Output is sent as ``stream`` as
  it arrives, display entries as ``display_data`` (their files read back in), the trailing value as
  ``execute_result``, an exception as ``error``.
- Interrupt: ipykernel turns an ``interrupt_request`` (or Jupyter's SIGINT) into SIGINT on this
  process, whose main thread is then waiting in ``execute``; the awrepl client answers SIGINT there by
  cancelling its own call (a running cell is interrupted, a queued one withdrawn) and raising
  ``KeyboardInterrupt`` with the cell's result.
- ``complete``, ``inspect``, ``is_complete``: the session's own requests. They queue behind a running
  cell (an agent's, say), so each waits at most ``EDIT_WAIT_S`` and then answers nothing.
- Shutdown and restart end this process only: the session, and everything in it, lives on.
"""

import threading
from typing import Any, Callable, Dict, List, Optional

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel
from traitlets import DottedObjectName, Float, Int, Unicode

import awrepl
from awrepl.errors import AwreplError, NameNotFound

from . import MAGIC
from ._content import entry_bundle, result_notes, split_exception, traceback_lines, value_bundle
from ._editing import completion_start, format_inspection, help_target, magic_words, name_at

#: How long completion, inspection and is_complete wait for the session (a cell may hold its queue).
EDIT_WAIT_S = 3.0

HELP = """%awrepl reset     clear the session's namespace (the agent's too; the worker keeps running)
%awrepl session   which awrepl session this kernel is a client of, and its state
%awrepl help      this text

Restarting the kernel restarts this notebook's connection only: the session keeps its state.
From a terminal: awrepl -s {name} reset | interrupt | vars | close"""


class AwreplKernel(Kernel):
    implementation = "awrepl"
    implementation_version = awrepl.__version__
    language = "python"
    language_version = "3"
    language_info = {
        "name": "python",
        "version": "3",
        "mimetype": "text/x-python",
        "file_extension": ".py",
        "pygments_lexer": "ipython3",
        "codemirror_mode": {"name": "ipython", "version": 3},
        "nbconvert_exporter": "python",
    }

    # ipykernel sleeps this long before each execute_reply so that output written to its sys.stdout
    # reaches IOPub first; every message of this kernel is sent from the handler itself.
    _execute_sleep = Float(0.0)

    awrepl_session = Unicode("", config=True, help="The named awrepl session this kernel is a client of.")
    awrepl_timeout_ms = Int(0, config=True, help="Each cell's timeout in ms (0: none, as in Jupyter).")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # This process is the kernel: its hello says so, and the session's history names "kernel" for its cells.
        from awrepl import _start

        _start.client_kind = "kernel"
        self._remote: Optional[awrepl.RemoteSession] = None
        self._attach_lock = threading.Lock()

    @property
    def banner(self) -> str:  # type: ignore[override]
        return "awrepl kernel: a client of the awrepl session %r (%s help)" % (self.awrepl_session, MAGIC)

    # --- the session ---------------------------------------------------------------------------

    def _session(self) -> "awrepl.RemoteSession":
        """The named session, attached on first use (which starts the supervisor if none runs, and
        creates the session with this kernel's directory and environment if it does not exist)."""
        with self._attach_lock:
            if self._remote is None:
                if not self.awrepl_session:
                    raise AwreplError("usage", "This kernel names no awrepl session: its kernelspec must pass --session NAME")
                self._remote = awrepl.attach(self.awrepl_session)
            return self._remote

    def _bounded(self, what: str, call: Callable[[], Any]) -> Any:
        """``call()`` in a helper thread, waited for at most EDIT_WAIT_S: its value, or None."""
        box: Dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = call()
            except BaseException as err:  # handed to the waiting thread
                box["error"] = err

        helper = threading.Thread(target=run, name="awrepl-kernel-%s" % what, daemon=True)
        helper.start()
        try:
            helper.join(EDIT_WAIT_S)
        except KeyboardInterrupt:
            return None
        if helper.is_alive():
            self.log.info("awrepl: %s got no answer within %.0f s (a cell holds the session)", what, EDIT_WAIT_S)
            return None
        error = box.get("error")
        if isinstance(error, NameNotFound):
            return None
        if error is not None:
            self.log.warning("awrepl: %s failed: %s", what, error)
            return None
        return box.get("value")

    # --- sending -------------------------------------------------------------------------------

    def _stream(self, name: str, text: str) -> None:
        if text:
            self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})

    def _display(self, entry: Dict[str, Any]) -> None:
        data, problems = entry_bundle(entry)
        if data:
            self.send_response(self.iopub_socket, "display_data", {"data": data, "metadata": {}, "transient": {}})
        for line in problems:
            self._stream("stderr", line + "\n")

    def _error(self, ename: str, evalue: str, traceback: List[str], silent: bool) -> Dict[str, Any]:
        content = {"ename": ename, "evalue": evalue, "traceback": traceback}
        if not silent:
            self.send_response(self.iopub_socket, "error", content)
        return dict(content, status="error", execution_count=self.execution_count)

    def _ok(self) -> Dict[str, Any]:
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}

    # --- requests ------------------------------------------------------------------------------

    def _raised(self, err: BaseException, silent: bool) -> Dict[str, Any]:
        """The error reply for an exception of the kernel's own (not the cell's): Ctrl-C during a wait,
        a session that cannot be reached, a bad name."""
        ename, evalue = type(err).__name__, str(err)
        return self._error(ename, evalue, ["%s: %s" % (ename, evalue) if evalue else ename], silent)

    def do_execute(self, code: str, silent: bool, store_history: bool = True, user_expressions: Any = None, allow_stdin: bool = False) -> Dict[str, Any]:
        try:
            return self._execute(code, silent)
        except Exception as err:  # a reply all the same: the frontend waits for one
            self.log.exception("awrepl: the kernel failed on a cell")
            return self._raised(err, silent)

    def _execute(self, code: str, silent: bool) -> Dict[str, Any]:
        words = magic_words(code)
        if words is not None:
            return self._magic(words, silent)
        if not code.strip():
            return self._ok()
        target = help_target(code)
        if target is not None:
            return self._help(target, silent)
        value_entries: List[Dict[str, Any]] = []

        def on_display(entry: Dict[str, Any]) -> None:
            if entry.get("source") == "value":
                value_entries.append(entry)  # sent with the value, as execute_result, once the cell ends
            else:
                self._display(entry)

        try:
            result = self._session().execute(
                code,
                self.awrepl_timeout_ms,
                on_stdout=None if silent else (lambda text: self._stream("stdout", text)),
                on_stderr=None if silent else (lambda text: self._stream("stderr", text)),
                on_display=None if silent else on_display,
            )
        except KeyboardInterrupt as stopped:
            result = getattr(stopped, "result", None)  # the cell's result, when the session answered the cancel
            if result is None:
                gave_up = "the wait for the session was given up; the cell may still run there (awrepl -s %s interrupt)" % self.awrepl_session
                return self._raised(KeyboardInterrupt(gave_up), silent)
        except (AwreplError, ValueError) as err:
            return self._raised(err, silent)
        if not silent:
            for line in result_notes(result):
                self._stream("stderr", line + "\n")
        if result.status != "ok":
            ename, evalue = split_exception(result.exception, result.status)
            return self._error(ename, evalue, traceback_lines(result.traceback, ename, evalue), silent)
        data, problems = value_bundle(result.value, value_entries)
        if not silent:
            for line in problems:
                self._stream("stderr", line + "\n")
            if data:
                self.send_response(self.iopub_socket, "execute_result", {"execution_count": self.execution_count, "data": data, "metadata": {}})
        return self._ok()

    def _magic(self, words: List[str], silent: bool) -> Dict[str, Any]:
        verb = words[0] if words else "help"
        name = self.awrepl_session
        try:
            if verb == "reset" and len(words) == 1:
                self._session().reset()
                text = "awrepl: the namespace of session %s is cleared (for every client; the worker keeps running)\n" % name
            elif verb == "session" and len(words) == 1:
                self._session()
                rows = [row for row in awrepl.sessions() if row.get("name") == name]
                row = rows[0] if rows else {}
                facts = ", ".join("%s: %s" % (key, row[key]) for key in ("state", "python", "cwd", "cells_run", "sandbox") if key in row)
                text = "awrepl session %s%s\n" % (name, " (%s)" % facts if facts else "")
            elif verb == "help" and len(words) == 1:
                text = HELP.format(name=name) + "\n"
            else:
                problem = "%s %s is not a command of this kernel; it knows: %s reset, %s session, %s help" % (MAGIC, " ".join(words), MAGIC, MAGIC, MAGIC)
                return self._error("UsageError", problem, ["UsageError: " + problem], silent)
        except (KeyboardInterrupt, AwreplError, ValueError) as err:
            return self._raised(err, silent)
        if not silent:
            self._stream("stdout", text)
        return self._ok()

    def _help(self, name: str, silent: bool) -> Dict[str, Any]:
        """``name?``: what inspection shows, as the cell's output (the session's inspect request)."""
        try:
            text = format_inspection(self._session().inspect(name))
        except NameNotFound:
            text = "Object `%s` not found." % name
        except (KeyboardInterrupt, AwreplError, ValueError) as err:
            return self._raised(err, silent)
        if not silent:
            self._stream("stdout", text + "\n")
        return self._ok()

    def do_complete(self, code: str, cursor_pos: Optional[int]) -> Dict[str, Any]:
        cursor = len(code) if cursor_pos is None else max(0, min(cursor_pos, len(code)))
        matches = self._bounded("complete", lambda: self._session().complete(code, cursor)) or []
        return {"status": "ok", "matches": matches, "cursor_start": completion_start(code, cursor), "cursor_end": cursor, "metadata": {}}

    def do_inspect(self, code: str, cursor_pos: int, detail_level: int = 0, omit_sections: Any = ()) -> Dict[str, Any]:
        name = name_at(code, cursor_pos)
        info = self._bounded("inspect", lambda: self._session().inspect(name)) if name else None
        if not info:
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": True, "data": {"text/plain": format_inspection(info)}, "metadata": {}}

    def do_is_complete(self, code: str) -> Dict[str, Any]:
        if magic_words(code) is not None or help_target(code) is not None:
            return {"status": "complete"}

        answer = self._bounded("is_complete", lambda: self._session().is_complete(code))
        status = answer.get("status") if isinstance(answer, dict) else None
        if status == "incomplete":
            return {"status": "incomplete", "indent": answer.get("indent") or ""}
        if status in ("complete", "invalid"):
            return {"status": status}
        return {"status": "unknown"}

    def do_shutdown(self, restart: bool) -> Dict[str, Any]:
        """Ends this kernel's connection only (``close`` of an attach object detaches it)."""
        remote, self._remote = self._remote, None
        if remote is not None:
            remote.close()
        return {"status": "ok", "restart": restart}


class AwreplKernelApp(IPKernelApp):
    """IPKernelApp without its capture of the process's own stdout and stderr (the ``OutStream``
    that forwards them, fds included, to IOPub): a cell's output comes from the session, and what this
    process prints (a log line) belongs in Jupyter's log, not in a cell's output. It also spares each
    execute the flush that waits for the IOPub thread twice."""

    name = "awrepl-kernel"
    outstream_class = DottedObjectName(None, allow_none=True)
