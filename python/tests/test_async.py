"""AsyncReplSession and attach_async: the same calls on asyncio; cancelling the awaiting task interrupts the cell."""

import asyncio
import unittest

from _support import HomeTestCase, awrepl

import awrepl as pkg
from awrepl import AsyncReplSession, attach_async

LONG_CELL = "print('started', flush=True)\nimport time\nwhile True: time.sleep(0.01)"


class AsyncTest(HomeTestCase):
    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 120))

    def test_repl_session(self):
        async def main():
            async with AsyncReplSession("async-1") as s:
                await s.execute("items = [1, 2, 3]")
                r = await s.execute("print(len(items))")
                self.assertEqual(r.stdout, "3\n")
                found = await s.variables()
                self.assertEqual(list(found), ["items"])
                self.assertRegex(found["items"], r"^list\b.*: \[1, 2, 3\]$")
                self.assertEqual((await s.inspect("items"))["len"], 3)
                with self.assertRaises(pkg.NameNotFound):
                    await s.inspect("nope")
                await s.reset()
                self.assertEqual(await s.variables(), {})
                with self.assertRaises(TypeError):
                    await s.execute(b"1")  # type: ignore[arg-type]
                name = s.name
            with self.assertRaises(pkg.SessionClosed):
                await s.execute("1")
            return name

        name = self.run_async(main())
        self.assertNotIn(name, awrepl(self.home.path, "sessions").stdout)

    def test_first_calls_at_once_share_one_session(self):
        async def main():
            s = AsyncReplSession("racing")
            try:
                values = await asyncio.gather(*(s.execute("%d * 3" % i) for i in range(5)))
                self.assertEqual([v.value for v in values], [str(i * 3) for i in range(5)])
                rows = [r for r in pkg.sessions() if r["name"].startswith("racing.")]
                self.assertEqual(len(rows), 1, rows)
            finally:
                await s.close()

        self.run_async(main())

    def test_cancelling_the_task_interrupts_the_cell(self):
        async def main():
            async with AsyncReplSession() as s:
                await s.execute("x = 3")
                started = asyncio.Event()
                task = asyncio.ensure_future(s.execute(LONG_CELL, timeout_ms=0, on_stdout=lambda t: started.set()))
                await asyncio.wait_for(started.wait(), 30)
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                # The cell was interrupted: the next one runs at once, in the same namespace.
                r = await asyncio.wait_for(s.execute("x * 2"), 30)
                self.assertEqual(r.value, "6")

        self.run_async(main())

    def test_attach_async_streams_and_host_bridge(self):
        async def main():
            s = await attach_async("async-named")
            try:
                seen = []

                async def host(data):
                    await asyncio.sleep(0)
                    return {"twice": data["n"] * 2}

                r = await s.execute("import awrepl\nprint('hi')\n(await awrepl.host_request({'n': 4}))['twice']", on_stdout=seen.append, on_host_request=host)
                self.assertEqual((r.value, "".join(seen)), ("8", "hi\n"))
                self.assertEqual(awrepl(self.home.path, "-s", "async-named", "run", "1+1").stdout, "2\n")
                # Two cells at once from two tasks: the session runs them in turn.
                a, b = await asyncio.gather(s.execute("import time; time.sleep(0.2); 'a'"), s.execute("'b'"))
                self.assertEqual((a.value, b.value), ("'a'", "'b'"))
            finally:
                await s.close()
            awrepl(self.home.path, "close", "async-named")

        self.run_async(main())


if __name__ == "__main__":
    unittest.main()
