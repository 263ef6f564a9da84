"""ReplSession, ExecResult and SessionPool against the real supervisor and workers."""

import gc
import json
import os
import threading
import time
import unittest

from _support import HomeTestCase, awrepl, run_python, wait_until

import awrepl as pkg
from awrepl import ExecResult, ReplSession, SessionPool


def names_running(home):
    return {row["name"] for row in json.loads(awrepl(home, "sessions", "--json").stdout or "[]")}


class ReplSessionTest(HomeTestCase):
    def test_state_persists_and_result_fields(self):
        with ReplSession("agent-1") as s:
            self.assertIsNone(s.execute("items = [1, 2, 3]").value)
            r = s.execute("print(len(items))")
            self.assertIsInstance(r, ExecResult)
            self.assertEqual(r.stdout, "3\n")
            self.assertEqual(r.status, "ok")
            self.assertEqual(r.session, s.name)
            self.assertEqual(s.session_id, "agent-1")
            self.assertTrue(s.name.startswith("agent-1."))
            self.assertEqual(s.execute("sum(items)").value, "6")
            err = s.execute("1/0")
            self.assertEqual(err.status, "error")
            self.assertIn("ZeroDivisionError", err.exception)
            self.assertIn("Traceback", err.traceback)
            self.assertEqual(s.execute("items").value, "[1, 2, 3]", "an exception does not kill the session")
            syntax = s.execute("def (")
            self.assertIn("SyntaxError", syntax.exception)
            self.assertEqual(s.execute("len(items)").value, "3")

    def test_fields_are_the_cli_json_fields(self):
        cli = json.loads(awrepl(self.home.path, "run", "--json", "print('a')\n6*7").stdout)
        with ReplSession() as s:
            mine = s.execute("print('a')\n6*7").to_dict()
        self.assertEqual(list(mine)[:8], ["stdout", "stderr", "value", "exception", "traceback", "duration_ms", "truncated", "truncated_bytes"])
        self.assertEqual(set(mine), set(cli))
        for key in ("stdout", "stderr", "value", "exception", "traceback", "truncated", "truncated_bytes", "status", "display"):
            self.assertEqual(mine[key], cli[key], key)

    def test_truncation_and_timeout(self):
        with ReplSession("limits", timeout_ms=30000, max_output_bytes=1000) as s:
            r = s.execute("print('x' * 5000)")
            self.assertTrue(r.truncated)
            self.assertGreater(r.truncated_bytes, 3000)
            slow = s.execute("import time\ntime.sleep(30)", timeout_ms=300)
            self.assertEqual(slow.status, "timeout")
            self.assertEqual(s.execute("2+2").value, "4", "the session survives its timeout")

    def test_variables_inspect_reset(self):
        with ReplSession() as s:
            s.execute("x = [1, 2, 3]\nname = 'Alice'")
            found = s.variables()
            self.assertEqual(sorted(found), ["name", "x"])
            self.assertRegex(found["x"], r"^list\b.*: \[1, 2, 3\]$")
            self.assertRegex(found["name"], r"^str\b.*: 'Alice'$")
            info = s.inspect("x")
            self.assertEqual((info["type"], info["repr"], info["len"]), ("list", "[1, 2, 3]", 3))
            self.assertIn("append", info["dir"])
            with self.assertRaises(KeyError) as caught:
                s.inspect("nope")
            self.assertIsInstance(caught.exception, pkg.AwreplError)
            self.assertEqual(caught.exception.code, "name_not_found")
            s.reset()
            self.assertEqual(s.variables(), {})

    def test_one_label_two_namespaces(self):
        with ReplSession("same") as a, ReplSession("same") as b:
            a.execute("only_a = 1")
            self.assertNotEqual(a.name, b.name)
            self.assertIn("NameError", b.execute("only_a").exception)
            self.assertEqual(a.execute("only_a").value, "1")

    def test_close_ends_the_worker_and_says_so_by_name(self):
        s = ReplSession("closing")
        s.execute("x = 1")
        self.assertIn(s.name, names_running(self.home.path))
        s.close()
        s.close()  # idempotent
        self.assertNotIn(s.name, names_running(self.home.path))
        for call in (lambda: s.execute("x"), s.variables, lambda: s.inspect("x"), s.reset):
            with self.assertRaises(pkg.SessionClosed) as caught:
                call()
            self.assertIn("'closing'", str(caught.exception))
            self.assertIn(s.name, str(caught.exception))
            self.assertEqual(caught.exception.code, "session_closed")

    def test_collected_object_ends_its_session(self):
        s = ReplSession("collected")
        name = s.name
        s.execute("x = 1")
        del s
        gc.collect()
        wait_until(lambda: name not in names_running(self.home.path), what="the collected session's end")

    def test_process_exit_and_kill_end_the_session(self):
        for ending in ("pass", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"):
            code = "from awrepl import ReplSession\ns = ReplSession('exiting')\ns.execute('x = 1')\nprint(s.name, flush=True)\n" + ending
            run = run_python(code)
            name = run.stdout.strip()
            self.assertTrue(name.startswith("exiting."), run.stderr)
            wait_until(lambda: name not in names_running(self.home.path), what="the end of %s after %r" % (name, ending))

    def test_owned_session_is_not_reachable_from_elsewhere(self):
        with ReplSession("private") as s:
            s.execute("secret = 1")
            run = awrepl(self.home.path, "-s", s.name, "run", "secret")
            self.assertNotEqual(run.returncode, 0)
            self.assertIn("no session named", run.stderr.lower())
            rows = json.loads(awrepl(self.home.path, "sessions", "--json").stdout)
            self.assertTrue([r for r in rows if r["name"] == s.name][0].get("owned"))

    def test_streaming_callbacks_arrive_before_the_result(self):
        seen = []
        with ReplSession() as s:
            code = "import sys, time\nprint('one', flush=True)\ntime.sleep(1.5)\nprint('err', file=sys.stderr, flush=True)\nprint('two')"
            r = s.execute(code, on_stdout=lambda t: seen.append(("out", t, time.monotonic())), on_stderr=lambda t: seen.append(("err", t, time.monotonic())))
            done = time.monotonic()
            self.assertEqual("".join(t for k, t, _ in seen if k == "out"), "one\ntwo\n")
            self.assertEqual("".join(t for k, t, _ in seen if k == "err"), "err\n")
            self.assertLess(seen[0][2], done - 0.5, "the first line came while the cell still ran")
            self.assertEqual(r.stdout, "one\ntwo\n")
            items = []
            s.execute("class M:\n    def _repr_markdown_(self): return '# hi'\ndisplay(M())", on_display=items.append)
            self.assertEqual(items[0].get("text/markdown"), "# hi")

    def test_host_bridge(self):
        asked = []

        def handler(data):
            asked.append(data)
            if data.get("fail"):
                raise RuntimeError("no such tool")
            return {"answer": data["n"] * 2}

        with ReplSession() as s:
            r = s.execute("import awrepl\n(await awrepl.host_request({'n': 21}))['answer']", on_host_request=handler)
            self.assertEqual(r.value, "42", r)
            self.assertEqual(asked, [{"n": 21}])
            failed = s.execute("import awrepl\nawait awrepl.host_request({'fail': True})", on_host_request=handler)
            self.assertIn("no such tool", failed.value or failed.exception or "")
            none = s.execute("import awrepl\nawait awrepl.host_request({'n': 1})")
            self.assertIn("no host bridge", none.value or none.exception or "")

    def test_interrupt_from_another_thread(self):
        with ReplSession() as s:
            timer = threading.Timer(0.5, s.interrupt)
            timer.start()
            r = s.execute("import time\nwhile True: time.sleep(0.01)", timeout_ms=0)
            timer.join(10)
            self.assertEqual(r.status, "interrupted")
            self.assertEqual(s.execute("1+1").value, "2")

    def test_sandbox(self):
        import shutil

        with self.assertRaises(TypeError):
            ReplSession(sandbox="yes")  # type: ignore[arg-type]
        if shutil.which("bwrap") is None:
            self.skipTest("no bubblewrap here")
        import socket

        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        reach = "import socket\nsocket.create_connection(('127.0.0.1', %d), timeout=5).close()" % listener.getsockname()[1]
        try:
            with ReplSession("open") as s:
                self.assertEqual(s.execute(reach).status, "ok", "outside a sandbox this process's listener is reachable")
            with ReplSession("boxed", sandbox=True) as s:
                r = s.execute(reach)
                self.assertIn("ConnectionRefusedError", r.exception or "", "inside, it is another network")
                rows = [row for row in json.loads(awrepl(self.home.path, "sessions", "--json").stdout) if row["name"] == s.name]
                self.assertTrue(rows[0]["sandbox"])
        finally:
            listener.close()

    def test_threads_share_one_session(self):
        with ReplSession() as s:
            s.execute("import threading\nlock = threading.Lock()\ncount = 0")
            results = {}

            def work(n):
                results[n] = [s.execute("with lock:\n    count += 1\n%d * %d" % (n, i)).value for i in range(15)]

            threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            self.assertEqual(results, {n: [str(n * i) for i in range(15)] for n in range(4)})
            self.assertEqual(s.execute("count").value, "60")

    def test_bad_input(self):
        with ReplSession() as s:
            for code in (b"1+1", None, 42, ["1"]):
                with self.assertRaises(TypeError) as caught:
                    s.execute(code)  # type: ignore[arg-type]
                self.assertIn(type(code).__name__, str(caught.exception))
            with self.assertRaises(ValueError):
                s.execute("1", timeout_ms=-1)
            self.assertEqual(s.execute("1+1").value, "2", "bad input loses nothing")
        for label in ("", "has space", "a/b", "-dash", "x" * 65, "é"):
            with self.assertRaises(ValueError) as caught:
                ReplSession(label)
            self.assertIn("1-64 letters, digits", str(caught.exception))
            self.assertIn(repr(label)[:40], str(caught.exception))
        with self.assertRaises(pkg.AwreplError) as caught:
            ReplSession(python="/nonexistent/python3")
        self.assertIn("/nonexistent/python3", str(caught.exception))


class SessionPoolTest(HomeTestCase):
    def test_pool_as_the_original(self):
        pool = SessionPool(timeout_ms=30000, max_output_bytes=65536)
        try:
            sid1 = pool.create_session()
            sid2 = pool.create_session("agent-2")
            self.assertEqual(sid2, "agent-2")
            with self.assertRaises(ValueError):
                pool.create_session("agent-2")
            session = pool.get_session(sid2)
            session.execute("x = 42")
            self.assertIn("NameError", pool.get_session(sid1).execute("x").exception, "pool sessions are isolated")
            self.assertEqual(sorted(pool.list_sessions()), sorted([sid1, sid2]))
            pool.delete_session(sid1)
            self.assertEqual(pool.list_sessions(), [sid2])
            with self.assertRaises(KeyError):
                pool.get_session(sid1)
            with self.assertRaises(KeyError):
                pool.delete_session(sid1)
        finally:
            pool.close_all()
        self.assertEqual(pool.list_sessions(), [])
        self.assertTrue(session.closed)


if __name__ == "__main__":
    unittest.main()
