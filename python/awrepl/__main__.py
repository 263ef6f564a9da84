"""``python -m awrepl ARGS``: runs the awrepl executable with ARGS; its exit status is this one's."""

import os
import sys


def main() -> int:
    from ._binary import find_executable
    from .errors import AwreplError

    try:
        exe = find_executable(os.environ)
    except AwreplError as err:
        sys.stderr.write("awrepl: %s\n" % err)
        return 125
    args = [exe, *sys.argv[1:]]
    if sys.platform != "win32":
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(exe, args)  # the executable takes this process's place: signals and status pass straight through
    import subprocess

    try:
        return subprocess.call(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
