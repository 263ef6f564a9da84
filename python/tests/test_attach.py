"""attach(): named sessions the supervisor holds, shared with the CLI; detached cells; sessions()."""

import json
import os
import tempfile
import threading
import unittest

from _support import HomeTestCase, awrepl, run_python

import awrepl as pkg
from awrepl import attach, sessions


class AttachTest(HomeTestCase):
    def test_shared_with_the_cli(self):
        with attach("shared") as s:
            s.execute("x = 41")
            run = awrepl(self.home.path, "-s", "shared", "run", "x + 1")
            self.assertEqual(run.stdout, "42\n", run.stderr)
            awrepl(self.home.path, "-s", "shared", "run", "y = 'from the shell'")
            self.assertEqual(s.execute("y").value, "'from the shell'")
            self.assertRegex(s.variables()["x"], r"^int\b.*: 41$")
            self.assertEqual(s.inspect("y")["type"], "str")
        # close() only detaches: the session lives on.
        self.assertEqual(awrepl(self.home.path, "-s", "shared", "run", "x").stdout, "41\n")
        names = [row["name"] for row in sessions()]
        self.assertIn("shared", names)
        with self.assertRaises(pkg.SessionClosed) as caught:
            s.execute("x")
        self.assertIn("attach('shared')", str(caught.exception))

    def test_the_history_says_python_ran_the_cell(self):
        """hello's ``client`` is "python": the session's history names who ran each cell."""
        with attach("who-ran") as s:
            s.execute("a = 1")
        awrepl(self.home.path, "-s", "who-ran", "run", "b = 2")
        listed = awrepl(self.home.path, "-s", "who-ran", "history", "--json")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        cells = json.loads(listed.stdout)["cells"]
        self.assertEqual([(c["code"], c["client"]) for c in cells], [("a = 1", "python"), ("b = 2", "cli")])

    def test_complete_and_is_complete(self):
        with attach("editing") as s:
            s.execute("import json")
            self.assertIn("json.dumps", s.complete("json.du"))
            self.assertEqual(s.is_complete("x = 1")["status"], "complete")
            self.assertEqual(s.is_complete("for i in range(3):")["status"], "incomplete")
            self.assertEqual(s.is_complete("1 +* 2")["status"], "invalid")
            with self.assertRaises(TypeError):
                s.is_complete(b"x = 1")
        awrepl(self.home.path, "close", "editing")

    def test_spec_from_the_caller(self):
        with tempfile.TemporaryDirectory() as cwd:
            with attach("specified", cwd=cwd, env={"AWREPL_TEST_VAR": "no", "PY_CLIENT_VAR": "yes"}) as s:
                r = s.execute("import os\n(os.getcwd(), os.environ.get('PY_CLIENT_VAR'), 'AWREPL_BIN' in os.environ)")
                self.assertEqual(r.value, repr((os.path.realpath(cwd), "yes", False)))
            awrepl(self.home.path, "close", "specified")

    def test_snapshot_restore_and_notice(self):
        with attach("snap") as s:
            s.execute("kept = {'a': 1}")
            report = s.snapshot()
            self.assertIn("kept", report["saved"])
            s.execute("kept = None")
            restored = s.restore()
            self.assertIn("kept", restored["restored"])
            self.assertEqual(s.execute("kept").value, "{'a': 1}")
            # Closed with its snapshot kept, the next call re-creates it restored, and says so.
            self.assertEqual(awrepl(self.home.path, "close", "--keep", "snap").returncode, 0)
            again = s.execute("kept['a']")
            self.assertEqual(again.value, "1")
            self.assertIsNotNone(again.restored)
            # Closed and forgotten: the next call says the earlier state is gone.
            awrepl(self.home.path, "close", "snap")
            lost = s.execute("'kept' in dir()")
            self.assertEqual(lost.value, "False")
            self.assertIn("state", (lost.notice or "").lower())
        awrepl(self.home.path, "close", "snap")

    def test_existing_only(self):
        with attach("never-made", existing=True) as s:
            with self.assertRaises(pkg.SessionNotFound):
                s.variables()

    def test_detached_cell_wait_and_collect_elsewhere(self):
        with attach("long") as s:
            cell = s.execute_detached("import time\ntime.sleep(0.5)\n'done'")
            self.assertTrue(cell.keep_result())
            self.assertEqual(cell.result().value, "'done'")
            self.assertFalse(cell.keep_result(), "finished: nothing more to keep")
            kept = s.collect()
            self.assertEqual((kept.state, kept.result.value if kept.result else None), ("done", "'done'"))
            self.assertEqual(s.collect().state, "idle")
            self.assertIsNone(s.wait(1000))
        # Sent by a process that exits at once; waited for by this one.
        code = "from awrepl import attach\ns = attach('long')\ns.execute_detached('import time\\ntime.sleep(1)\\n6*7')\nimport time; time.sleep(0.3)"
        run = run_python(code)
        self.assertEqual(run.returncode, 0, run.stderr)
        with attach("long") as s:
            self.assertEqual(s.wait(30000).value, "42")
            slow = s.execute_detached("import time\ntime.sleep(5)")
            with self.assertRaises(TimeoutError):
                s.wait(200)
            s.interrupt()
            self.assertEqual(slow.result().status, "interrupted")
        awrepl(self.home.path, "close", "long")

    def test_idempotency_key(self):
        with attach("once") as s:
            s.execute("orders = []")
            first = s.execute("orders.append(1)\nlen(orders)", idempotency_key="append-1")
            again = s.execute("orders.append(1)\nlen(orders)", idempotency_key="append-1")
            self.assertEqual((first.value, first.replayed), ("1", None))
            self.assertEqual((again.value, again.replayed), ("1", True))
            self.assertEqual(s.execute("len(orders)").value, "1", "the repeat ran nothing")
            with self.assertRaises(pkg.UsageError) as caught:
                s.execute("other code", idempotency_key="append-1")
            self.assertIn("append-1", str(caught.exception))
            cell = s.execute_detached("import time\ntime.sleep(0.3)\n'keyed'", idempotency_key="slow-1")
            found = s.collect(30000, key="slow-1")
            self.assertEqual((found.state, found.result.value if found.result else None), ("done", "'keyed'"))
            self.assertEqual(cell.result().value, "'keyed'")
            with self.assertRaises(TypeError):
                s.execute("1", idempotency_key=7)  # type: ignore[arg-type]
        awrepl(self.home.path, "close", "once")

    def test_a_request_too_large_is_refused_clearly_and_loses_nothing(self):
        with attach("big") as s:
            s.execute("x = 1")
            with self.assertRaises(pkg.AwreplError) as caught:
                s.execute("y = '%s'" % ("z" * (65 * 2**20)))
            self.assertIn("too large", str(caught.exception).lower())
            self.assertEqual(s.execute("x").value, "1", "the next call reconnects; the session is intact")
        awrepl(self.home.path, "close", "big")

    def test_interrupt(self):
        with attach("spin") as s:
            threading.Timer(0.5, s.interrupt).start()
            self.assertEqual(s.execute("while True: pass", timeout_ms=0).status, "interrupted")
            self.assertFalse(s.interrupt(), "nothing runs")
        awrepl(self.home.path, "close", "spin")

    def test_bad_names(self):
        for name in ("", "a b", "../x", "x" * 65, 7):
            with self.assertRaises(ValueError) as caught:
                attach(name)  # type: ignore[arg-type]
            self.assertIn("1-64 letters", str(caught.exception))
            self.assertIsInstance(caught.exception, pkg.AwreplError)

    def test_sessions_without_a_supervisor(self):
        awrepl(self.home.path, "daemon", "stop")
        self.assertEqual(sessions(), [])
        self.assertIsNone(json.loads(awrepl(self.home.path, "daemon", "status", "--json").stdout), "sessions() starts nothing")


if __name__ == "__main__":
    unittest.main()
