"""Faults: a supervisor killed mid-call, a fork child on its parent's connection, Ctrl-C during a
cell, no executable to be found. Each test has a state directory of its own."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

from _support import AWREPL_BIN, REPO, FreshHomeTestCase, daemon_status, wait_until
from _support import awrepl as awrepl_cli

import awrepl as pkg
from awrepl import ReplSession, attach


def kill_supervisor_during(session, home):
    """Starts a long cell on ``session`` and SIGKILLs the supervisor while it runs; returns what the call raised."""
    pid = daemon_status(home)["pid"]
    started = threading.Event()
    outcome = {}

    def run():
        try:
            outcome["result"] = session.execute("print('started', flush=True)\nimport time\ntime.sleep(60)", timeout_ms=0, on_stdout=lambda t: started.set())
        except BaseException as err:
            outcome["error"] = err

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(30), "the cell never started"
    os.kill(pid, signal.SIGKILL)
    worker.join(30)
    assert not worker.is_alive(), "the call did not return after the supervisor died"
    return outcome, pid


class SupervisorKilledTest(FreshHomeTestCase):
    def test_named_session_call_fails_clearly_then_comes_back(self):
        s = attach("phoenix")
        try:
            s.execute("x = 'saved'")
            s.snapshot()
            s.execute("x = 'unsaved'")
            outcome, pid = kill_supervisor_during(s, self.home.path)
            err = outcome.get("error")
            self.assertIsInstance(err, pkg.SupervisorUnreachable, outcome)
            self.assertIn("closed the connection", str(err))
            wait_until(lambda: not os.path.exists("/proc/%d" % pid), what="the killed supervisor's exit")
            again = s.execute("x")
            self.assertEqual(again.value, "'saved'", again)
            self.assertIsNotNone(again.restored, "the result says it was restored from the snapshot")
            self.assertNotEqual(daemon_status(self.home.path)["pid"], pid, "a new supervisor serves it")
        finally:
            s.close()

    def test_named_session_without_snapshot_says_its_state_is_gone(self):
        with attach("gone") as s:
            s.execute("x = 1")
            outcome, _ = kill_supervisor_during(s, self.home.path)
            self.assertIsInstance(outcome.get("error"), pkg.AwreplError)
            r = s.execute("'x' in dir()")
            self.assertEqual(r.value, "False")
            self.assertIn("state", (r.notice or "").lower(), r)

    def test_repl_session_survives_as_a_fresh_one(self):
        with ReplSession("own") as s:
            s.execute("x = 1")
            outcome, _ = kill_supervisor_during(s, self.home.path)
            self.assertIsInstance(outcome.get("error"), pkg.SupervisorUnreachable)
            r = s.execute("'x' in dir()")
            self.assertEqual(r.value, "False")
            self.assertTrue(r.notice, "the fresh session says the earlier state is gone")
            self.assertEqual(s.variables(), {})


class DaemonStopTest(FreshHomeTestCase):
    def test_the_next_call_after_a_stop_starts_a_supervisor(self):
        with attach("stopped") as named, ReplSession("own") as own:
            named.execute("x = 'kept by the stop'")
            own.execute("y = 1")
            first = daemon_status(self.home.path)["pid"]
            self.assertEqual(awrepl_cli(self.home.path, "daemon", "stop").returncode, 0)
            again = named.execute("x")
            self.assertEqual(again.value, "'kept by the stop'")
            self.assertIsNotNone(again.restored, "restored from the stop's snapshot, and said")
            fresh = own.execute("'y' in dir()")
            self.assertEqual(fresh.value, "False")
            self.assertTrue(fresh.notice)
            self.assertNotEqual(daemon_status(self.home.path)["pid"], first)
        awrepl_cli(self.home.path, "close", "stopped")


class ForkTest(FreshHomeTestCase):
    def test_child_using_the_parents_connection_gets_a_clear_error(self):
        s = ReplSession("forked")
        try:
            s.execute("x = 1")
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: its parent's session must refuse it, and its exit must not close it
                os.close(read)
                try:
                    s.execute("x = 2")
                    message = "no error"
                except pkg.AwreplError as err:
                    message = "%s: %s" % (err.code, err)
                except BaseException as err:  # pragma: no cover - reported to the parent
                    message = "other: %r" % err
                os.write(write, message.encode())
                os.close(write)
                try:
                    del s
                    import gc

                    gc.collect()
                finally:
                    os._exit(0)
            os.close(write)
            with os.fdopen(read, "rb") as f:
                message = f.read().decode()
            _, status = os.waitpid(pid, 0)
            self.assertEqual(status, 0)
            self.assertIn("usage:", message)
            self.assertIn("fork", message)
            self.assertIn(str(os.getpid()), message)
            self.assertEqual(s.execute("x").value, "1", "the parent's session and stream are intact")
            self.assertEqual([s.execute("%d * 2" % i).value for i in range(20)], [str(i * 2) for i in range(20)])
        finally:
            s.close()

    def test_child_exit_runs_finalizers_without_closing_the_parents_session(self):
        s = ReplSession("forked-exit")
        try:
            s.execute("x = 1")
            pid = os.fork()
            if pid == 0:  # the child exits as a normal exit would: atexit, and so the finalizers, run
                try:
                    import atexit

                    atexit._run_exitfuncs()
                finally:
                    os._exit(0)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8, 0)
            self.assertEqual(s.execute("x").value, "1")
        finally:
            s.close()


CTRL_C_CHILD = r"""
import sys, time
from awrepl import ReplSession, attach
s = ReplSession("ctrlc") if sys.argv[1] == "own" else attach("ctrlc-named")
s.execute("x = 5")
try:
    s.execute("print('started', flush=True)\nimport time\nwhile True: time.sleep(0.01)", timeout_ms=0,
              on_stdout=lambda t: print("CELL", t.strip(), flush=True))
    print("NO INTERRUPT", flush=True)
except KeyboardInterrupt as err:
    result = getattr(err, "result", None)
    print("KEYBOARDINTERRUPT", result.status if result else None, flush=True)
print("AFTER", s.execute("x * 2").value, flush=True)
s.close()
"""


class CtrlCTest(FreshHomeTestCase):
    def ctrl_c(self, flavour):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        child = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD, flavour], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            lines = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = child.stdout.readline()
                if not line:
                    break
                lines.append(line.strip())
                if line.startswith("CELL started"):
                    time.sleep(0.2)
                    child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=60)
            lines += out.split()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        text = "\n".join(lines)
        self.assertEqual(child.returncode, 0, text + err)
        self.assertIn("KEYBOARDINTERRUPT interrupted", text)
        self.assertIn("AFTER 10", text, "the session is alive, its state kept")

    def test_ctrl_c_interrupts_the_cell_of_a_repl_session(self):
        self.ctrl_c("own")

    def test_ctrl_c_interrupts_the_cell_of_an_attached_session(self):
        self.ctrl_c("named")


class ProtocolMismatchTest(FreshHomeTestCase):
    def test_an_executable_of_another_protocol_is_said_and_left_running(self):
        from awrepl import _start

        self.assertEqual(awrepl_cli(self.home.path, "-s", "cli", "run", "1").returncode, 0)
        pid = daemon_status(self.home.path)["pid"]
        saved = _start.PROTOCOL
        _start.PROTOCOL = saved + 100
        try:
            with self.assertRaises(pkg.VersionMismatch) as caught:
                ReplSession()
        finally:
            _start.PROTOCOL = saved
        self.assertIn("protocol %d" % (saved + 100), str(caught.exception))
        self.assertIn(AWREPL_BIN, str(caught.exception))
        self.assertEqual(daemon_status(self.home.path)["pid"], pid, "the executable's own supervisor is not stopped")
        with ReplSession() as s:
            self.assertEqual(s.execute("1+1").value, "2")


class ExecutableTest(unittest.TestCase):
    def test_no_executable_names_all_three_places(self):
        from awrepl import _binary

        env = {"PATH": "/nonexistent"}
        if any(os.path.isfile(p) for p in _binary.wheel_candidates()):
            self.skipTest("an awrepl executable is installed beside this Python")
        with self.assertRaises(pkg.AwreplError) as caught:
            _binary.find_executable(env)
        message = str(caught.exception)
        for part in ("wheel", "AWREPL_BIN", "PATH", _binary.wheel_candidates()[0]):
            self.assertIn(part, message)
        with self.assertRaises(pkg.AwreplError) as caught:
            _binary.find_executable({"AWREPL_BIN": "/nonexistent/awrepl"})
        self.assertIn("/nonexistent/awrepl", str(caught.exception))
        self.assertEqual(_binary.find_executable({"AWREPL_BIN": AWREPL_BIN}), AWREPL_BIN)

    def test_python_m_awrepl_passes_arguments_and_status_through(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), AWREPL_BIN=AWREPL_BIN)
        version = subprocess.run([sys.executable, "-m", "awrepl", "--version"], stdout=subprocess.PIPE, text=True, env=env, timeout=60)
        self.assertEqual(version.returncode, 0)
        with open(os.path.join(REPO, "package.json")) as f:
            self.assertEqual(version.stdout.strip(), json.load(f)["version"])
        bad = subprocess.run([sys.executable, "-m", "awrepl", "--no-such-flag"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
        self.assertEqual(bad.returncode, 2, bad.stderr)


if __name__ == "__main__":
    unittest.main()
