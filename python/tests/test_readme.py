"""The original package's README examples (original_readme_examples.txt, verbatim) run as written."""

import contextlib
import io
import json
import os
import tempfile
import unittest

from _support import HERE, HomeTestCase

import awrepl


def blocks():
    with open(os.path.join(HERE, "original_readme_examples.txt"), encoding="utf-8") as f:
        text = f.read()
    found = {}
    for chunk in text.split("\n#### ")[1:]:
        name, _, body = chunk.partition("\n")
        found[name] = body
    return found


class ReadmeExamplesTest(HomeTestCase):
    def setUp(self):
        self.blocks = blocks()
        self.cwd = tempfile.mkdtemp(prefix="awrepl-readme-")
        with open(os.path.join(self.cwd, "config.json"), "w") as f:
            json.dump({"server": "db.example", "port": 5432, "user": "a", "debug": False, "tags": []}, f)
        self.saved_cwd = os.getcwd()
        os.chdir(self.cwd)  # the sessions' working directory: where config.json is

    def tearDown(self):
        os.chdir(self.saved_cwd)

    def run_block(self, name, namespace):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(self.blocks[name], "<README %s>" % name, "exec"), namespace)
        return out.getvalue()

    def test_every_block_is_here(self):
        self.assertEqual(list(self.blocks), ["quick-start", "turns", "api-session", "api-methods", "pool", "with-awrepl"])

    def test_quick_start(self):
        ns = {}
        self.assertEqual(self.run_block("quick-start", ns), "3\n\n")
        self.assertTrue(ns["session"].closed)

    def test_turns_and_looking_at_the_live_object(self):
        session = awrepl.ReplSession("agent")
        try:
            session.execute("import json\ndef load_file(p):\n    return json.load(open(p))\nload_json = load_file")
            ns = {"session": session}
            self.run_block("turns", ns)
            self.assertEqual(session.execute("print(data['server'])").stdout, "db.example\n")
            self.run_block("with-awrepl", ns)
            self.assertRegex(ns["vars"]["data"], r"^dict\b.*: \{'server': 'db.example'")
            self.assertEqual((ns["info"]["type"], ns["info"]["len"]), ("dict", 5))
            self.assertIn("server", ns["info"]["keys"])
        finally:
            session.close()

    def test_api_section(self):
        ns = {}
        self.run_block("api-session", ns)
        self.assertIsInstance(ns["result"], awrepl.ExecResult)
        self.assertEqual(ns["session"].session_id, "my-session")
        self.run_block("api-methods", ns)
        self.assertIn("NameError", ns["result"].exception)  # "code" is not defined there either
        self.assertEqual(list(ns["variables"]), ["x"])
        self.assertRegex(ns["variables"]["x"], r"^list\b.*: \[1, 2, 3\]$")
        self.assertEqual((ns["info"]["type"], ns["info"]["repr"], ns["info"]["len"]), ("list", "[1, 2, 3]", 3))
        self.assertTrue(ns["session"].closed)
        self.assertTrue(ns["s"].closed)

    def test_pool(self):
        ns = {}
        self.run_block("pool", ns)
        self.assertEqual(len(ns["sessions"]), 2)
        self.assertIn("agent-2", ns["sessions"])
        self.assertEqual(ns["pool"].list_sessions(), [])


if __name__ == "__main__":
    unittest.main()
