"""The spec's newer options and calls: limits=, venv=, sandbox {allow}, inspect(full=True), history(),
on the blocking and the asyncio classes, against the real executable."""

import asyncio
import errno
import http.server
import os
import shutil
import sys
import tempfile
import threading
import unittest

from _support import HomeTestCase, awrepl

import awrepl as pkg
from awrepl import AsyncReplSession, ReplSession, SessionPool, attach, attach_async

#: Writes 2 MiB and answers the errno it met (None: the write went through).
WRITE_2_MIB = """
try:
    with open("big.bin", "wb") as f:
        f.write(b"x" * (2 << 20))
    met = None
except OSError as err:
    met = err.errno
met
"""
LONG_DOC = "word " * 4000


def run_async(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


class LimitsTest(HomeTestCase):
    def test_max_file_bytes_on_every_class(self):
        with tempfile.TemporaryDirectory() as cwd:
            with ReplSession("capped", limits={"max_file_bytes": 1 << 20}, cwd=cwd) as s:
                self.assertEqual(s.execute(WRITE_2_MIB).value, str(errno.EFBIG))
            with ReplSession("uncapped", cwd=cwd) as s:
                r = s.execute(WRITE_2_MIB)
                self.assertEqual((r.status, r.value), ("ok", None), "without limits the same write goes through")
            with attach("capped-named", limits={"max_file_bytes": 1 << 20}, cwd=cwd) as s:
                self.assertEqual(s.execute(WRITE_2_MIB).value, str(errno.EFBIG))
            awrepl(self.home.path, "close", "capped-named")
            with SessionPool(limits={"max_file_bytes": 1 << 20}) as pool:
                sid = pool.create_session()
                session = pool.get_session(sid)
                session.execute("import os; os.chdir(%r)" % cwd)
                self.assertEqual(session.execute(WRITE_2_MIB).value, str(errno.EFBIG))

            async def main():
                async with AsyncReplSession("capped-async", limits={"max_file_bytes": 1 << 20}, cwd=cwd) as s:
                    self.assertEqual((await s.execute(WRITE_2_MIB)).value, str(errno.EFBIG))
                s = await attach_async("capped-async-named", limits={"max_file_bytes": 1 << 20}, cwd=cwd)
                try:
                    self.assertEqual((await s.execute(WRITE_2_MIB)).value, str(errno.EFBIG))
                finally:
                    await s.close()

            run_async(main())
            awrepl(self.home.path, "close", "capped-async-named")

    def test_bad_limits(self):
        with self.assertRaises(TypeError) as caught:
            ReplSession(limits=1 << 20)  # type: ignore[arg-type]
        self.assertIn("limits must be", str(caught.exception))
        # A value the supervisor cannot take: its error names it, and no session is left.
        with self.assertRaises(pkg.AwreplError) as caught:
            ReplSession("bad-limits", limits={"max_file_bytes": -5})
        self.assertIn("-5", str(caught.exception))
        with self.assertRaises(pkg.AwreplError) as caught:
            attach("bad-limits-named", limits={"max_files": 3}).execute("1")
        self.assertIn("max_files", str(caught.exception))
        self.assertNotIn("bad-limits", awrepl(self.home.path, "sessions").stdout)


class VenvTest(HomeTestCase):
    def test_the_session_runs_in_the_venv(self):
        with tempfile.TemporaryDirectory() as cwd:
            # Relative to cwd, as the CLI's --venv; created on first use.
            with ReplSession("in-venv", venv="env", cwd=cwd) as s:
                prefix = s.execute("import sys; sys.prefix").value
                self.assertEqual(prefix, repr(os.path.join(os.path.realpath(cwd), "env")))
                self.assertNotEqual(s.execute("sys.prefix == sys.base_prefix").value, "True")
            self.assertTrue(os.path.exists(os.path.join(cwd, "env", "pyvenv.cfg")))
            venv = os.path.join(cwd, "env")
            with attach("in-venv-named", venv=venv) as s:
                self.assertEqual(s.execute("import sys; sys.prefix").value, repr(os.path.realpath(venv)))
            awrepl(self.home.path, "close", "in-venv-named")

            async def main():
                async with AsyncReplSession("in-venv-async", venv=venv) as s:
                    return (await s.execute("import sys; sys.prefix")).value

            self.assertEqual(run_async(main()), repr(os.path.realpath(venv)))
        with self.assertRaises(TypeError):
            ReplSession(venv=3)  # type: ignore[arg-type]


class InspectHistoryTest(HomeTestCase):
    def test_inspect_full(self):
        define = "def f():\n    %r\n" % LONG_DOC
        with ReplSession() as s:
            s.execute(define)
            short = s.inspect("f")["docstring"]
            whole = s.inspect("f", full=True)["docstring"]
            self.assertEqual(whole, LONG_DOC.strip())
            self.assertLess(len(short), len(whole), "without full the docstring is cut down")
            with self.assertRaises(pkg.NameNotFound):
                s.inspect("nope", full=True)
        with attach("inspected") as s:
            s.execute(define)
            self.assertEqual(s.inspect("f", full=True)["docstring"], LONG_DOC.strip())

        async def main():
            async with AsyncReplSession() as s:
                await s.execute(define)
                return (await s.inspect("f"))["docstring"], (await s.inspect("f", full=True))["docstring"]

        short, whole = run_async(main())
        self.assertEqual(whole, LONG_DOC.strip())
        self.assertLess(len(short), len(whole))
        awrepl(self.home.path, "close", "inspected")

    def test_history(self):
        with attach("recorded") as s:
            s.execute("a = 1")
            s.execute("a + 1")
            awrepl(self.home.path, "-s", "recorded", "run", "b = 2")
            s.execute("1 / 0")
            history = s.history()
            self.assertIsInstance(history, pkg.History)
            self.assertEqual(history.session, "recorded")
            self.assertEqual(history.total, 4)
            self.assertEqual(history.dropped, 0)
            self.assertEqual([(c.n, c.code, c.client) for c in history.cells], [(1, "a = 1", "python"), (2, "a + 1", "python"), (3, "b = 2", "cli"), (4, "1 / 0", "python")])
            self.assertEqual(history.cells[1].result.value, "2")
            self.assertIsInstance(history.cells[1].result, pkg.ExecResult)
            self.assertEqual(history.cells[3].status, "error")
            self.assertRegex(history.cells[0].started_at, r"^\d{4}-\d\d-\d\dT.*Z$")
            self.assertEqual([c.n for c in s.history(last=2).cells], [3, 4])
            self.assertEqual(s.history(last=0).cells, [])
            for bad in (-1, 1.5, "3", True):
                with self.assertRaises(ValueError) as caught:
                    s.history(last=bad)  # type: ignore[arg-type]
                self.assertIn(repr(bad), str(caught.exception))

        async def main():
            s = await attach_async("recorded")
            try:
                await s.execute("c = 3")
                return await s.history(last=1)
            finally:
                await s.close()

        last = run_async(main())
        self.assertEqual([(c.n, c.code, c.client) for c in last.cells], [(5, "c = 3", "python")])
        self.assertEqual(last.total, 5)
        with self.assertRaises(pkg.SessionNotFound):
            attach("never-made", existing=True).history()
        awrepl(self.home.path, "close", "recorded")


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@unittest.skipIf(shutil.which("bwrap") is None or not sys.platform.startswith("linux"), "no bubblewrap here")
class SandboxAllowTest(HomeTestCase):
    def test_allow_reaches_only_the_hosts_named(self):
        servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
        for server in servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        allowed, other = (server.server_address[1] for server in servers)
        fetch = "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:%d/x', timeout=10).read()"
        try:
            with ReplSession("allowing", sandbox={"allow": ["127.0.0.1:%d" % allowed]}) as s:
                self.assertEqual(s.execute(fetch % allowed).value, repr(b"hello /x"))
                refused = s.execute(fetch % other)
                self.assertEqual(refused.status, "error")
                self.assertNotIn("hello", refused.value or "")
            with self.assertRaises(pkg.AwreplError) as caught:
                ReplSession("bad-allow", sandbox={"allow": ["no such host!"]})
            self.assertIn("no such host!", str(caught.exception))
        finally:
            for server in servers:
                server.shutdown()
                server.server_close()


if __name__ == "__main__":
    unittest.main()
