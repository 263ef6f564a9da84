"""The Jupyter kernel (awrepl.kernel) driven the way Jupyter drives it: its kernelspec installed with
``python -m awrepl.kernel install`` into a temporary prefix found through JUPYTER_PATH, started by
jupyter_client's KernelManager, spoken to by a BlockingKernelClient, and a notebook built with nbformat
executed against it by nbclient. The kernel is a client of a named session that the CLI and
``awrepl.attach`` (the agent) use too, so each state crosses between them. Those tests are skipped,
saying why, when this interpreter has no jupyter_client / ipykernel / nbclient / nbformat (Debian:
python3-ipykernel, python3-jupyter-client, python3-nbclient, python3-nbformat); the conversions the
kernel makes (ContentTest) need none of them and run everywhere.
"""

import base64
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from queue import Empty

from _support import REPO, HomeTestCase, awrepl

MISSING = [m for m in ("jupyter_client", "ipykernel", "nbclient", "nbformat") if importlib.util.find_spec(m) is None]
#: The longest any one message may take (the machine is shared: generous, never a measured bound).
WAIT_S = 60.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def install(prefix, *args, env=None):
    """``python -m awrepl.kernel install ...`` in a new process, the package on PYTHONPATH as in a checkout."""
    full_env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    full_env.update(env or {})
    command = [sys.executable, "-m", "awrepl.kernel", "install", *args] + (["--prefix", prefix] if prefix else [])
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=WAIT_S * 2, env=full_env, cwd=tempfile.gettempdir())


class Cell:
    """What one execute produced: the shell reply's content and the IOPub messages, in order, each
    with the monotonic time it arrived."""

    def __init__(self, reply, messages):
        self.reply = reply
        self.messages = messages

    def of(self, kind):
        return [m["content"] for _, m in self.messages if m["msg_type"] == kind]

    def stream(self, name):
        return "".join(c["text"] for c in self.of("stream") if c["name"] == name)

    def result(self):
        results = self.of("execute_result")
        return results[0]["data"] if results else None


def run(kc, code, timeout=WAIT_S):
    """Executes ``code`` and waits for the kernel's idle status and its reply."""
    deadline = time.monotonic() + timeout
    msg_id = kc.execute(code, stop_on_error=False)
    messages = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("cell %r did not go idle within %s s; got %s" % (code[:60], timeout, [m["msg_type"] for _, m in messages]))
        try:
            msg = kc.get_iopub_msg(timeout=remaining)
        except Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append((time.monotonic(), msg))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    return Cell(shell_reply(kc, msg_id, deadline), messages)


def shell_reply(kc, msg_id, deadline):
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("no shell reply to %s in time" % msg_id)
        try:
            reply = kc.get_shell_msg(timeout=remaining)
        except Empty:
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]


def ask(kc, send, timeout=WAIT_S):
    """A shell request (complete, inspect, is_complete) and its reply's content."""
    msg_id = send()
    return shell_reply(kc, msg_id, time.monotonic() + timeout)


@unittest.skipIf(MISSING, "%s cannot import %s: the kernel tests need Jupyter's packages" % (sys.executable, ", ".join(MISSING)))
class KernelTest(HomeTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="awrepl-kernel-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        cls.work = os.path.join(cls.tmp, "work")
        os.makedirs(cls.work)
        os.environ["JUPYTER_PATH"] = os.path.join(cls.prefix, "share", "jupyter")
        os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(cls.tmp, "runtime")
        os.environ["JUPYTER_DATA_DIR"] = os.path.join(cls.tmp, "data")
        os.environ["JUPYTER_CONFIG_DIR"] = os.path.join(cls.tmp, "config")
        os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # debugpy's warning, in this process's imports
        cls.session = "kernel-t%d" % os.getpid()
        cls.kernel_name = "awrepl-%s" % cls.session
        installed = install(cls.prefix, "--session", cls.session)
        assert installed.returncode == 0, installed.stderr
        cls.installed = installed
        cls.log_path = os.path.join(cls.tmp, "kernel.log")
        cls.km, cls.kc = cls.start_kernel()

    @classmethod
    def start_kernel(cls):
        from jupyter_client.manager import KernelManager

        km = KernelManager(kernel_name=cls.kernel_name)
        # Kept open for the class: a restart starts the kernel again with these same files.
        cls.log = open(cls.log_path, "ab")
        km.start_kernel(cwd=cls.work, stdout=cls.log, stderr=cls.log)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=WAIT_S)
        return km, kc

    @classmethod
    def stop_kernel(cls, km, kc):
        kc.stop_channels()
        km.shutdown_kernel(now=False)
        km.cleanup_resources()

    @classmethod
    def tearDownClass(cls):
        try:
            cls.stop_kernel(cls.km, cls.kc)
        finally:
            cls.log.close()
            super().tearDownClass()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def ok(self, code):
        cell = run(self.kc, code)
        self.assertEqual(cell.reply["status"], "ok", (code, cell.reply, self.kernel_log()))
        return cell

    def kernel_log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def wait_until_busy(self):
        """Until the session runs a cell (``awrepl sessions`` says busy)."""
        import awrepl

        deadline = time.monotonic() + WAIT_S
        while not any(row.get("state") == "busy" for row in awrepl.sessions() if row["name"] == self.session):
            self.assertLess(time.monotonic(), deadline, "the cell never started")
            time.sleep(0.05)

    def agent(self):
        import awrepl

        return awrepl.attach(self.session)

    # --- the kernelspec ---------------------------------------------------------------------------

    def test_kernelspec_names_the_session(self):
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec(self.kernel_name)
        self.assertEqual(spec.display_name, "awrepl: %s" % self.session)
        self.assertEqual(spec.interrupt_mode, "message")
        self.assertEqual(spec.language, "python")
        self.assertEqual(spec.argv[spec.argv.index("--session") + 1], self.session)
        self.assertIn("{connection_file}", spec.argv)
        self.assertEqual(spec.env.get("AWREPL_HOME"), self.home.path)
        self.assertIn(self.kernel_name, self.installed.stdout)

    def test_install_refuses_bad_input(self):
        bad_name = install(self.prefix, "--session", "no/such name")
        self.assertEqual(bad_name.returncode, 2)
        self.assertIn("'no/such name'", bad_name.stderr)
        no_python = install(self.prefix, "--session", "fine", "--python", os.path.join(self.tmp, "no-python"))
        self.assertEqual(no_python.returncode, 1)
        self.assertIn("no-python", no_python.stderr)
        no_session = install(self.prefix, env={"AWREPL_SESSION": ""})
        self.assertEqual(no_session.returncode, 2)
        self.assertIn("--session", no_session.stderr)
        from jupyter_client.kernelspec import KernelSpecManager

        self.assertNotIn("awrepl-fine", KernelSpecManager().find_kernel_specs())

    def test_installed_by_pip_the_kernelspec_runs_the_module(self):
        """Installed into a virtual environment by pip, the package is found on that Python's own path:
        the kernelspec runs ``python -m awrepl.kernel`` (from a checkout it names the directory instead)."""
        # A copy, so that pip's build leaves nothing in the checkout; setup.py reads the version beside it.
        source = os.path.join(self.tmp, "checkout", "python")
        shutil.copytree(os.path.join(REPO, "python"), source, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
        for name in ("package.json", "README.md"):
            shutil.copy(os.path.join(REPO, name), os.path.join(self.tmp, "checkout", name))
        venv = os.path.join(self.tmp, "venv")
        made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], capture_output=True, text=True, timeout=WAIT_S * 2)
        if made.returncode != 0:
            self.skipTest("%s -m venv failed: %s" % (sys.executable, made.stderr.strip()[-300:]))
        python = os.path.join(venv, "bin", "python")
        pip = [python, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "-q", source]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
        installed = subprocess.run(pip, capture_output=True, text=True, timeout=WAIT_S * 3, env=env, cwd=self.tmp)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        kernel = subprocess.run([python, "-m", "awrepl.kernel", "install", "--session", "from-venv", "--prefix", self.prefix], capture_output=True, text=True, timeout=WAIT_S * 2, env=env, cwd=self.tmp)
        self.assertEqual(kernel.returncode, 0, kernel.stderr)
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec("awrepl-from-venv")
        self.assertEqual(spec.argv[0], python)
        self.assertEqual(spec.argv[spec.argv.index("-m") + 1], "awrepl.kernel")
        checkout = KernelSpecManager().get_kernel_spec(self.kernel_name)
        self.assertEqual(checkout.argv[checkout.argv.index("-c") + 1].count(os.path.join(REPO, "python")), 1)

    # --- one namespace ----------------------------------------------------------------------------

    def test_a_variable_set_by_the_cli_is_read_in_the_kernel(self):
        set_by_cli = awrepl(self.home.path, "-s", self.session, "run", "from_cli = 41")
        self.assertEqual(set_by_cli.returncode, 0, set_by_cli.stderr)
        cell = self.ok("from_cli + 1")
        self.assertEqual(cell.result(), {"text/plain": "42"})

    def test_a_variable_set_in_the_kernel_is_read_by_the_agent(self):
        self.ok("from_notebook = 'set in the notebook'")
        with self.agent() as agent:
            self.assertEqual(agent.execute("from_notebook").value, "'set in the notebook'")
            agent.execute("from_agent = [1, 2, 3]")
        self.assertEqual(self.ok("sum(from_agent)").result(), {"text/plain": "6"})

    def test_the_history_says_the_kernel_ran_the_cell(self):
        """The kernel's hello says ``client: "kernel"`` (an attach() in any other process says "python")."""
        self.ok("ran_by = 'the notebook'")
        listed = awrepl(self.home.path, "-s", self.session, "history", "--json")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        cells = [c for c in json.loads(listed.stdout)["cells"] if c["code"] == "ran_by = 'the notebook'"]
        self.assertEqual([c["client"] for c in cells], ["kernel"])

    def test_execution_count_counts_the_kernels_cells(self):
        first = self.ok("1")
        second = self.ok("2")
        self.assertEqual(second.reply["execution_count"], first.reply["execution_count"] + 1)
        self.assertEqual(second.of("execute_result")[0]["execution_count"], second.reply["execution_count"])
        self.assertEqual(second.of("execute_input")[0]["execution_count"], second.reply["execution_count"])

    # --- output -----------------------------------------------------------------------------------

    def test_output_is_streamed_as_it_arrives(self):
        cell = self.ok("import sys, time\nprint('first', flush=True)\nprint('to stderr', file=sys.stderr, flush=True)\ntime.sleep(2)\nprint('second')")
        self.assertEqual(cell.stream("stdout"), "first\nsecond\n")
        self.assertEqual(cell.stream("stderr"), "to stderr\n")
        arrivals = [(at, m["content"]["text"]) for at, m in cell.messages if m["msg_type"] == "stream"]
        idle_at = cell.messages[-1][0]
        first_at = next(at for at, text in arrivals if text.startswith("first"))
        # 'first' came while the cell still slept, not with its end (a loose bound: the sleep is 2 s).
        self.assertGreater(idle_at - first_at, 1.0, arrivals)
        self.assertIsNone(cell.result())

    def test_rich_display_and_value(self):
        code = (
            "class Shown:\n"
            "    def _repr_html_(self):\n"
            "        return '<b>shown</b>'\n"
            "    def __repr__(self):\n"
            "        return 'Shown()'\n"
            "display(Shown())\n"
            "Shown()"
        )
        cell = self.ok(code)
        displayed = cell.of("display_data")
        self.assertEqual(len(displayed), 1, cell.messages)
        self.assertEqual(displayed[0]["data"]["text/html"], "<b>shown</b>")
        self.assertEqual(cell.result(), {"text/html": "<b>shown</b>", "text/plain": "Shown()"})

    @unittest.skipIf(importlib.util.find_spec("matplotlib") is None, "matplotlib is not importable here (the session's worker runs this interpreter)")
    def test_a_matplotlib_figure_arrives_as_png(self):
        cell = self.ok("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nfig = plt.figure()\nplt.plot([2, 1])\nfig")
        displayed = cell.of("display_data")
        self.assertEqual(len(displayed), 1, [m["msg_type"] for _, m in cell.messages])
        for data in (displayed[0]["data"], cell.result()):
            self.assertTrue(base64.b64decode(data["image/png"]).startswith(PNG_SIGNATURE))

    def test_an_exception_is_an_error_message(self):
        cell = run(self.kc, "def failing():\n    return 1 / 0\nfailing()")
        self.assertEqual(cell.reply["status"], "error")
        self.assertEqual(cell.reply["ename"], "ZeroDivisionError")
        self.assertEqual(cell.reply["evalue"], "division by zero")
        error = cell.of("error")[0]
        self.assertEqual(error["ename"], "ZeroDivisionError")
        self.assertIsInstance(error["traceback"], list)
        self.assertTrue(any("failing" in line for line in error["traceback"]), error["traceback"])
        self.assertTrue(error["traceback"][-1].startswith("ZeroDivisionError") or any("ZeroDivisionError" in line for line in error["traceback"]))

    # --- interrupt --------------------------------------------------------------------------------

    def test_interrupt_stops_a_sleep_and_keeps_the_state(self):
        self.ok("kept_through_interrupt = 'still here'")
        msg_id = self.kc.execute("import time\ntime.sleep(120)", stop_on_error=False)
        with self.agent() as agent:
            self.wait_until_busy()
            self.km.interrupt_kernel()
            reply = shell_reply(self.kc, msg_id, time.monotonic() + WAIT_S)  # long before the 120 s sleep ends
            self.assertEqual(reply["status"], "error", reply)
            self.assertEqual(reply["ename"], "KeyboardInterrupt", reply)
            self.assertEqual(agent.execute("kept_through_interrupt").value, "'still here'")
        self.assertEqual(self.ok("kept_through_interrupt").result(), {"text/plain": "'still here'"})

    def test_interrupt_withdraws_a_cell_queued_behind_the_agents(self):
        with self.agent() as agent:
            agents = agent.execute_detached("import time\ntime.sleep(3)\n'agent finished'")
            self.wait_until_busy()
            msg_id = self.kc.execute("queued_cell_ran = True", stop_on_error=False)
            time.sleep(0.3)  # the kernel's call waits in the session's queue
            self.km.interrupt_kernel()
            reply = shell_reply(self.kc, msg_id, time.monotonic() + WAIT_S)
            self.assertEqual((reply["status"], reply["ename"]), ("error", "KeyboardInterrupt"), reply)
            self.assertIn("never ran", reply["evalue"])
            self.assertEqual(agents.result().value, "'agent finished'")  # the agent's cell was not touched
            self.assertEqual(agent.execute("'queued_cell_ran' in dir()").value, "False")

    def test_interrupt_by_signal(self):
        """A kernelspec with interrupt_mode "signal": Jupyter sends SIGINT itself, to the same effect."""
        from jupyter_client.manager import KernelManager

        name = "awrepl-signal-t%d" % os.getpid()
        installed = install(self.prefix, "--session", self.session, "--name", name, "--interrupt-mode", "signal")
        self.assertEqual(installed.returncode, 0, installed.stderr)
        km = KernelManager(kernel_name=name)
        self.assertEqual(km.kernel_spec.interrupt_mode, "signal")
        km.start_kernel(cwd=self.work, stdout=self.log, stderr=self.log)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=WAIT_S)
            msg_id = kc.execute("import time\ntime.sleep(120)", stop_on_error=False)
            self.wait_until_busy()
            km.interrupt_kernel()
            reply = shell_reply(kc, msg_id, time.monotonic() + WAIT_S)
            self.assertEqual((reply["status"], reply["ename"]), ("error", "KeyboardInterrupt"), reply)
            self.assertEqual(run(kc, "6 * 7").result(), {"text/plain": "42"})
        finally:
            self.stop_kernel(km, kc)

    # --- editing help -----------------------------------------------------------------------------

    def test_complete(self):
        self.ok("import os\ncompletion_target = 1")
        names = ask(self.kc, lambda: self.kc.complete("x = completion_ta", 17))
        self.assertEqual(names["status"], "ok")
        self.assertIn("completion_target", names["matches"])
        self.assertEqual((names["cursor_start"], names["cursor_end"]), (4, 17))
        attributes = ask(self.kc, lambda: self.kc.complete("os.pa"))
        self.assertIn("os.path", attributes["matches"])
        self.assertEqual((attributes["cursor_start"], attributes["cursor_end"]), (0, 5))

    def test_inspect(self):
        self.ok("def inspected(a, b=2):\n    'Adds b to a.'\n    return a + b")
        found = ask(self.kc, lambda: self.kc.inspect("inspected(1, ", 13))
        self.assertTrue(found["found"], found)
        text = found["data"]["text/plain"]
        self.assertIn("Adds b to a.", text)
        self.assertIn("(a, b=2)", text)
        missing = ask(self.kc, lambda: self.kc.inspect("not_defined_anywhere", 5))
        self.assertFalse(missing["found"])

    def test_help_cell(self):
        self.ok("def helped():\n    'Helps.'")
        self.assertIn("Helps.", self.ok("helped?").stream("stdout"))
        self.assertIn("not found", self.ok("?never_defined_name").stream("stdout"))
        self.assertEqual(ask(self.kc, lambda: self.kc.is_complete("helped?"))["status"], "complete")

    def test_is_complete(self):
        self.assertEqual(ask(self.kc, lambda: self.kc.is_complete("for i in range(3):")), {"status": "incomplete", "indent": "    "})
        self.assertEqual(ask(self.kc, lambda: self.kc.is_complete("x = 1"))["status"], "complete")
        self.assertEqual(ask(self.kc, lambda: self.kc.is_complete("x = )"))["status"], "invalid")

    # --- the session outlives the kernel ----------------------------------------------------------

    def test_restart_keeps_the_session(self):
        self.ok("survives_restart = 'yes'")
        km, kc = type(self).km, type(self).kc
        kc.stop_channels()
        km.restart_kernel(now=False)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=WAIT_S)
        type(self).kc = self.kc = kc
        cell = self.ok("survives_restart")
        self.assertEqual(cell.result(), {"text/plain": "'yes'"})
        self.assertEqual(cell.reply["execution_count"], 1)  # the kernel's count starts again; the session does not

    def test_a_supervisor_restart_is_survived(self):
        self.ok("across_supervisors = 'kept'")
        stopped = awrepl(self.home.path, "daemon", "stop")
        self.assertEqual(stopped.returncode, 0, stopped.stderr)
        cell = self.ok("across_supervisors")  # a new supervisor, the session back from its snapshot
        self.assertEqual(cell.result(), {"text/plain": "'kept'"})
        note = cell.stream("stderr")  # awrepl's note that the session came back
        self.assertTrue(note.startswith("awrepl: ") and "snapshot" in note, note)

    def test_awrepl_reset_magic_clears_the_namespace(self):
        with self.agent() as agent:
            agent.execute("reset_victim = 1")
            cell = self.ok("%awrepl reset")
            self.assertIn("cleared", cell.stream("stdout"))
            self.assertEqual(agent.execute("'reset_victim' in dir()").value, "False")
        unknown = run(self.kc, "%awrepl frobnicate")
        self.assertEqual(unknown.reply["status"], "error")
        self.assertIn("frobnicate", unknown.reply["evalue"])
        self.assertIn(self.session, self.ok("%awrepl session").stream("stdout"))

    # --- a notebook -------------------------------------------------------------------------------

    def test_a_notebook_runs_with_nbclient(self):
        import nbformat
        from nbclient import NotebookClient

        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": self.kernel_name, "display_name": "awrepl: %s" % self.session, "language": "python"}
        nb.cells = [
            nbformat.v4.new_markdown_cell("# A notebook in the agent's session"),
            nbformat.v4.new_code_cell("in_notebook = 6 * 7"),
            nbformat.v4.new_code_cell("print(in_notebook)"),
            nbformat.v4.new_code_cell("in_notebook"),
            nbformat.v4.new_code_cell("class Html:\n    def _repr_html_(self):\n        return '<i>html</i>'\ndisplay(Html())"),
        ]
        nbformat.validate(nb)
        NotebookClient(nb, timeout=int(WAIT_S), kernel_name=self.kernel_name, resources={"metadata": {"path": self.work}}).execute()
        nbformat.validate(nb)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        self.assertEqual([cell.execution_count for cell in code], [1, 2, 3, 4])
        self.assertEqual(code[1].outputs[0]["output_type"], "stream")
        self.assertEqual(code[1].outputs[0]["text"], "42\n")
        self.assertEqual(code[2].outputs[0]["output_type"], "execute_result")
        self.assertEqual(code[2].outputs[0]["data"]["text/plain"], "42")
        self.assertEqual(code[3].outputs[0]["output_type"], "display_data")
        self.assertEqual(code[3].outputs[0]["data"]["text/html"], "<i>html</i>")
        path = os.path.join(self.work, "executed.ipynb")
        nbformat.write(nb, path)
        nbformat.validate(nbformat.read(path, as_version=4))
        with self.agent() as agent:  # nbclient's kernel was one more client of the same session
            self.assertEqual(agent.execute("in_notebook").value, "42")


class ContentTest(unittest.TestCase):
    """The kernel's conversions, which need no Jupyter (run on every supported Python)."""

    def test_exceptions_split_into_ename_and_evalue(self):
        from awrepl.kernel._content import split_exception, traceback_lines

        self.assertEqual(split_exception("ZeroDivisionError: division by zero", "error"), ("ZeroDivisionError", "division by zero"))
        self.assertEqual(split_exception("KeyboardInterrupt", "interrupted"), ("KeyboardInterrupt", ""))
        self.assertEqual(split_exception(None, "timeout"), ("TimeoutError", ""))
        self.assertEqual(split_exception("the worker died: signal 9", "died"), ("Error", "the worker died: signal 9"))
        self.assertEqual(traceback_lines("", "E", "v"), ["E: v"])
        self.assertEqual(traceback_lines("Traceback:\n  x\nE: v\n", "E", "v"), ["Traceback:", "  x", "E: v"])

    def test_display_entries_become_mime_bundles(self):
        from awrepl.kernel._content import entry_bundle, value_bundle

        folder = tempfile.mkdtemp(prefix="awrepl-kernel-content-")
        self.addCleanup(shutil.rmtree, folder, True)
        png, svg = os.path.join(folder, "a.png"), os.path.join(folder, "a.svg")
        with open(png, "wb") as f:
            f.write(PNG_SIGNATURE + b"rest")
        with open(svg, "w") as f:
            f.write("<svg/>")
        gone = os.path.join(folder, "gone.png")
        entry = {"image/png": png, "image/svg+xml": svg, "application/json": '{"a": [1]}', "text/plain": "P", "metadata": {"image/png": {"bytes": 12}, "image/svg+xml": {"bytes": 6}}}
        data, problems = entry_bundle(entry)
        self.assertEqual(base64.b64decode(data["image/png"]), PNG_SIGNATURE + b"rest")
        self.assertEqual(data["image/svg+xml"], "<svg/>")
        self.assertEqual(data["application/json"], {"a": [1]})
        self.assertEqual(data["text/plain"], "P")
        self.assertNotIn("metadata", data)
        self.assertEqual(problems, [])
        data, problems = entry_bundle({"image/png": gone, "metadata": {"image/png": {"bytes": 1}}, "error": "_repr_html_ raised ValueError"})
        self.assertEqual(data, {})
        self.assertTrue(any(gone in p for p in problems) and any("ValueError" in p for p in problems), problems)
        self.assertEqual(value_bundle("42", []), ({"text/plain": "42"}, []))
        self.assertEqual(value_bundle(None, [{"text/html": "<b>", "source": "value"}]), ({"text/html": "<b>"}, []))
        self.assertEqual(value_bundle(None, []), ({}, []))

    def test_the_name_at_the_cursor(self):
        from awrepl.kernel._editing import completion_start, help_target, magic_words, name_at

        self.assertEqual(name_at("x = os.pa", 9), "os.pa")
        self.assertEqual(name_at("value + 1", 2), "value")
        self.assertEqual(name_at("f.g(1, [2, 3], ", 15), "f.g")
        self.assertIsNone(name_at("(1 + ", 5))
        self.assertIsNone(name_at("", 0))
        self.assertEqual(completion_start("d['ke", 5), 3)
        self.assertEqual(completion_start("x = os.pa", 9), 4)
        self.assertEqual(completion_start("print(na", 8), 6)
        self.assertEqual(completion_start("1 + ", 4), 4)
        self.assertEqual(magic_words("\n%awrepl reset\n"), ["reset"])
        self.assertIsNone(magic_words("%awrepl reset\nx = 1"))
        self.assertIsNone(magic_words("%awreplx"))
        self.assertEqual((help_target("len?"), help_target("?os.path"), help_target("a ? b")), ("len", "os.path", None))


if __name__ == "__main__":
    unittest.main()
