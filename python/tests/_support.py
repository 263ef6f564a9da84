"""What every test module shares: its own state directory (AWREPL_HOME, 0700, fresh per class or per
test), the real executable (AWREPL_BIN, default the checkout's dist/awrepl), a stop of every supervisor
it started, and a check that no process of that state directory is left behind."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
AWREPL_BIN = os.path.abspath(os.environ.get("AWREPL_BIN") or os.path.join(REPO, "dist", "awrepl"))
#: Upper bound of one awrepl command in a test (the machine is shared: generous).
COMMAND_TIMEOUT_S = 60


def processes_with_home(home):
    """Pids of processes whose environment names this state directory (supervisors, workers)."""
    found = []
    marker = ("AWREPL_HOME=%s" % home).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/stat" % entry, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in env and state != b"Z":
            found.append(int(entry))
    return found


def awrepl(home, *args, input=None, timeout=COMMAND_TIMEOUT_S, env=None):
    """Runs the executable with this state directory; a CompletedProcess with text output."""
    full_env = dict(os.environ, AWREPL_HOME=home, NO_COLOR="1")
    full_env.pop("AWREPL_SESSION", None)
    if env:
        full_env.update(env)
    return subprocess.run([AWREPL_BIN, *args], input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=full_env, stdin=None if input is not None else subprocess.DEVNULL)


def daemon_status(home):
    run = awrepl(home, "daemon", "status", "--json")
    return json.loads(run.stdout or "null")


class Home:
    """A fresh private state directory; ``close()`` stops its supervisor and proves nothing is left."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="awrepl-py-")
        os.chmod(self.path, 0o700)

    def close(self, test=None):
        awrepl(self.path, "daemon", "stop")
        deadline = time.monotonic() + 15
        left = processes_with_home(self.path)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = processes_with_home(self.path)
        for pid in left:  # leave nothing behind, then fail
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.path, ignore_errors=True)
        if left and test is not None:
            test.fail("processes of %s were left behind: %s" % (self.path, left))


def use_home(home):
    """Points this process's awrepl at ``home`` (the client reads the environment when an object is made)."""
    os.environ["AWREPL_HOME"] = home
    os.environ["AWREPL_BIN"] = AWREPL_BIN
    # The worker runs the interpreter under test: the runtime is exercised on it too.
    os.environ["AWREPL_PYTHON"] = sys.executable
    os.environ.pop("AWREPL_SESSION", None)


class HomeTestCase(unittest.TestCase):
    """One state directory for the whole class (one supervisor, stopped at the end)."""

    @classmethod
    def setUpClass(cls):
        if not os.access(AWREPL_BIN, os.X_OK):
            raise unittest.SkipTest("no awrepl executable at %s (npm run build)" % AWREPL_BIN)
        cls.home = Home()
        use_home(cls.home.path)

    @classmethod
    def tearDownClass(cls):
        import gc

        gc.collect()
        cls.home.close()
        left = processes_with_home(cls.home.path)
        assert not left, "processes left behind: %s" % left


class FreshHomeTestCase(unittest.TestCase):
    """A state directory of its own for every test."""

    def setUp(self):
        if not os.access(AWREPL_BIN, os.X_OK):
            self.skipTest("no awrepl executable at %s (npm run build)" % AWREPL_BIN)
        self.home = Home()
        use_home(self.home.path)

    def tearDown(self):
        import gc

        gc.collect()
        self.home.close(self)


def run_python(code, timeout=COMMAND_TIMEOUT_S, **kwargs):
    """Runs ``code`` in a new interpreter (this one) with this package importable."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    return subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env, **kwargs)


def wait_until(predicate, timeout=20, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("%s did not hold within %s s" % (what, timeout))
