"""The rules the package keeps a copy of, compared with the TypeScript ones they mirror, and its import cost."""

import os
import re
import subprocess
import sys
import unittest

from _support import REPO, Home, awrepl, daemon_status, use_home, AWREPL_BIN

from awrepl import _home, _names, errors


def read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


class SameRulesTest(unittest.TestCase):
    def test_error_codes_are_the_typescript_ones(self):
        source = read("lib/core/errors.ts")
        table = re.search(r"const EXIT_FOR_CODE = \{(.*?)\} as const;", source, re.S).group(1)
        codes = re.findall(r"^\s+(\w+): ExitCode\.(\w+),", table, re.M)
        exit_codes = {name: int(value) for name, value in re.findall(r"^\s+(\w+): (\d+),", re.search(r"export const ExitCode = \{(.*?)\} as const;", source, re.S).group(1), re.M)}
        self.assertGreater(len(codes), 10)
        self.assertEqual(list(errors.ERROR_CODES), [c for c, _ in codes], "the same codes in the same order")
        self.assertEqual(errors.ERROR_CODES, {c: exit_codes[e] for c, e in codes}, "and the same exit statuses")

    def test_every_code_makes_an_error_carrying_it(self):
        for code in errors.ERROR_CODES:
            err = errors.error_for(code, "m")
            self.assertIsInstance(err, errors.AwreplError)
            self.assertEqual((err.code, str(err), err.exit_code), (code, "m", errors.ERROR_CODES[code]))
        self.assertEqual(errors.error_for("from_a_newer_build", "m").code, "internal")
        import pickle

        again = pickle.loads(pickle.dumps(errors.error_for("session_not_found", "gone")))
        self.assertEqual((type(again), again.code, str(again)), (errors.SessionNotFound, "session_not_found", "gone"))

    def test_session_name_rule_is_the_typescript_one(self):
        source = read("lib/core/names.ts")
        ts = re.search(r"export const SESSION_NAME = /(.*)/;", source).group(1)
        self.assertEqual(_names.SESSION_NAME.pattern, ts)
        self.assertIn(_names.NAME_RULE, source)
        for good in ("a", "A.b_c-9", "x" * 64):
            self.assertEqual(_names.check_session_name(good), good)
        for bad in ("", "x" * 65, ".a", "a\n", "a b", None):
            with self.assertRaises(ValueError):
                _names.check_session_name(bad)

    def test_protocol_number_is_the_typescript_one(self):
        from awrepl import _start

        self.assertEqual(str(_start.PROTOCOL), re.search(r"export const SUPERVISOR_PROTOCOL = (\d+);", read("lib/core/version.ts")).group(1))

    def test_result_fields_are_the_typescript_ones(self):
        from dataclasses import fields

        from awrepl import ExecResult

        block = re.search(r"export type ExecResult = \{(.*?)\n\};", read("lib/protocol/result.ts"), re.S).group(1)
        ts = re.findall(r"^  (\w+)\??:", block, re.M)
        self.assertEqual([f.name for f in fields(ExecResult)], ts)


class ResultShapeTest(unittest.TestCase):
    def test_a_result_of_another_shape_still_reads(self):
        from awrepl import ExecResult

        full = {"stdout": "", "stderr": "", "value": "2", "exception": None, "traceback": "", "duration_ms": 1.0, "truncated": False, "truncated_bytes": 0, "status": "ok", "session": "a", "display": []}
        self.assertEqual(ExecResult.from_json(full).to_dict(), full)
        newer = ExecResult.from_json(dict(full, some_future_field=1, notice="n"))
        self.assertEqual((newer.value, newer.notice), ("2", "n"))
        older = ExecResult.from_json({"stdout": "x", "value": None})
        self.assertEqual((older.stdout, older.status, older.display), ("x", "ok", []))


class SocketPathTest(unittest.TestCase):
    def test_state_dir_rules(self):
        self.assertEqual(_home.state_dir({"AWREPL_HOME": "/x/y/"}), "/x/y")
        self.assertEqual(_home.state_dir({"XDG_STATE_HOME": "/s", "HOME": "/h"}), "/s/awrepl")
        self.assertEqual(_home.state_dir({"HOME": "/h"}), "/h/.local/state/awrepl")
        self.assertEqual(_home.state_dir({"AWREPL_HOME": "rel"}), os.path.join(os.getcwd(), "rel"))
        self.assertEqual(_home.short_hash(""), "cbf29ce484222325")

    def test_socket_path_is_the_supervisors_short_and_long(self):
        if not os.access(AWREPL_BIN, os.X_OK):
            self.skipTest("no executable")
        short = Home()
        long_home = Home()
        deep = os.path.join(long_home.path, "d" * 60, "e" * 60)
        os.makedirs(deep, mode=0o700)
        saved = dict(os.environ)
        try:
            for home in (short.path, deep):
                use_home(home)
                self.assertEqual(awrepl(home, "-s", "probe", "run", "1").returncode, 0)
                status = daemon_status(home)
                self.assertEqual(_home.layout_of({"AWREPL_HOME": home}).socket, status["socket"], home)
                awrepl(home, "daemon", "stop")
            self.assertTrue(_home.socket_path(deep).startswith("/tmp/awrepl-"), "the long path's fallback was exercised")
        finally:
            os.environ.clear()
            os.environ.update(saved)
            short.close(self)
            awrepl(deep, "daemon", "stop")
            long_home.close(self)


class ImportCostTest(unittest.TestCase):
    def test_import_loads_nothing_heavy(self):
        code = "import sys; before = set(sys.modules); import awrepl; print(' '.join(sorted(set(sys.modules) - before)))"
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        loaded = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env, timeout=60, check=True).stdout.split()
        for heavy in ("asyncio", "json", "socket", "subprocess", "threading", "dataclasses", "typing", "awrepl._session"):
            self.assertNotIn(heavy, loaded)

    def test_version_is_package_json_s(self):
        import json

        import awrepl

        self.assertEqual(awrepl.__version__, json.loads(read("package.json"))["version"])

    def test_names_resolve_lazily(self):
        import awrepl

        for name in awrepl.__all__:
            self.assertIsNotNone(getattr(awrepl, name), name)
        with self.assertRaises(AttributeError):
            awrepl.nope  # noqa: B018


if __name__ == "__main__":
    unittest.main()
