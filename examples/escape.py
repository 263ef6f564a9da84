# escape.py: a cell trying to get out of `awrepl --sandbox` (README, "Isolation"). Each attempt runs in
# a `try` and prints what happened: `refused: <the exception>` or `ALLOWED: <what it got>`.
import os
import socket


def attempt(what, action):
    try:
        got = action()
    except Exception as e:  # noqa: BLE001 -- reporting every refusal is the point
        print(f"{what:<30} refused: {type(e).__name__}: {e}")
    else:
        print(f"{what:<30} ALLOWED: {got}")


attempt("read /etc/shadow", lambda: open("/etc/shadow").read())
attempt("read ~/.ssh/id_ed25519", lambda: open(os.path.expanduser("~/.ssh/id_ed25519")).read())
attempt("connect to 1.1.1.1:443", lambda: socket.create_connection(("1.1.1.1", 443), timeout=5))
attempt("create /usr/local/bin/git", lambda: open("/usr/local/bin/git", "w"))
attempt("create .git/hooks/pre-commit", lambda: open(".git/hooks/pre-commit", "w"))
attempt("read $AWS_SECRET_ACCESS_KEY", lambda: os.environ["AWS_SECRET_ACCESS_KEY"])
attempt("list the host's processes", lambda: sorted(p for p in os.listdir("/proc") if p.isdigit()))
attempt("write notes.txt (the cwd)", lambda: open("notes.txt", "w").write("note"))
