"""awrepl runtime: one persistent Python namespace served over protocol v3.

Stdlib only, CPython 3.9-3.13; ``dill`` is used for snapshots when importable.
Run as ``python -u runtime.py`` (or a cached ``.pyc`` of it), or send the source
through the one-line bootstrap in ``BOOTSTRAP`` (remote workers):

    python -u -c BOOTSTRAP        # then write b"<N>\\n" and N bytes of source to its stdin

The bootstrap reads one ASCII line holding the length N from fd 0 byte by byte,
then exactly N bytes of source, and exec's them as ``__main__``; the protocol
then continues on fd 0. Nothing here depends on ``__file__``.

Wire format: one JSON object per line, UTF-8. Requests arrive on fd 0; events
leave on a private dup of the original fd 1. fds 1 and 2 are pipes drained by
pump threads (raw bytes ship as stdout/stderr with id null); fd 0 is /dev/null.
Full description: docs/protocol.md.

Requests (host -> runtime); (+) marks awrepl's additions to protocol v3:

    {"type":"execute","id":ID,"code":STR,"filename":STR?(+)}   tracebacks name it; __file__ for the cell
        (+) "figure_format":"png"|"svg"?, "max_display_entries":INT?   done + display_dropped INT?
        (+) "max_display_payload_bytes":INT?   one payload's cap (absent: 32 MiB; 0: none)
    {"type":"interrupt"}  {"type":"interrupt","id":ID}          no done
    {"type":"host_reply","id":ID,"data":OBJ}                     no done
    {"type":"snapshot","id":ID,"path":STR,"manifest_path":STR,
     "max_bytes":INT?,"max_variable_bytes":INT?,"prune_oversized":BOOL?,
     "max_variable_ms":INT?(+),"fsync":BOOL?(+)}   done + saved, skipped, pruned, bytes
  + {"type":"snapshot","id":ID,"to":"host","max_bytes":INT?,"max_variable_bytes":INT?,
     "chunk_bytes":INT?}                       the payload streams back as data events (never
                                               whole in memory here); done + saved, skipped,
                                               pruned [], bytes, sha256, manifest {...}
    {"type":"restore","id":ID,"path":STR}      done + restored, failed
  + {"type":"restore","id":ID,"from":"host","bytes":INT,"sha256":HEX?}
                                               exactly `bytes` bytes follow in data requests;
                                               done as for a path
  + {"type":"data","id":ID,"data":B64}         no done, not queued: the next piece of restore
                                               ID's payload
  + restore "binary":true: {"type":"data","id":ID,"bytes":N} then N raw bytes (pieces), and at
                                               the end {"type":"data","id":ID,"sha256":HEX}
    {"type":"list_names","id":ID}              done + names
    {"type":"signatures","id":ID,"modules":[STR]?}
                                         done + calls, failed, digest
    {"type":"shutdown","id":ID?}               done only when it carries an id
  + {"type":"shutdown","now":true}             no done, not queued: the process exits at once
                                               and its group (the cells' children) is killed;
                                               send it, then close stdin (a C loop holding the
                                               GIL: the watchdog ends it 0.5 s after the hang-up)
  + {"type":"ping","id":ID?}                   not queued: a heartbeat; with an id, done + time
  + {"type":"heartbeat","id":ID,"timeout_ms":INT}
                                               not queued: done + watchdog BOOL; afterwards no
                                               ping (nor growth of unread stdin) for timeout_ms
                                               ends the process group, even in a C loop; 0 = off
  + {"type":"info","id":ID}                    not queued: done + facts {pid, ppid, pgid,
                                               own_group, uid, host, cwd, rss, peak_rss, python,
                                               executable, prefix, base_prefix, watchdog, busy}
  + {"type":"variables","id":ID,"form":"line"|"repr"?}
                                               done + variables {name: one line saying what it
                                               is, or "type: repr" with form "repr"} (made from a
                                               slice of its value: O(the limit))
  + {"type":"inspect","id":ID,"name":STR,"full":BOOL?}
                                               done + info {type, shape, ..., repr, docstring,
                                               dir, more?}; unknown name: status error + reason
  + {"type":"reset","id":ID}                   fresh namespace
  + {"type":"complete","id":ID,"code":STR,"cursor":INT?}   done + matches [STR]
  + {"type":"is_complete","id":ID,"code":STR}  done.status complete|incomplete|
                                               invalid, done + indent

Events (runtime -> host):

    {"event":"ready","protocol":3,"python":STR,"capabilities":[STR],"pid":INT(+)}
    {"event":"stdout"|"stderr","id":STR|null,"text":STR}
    {"event":"result","id":STR,"text":STR}
    {"event":"display","id":STR|null,"data":{MIME: payload},"source":"value"?(+),"error":STR?(+)}
    {"event":"host_request","id":STR,"data":OBJ}
    {"event":"error","id":STR|null,"ename":STR,"evalue":STR,"traceback":[STR]}
    {"event":"done","id":STR,"status":"ok"|"error", ...per request above, "reason":STR?}
  + {"event":"data","id":STR,"seq":INT,"data":B64}   the next piece of snapshot ID's payload
  + {"event":"data","id":STR,"seq":INT,"bytes":N}    with snapshot "binary":true: N raw bytes follow

A malformed line gets an error event with ename "ProtocolError" (id null, or the
request's id plus a failed done when the id is readable); the runtime keeps serving.

Contents, in file order (each section's ``# ----`` banner starts with its name; in
brackets, the objects holding the state it owns):

    Channels         the private protocol fds and the fd 1/2 pipes (os-level only before ready)
    Framing          JSON encoding, the write lock, the Python-level output batch [_out]
    Streams, pumps   sys.stdout/stderr, print, the fd pump threads and their fences
    Requests         the queue, the active request, interrupts [_rq, _cell]
    Errors           tracebacks without runtime frames, the repeat line, call-shape remedies
    Execution        compiling a cell, top-level await, the trailing value, finishing a request
    Notebook habits  !cmd, %pip, %cd, %env, %time lines, as IPython reads them; the hint for a
                     missing module
    The loop         the asyncio loop, created lazily; running queued requests [_aio]
    Namespace        the user namespace and the ``awrepl`` module (emit, host_request)
    Rich display     display(), the Jupyter repr protocol, matplotlib inline, IPython.display hooks
    Reading          who reads requests (the main thread between requests, the reader thread
                     while one runs); the requests answered at once; the watchdog [_rd, _wd]
    Introspection    variables, inspect, reset, list_names; a repr's time budget [_budget]
    Editing help     complete, is_complete
    Signatures       the published-call index and the call-shape remedies drawn from it
    Snapshots        snapshot / restore: dill when importable, else pickle
    Dispatch         every request type and who answers it, declared once [_REQUESTS]
    Start-up         main(), the serve loop, exit

Interrupts: the reader thread, which reads requests while one runs, SIGINTs the main
thread (a SIGINT sent to the process does the same). Exit and cleanup: the runtime
leads a process group of its own (it calls setpgid when it was started inside
another's: behind ssh, bwrap, docker exec);
stdin EOF means shutdown, and a watchdog process ends the group 2 s later whatever
runs (0.5 s when the reader never saw the EOF and we spin: a C loop holds the GIL), when the
runtime exits, and on heartbeat silence. The protocol fds sit high (just under the
soft NOFILE limit, at most 2047), out of reach of a cell's os.closerange(3, 1024).
Environment: AWREPL_INTERRUPT_FALLBACK=1 forces the no-pthread_kill (Windows)
interrupt path; AWREPL_NO_WATCHDOG=1 disables the watchdog; AWREPL_SAFE_PATH=1 keeps the
cwd off sys.path (the host sets it where a sandboxed session could have planted modules);
AWREPL_SANDBOX_NETWORK=none|allow|full says what network a sandbox gave the worker (%pip's
message when it fails); both are taken out of the environment the cells see.
"""

import os
import sys
import _thread
import builtins as _builtins_mod

# The runtime's own builtins: a private copy taken before any user code runs. Every function below
# resolves len, repr, isinstance, __import__ ... here, so a cell that deletes or replaces a builtin
# (`del builtins.len`, `builtins.__import__ = None`) changes the user's namespace, not the serving
# machinery. Functions capture their builtins when they are created: this must precede every def.
__builtins__ = dict(_builtins_mod.__dict__)
_os_read = os.read
_os_readv = os.readv
_os_write = os.write
_os_exit = os._exit

PROTOCOL = 3
CAPABILITIES = ["signatures", "variables", "inspect", "reset", "complete", "is_complete", "snapshot",
                "exit_now", "heartbeat", "info", "snapshot_stream", "binary_data"]

# The remote bootstrap: no single quotes, no backslashes, no dollar signs, so a host can
# put it inside '...' for a remote shell unchanged.
BOOTSTRAP = (
    "import os;h=b\"\";exec(\"while 10 not in h:c=os.read(0,1) or os._exit(3);h+=c\");"
    "n=int(h);s=b\"\";exec(\"while len(s)<n:c=os.read(0,n-len(s)) or os._exit(3);s+=c\");"
    "exec(compile(s,\"<awrepl-runtime>\",\"exec\"),{\"__name__\":\"__main__\"})"
)

_G = globals()  # frames whose globals are this dict are the runtime's own: stripped from tracebacks
_main_ident = _thread.get_ident()
_pid = os.getpid()


def _held_lock():  # a lock already taken: whoever waits on it is woken by its release
    lock = _thread.allocate_lock()
    lock.acquire()
    return lock


# ---------------------------------------------------------------------------------------------
# Channels: the private protocol fds and the fd 1/2 pipes (only os-level work before `ready`:
# every import here is start-up latency)
# ---------------------------------------------------------------------------------------------

# The runtime's private fds (the protocol channel, the pump pipes, the watchdog's pipes) sit at the
# top of the fd table, just under the soft NOFILE limit and at most FD_CEILING - 1, close-on-exec:
# a cell's os.close(3) or os.closerange(3, 1024) (daemonising code, "close inherited fds") then
# does not cut the channel, and a file the cell opens never lands on a protocol fd. (Code that
# closes every fd up to the limit still cuts it: the host sees the channel's EOF as a death.)
FD_CEILING = 2048  # a higher fd would grow the kernel's fd table for nothing
_fd_next = [0]


def _move_high(fd):
    """Returns a close-on-exec duplicate of fd at the highest free slot, closing fd; fd itself
    when the limit leaves no room above the fds in use."""
    top = _fd_next[0]
    if top == 0:
        try:
            top = min(os.sysconf("SC_OPEN_MAX"), FD_CEILING) - 1
        except (AttributeError, ValueError, OSError):
            top = 255
    while top > fd + 16:
        target = top
        top -= 1
        try:
            os.fstat(target)
            continue  # taken (an fd inherited from the parent)
        except OSError:
            pass
        try:
            os.dup2(fd, target, inheritable=False)
        except OSError:
            continue
        os.close(fd)
        _fd_next[0] = top
        return target
    _fd_next[0] = top if top > 0 else -1
    return fd


class _Pump(object):
    """One fd (1 or 2) redirected into a pipe; the pump thread drains it to stdout/stderr events."""

    __slots__ = ("chan", "rfd", "wfd", "seen", "busy", "wake", "decoder", "carry", "turn")

    def __init__(self, fd, chan):
        self.chan = chan
        r, w = os.pipe()
        os.dup2(w, fd)  # fd 1/2 become the pipe's write end (inheritable: subprocesses write here)
        self.rfd = _move_high(r)
        self.wfd = _move_high(w)  # private write end: fence markers, keeps the pipe alive if fd is closed
        self.seen = 0  # fence markers seen by the pump thread
        self.busy = False
        self.wake = _held_lock()
        self.decoder = None  # the pump thread's incremental UTF-8 decoder
        self.carry = b""  # a fence marker's first bytes, held until the rest arrives
        self.turn = 0  # when the pump thread last read this pipe


def _setup_fds():
    _out.fd = _move_high(os.dup(1))
    _rd.fd = _move_high(os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    return _Pump(1, "stdout"), _Pump(2, "stderr")


def _write_all(data):
    try:
        n = _os_write(_out.fd, data)
        if n == len(data):
            return
        view = memoryview(data)[n:]
        while view:
            view = view[_os_write(_out.fd, view):]
    except BrokenPipeError:
        _os_exit(0)  # the host is gone: nobody reads our frames any more


# ---------------------------------------------------------------------------------------------
# Framing: JSON encoding, the write lock, the Python-level output batch [_out]
# ---------------------------------------------------------------------------------------------

class _Output(object):
    """The events' channel, the pipes behind fds 1 and 2, the live cell's batch of Python-level
    writes. Only the main thread appends to the batch, without the lock (the GIL makes list.append
    atomic); flushers hold _wlock and remove exactly the parts they ship: no append is ever lost."""

    __slots__ = ("fd", "pumps", "fence_poll", "libc", "parts", "size", "chan", "bid", "live",
                 "deferred", "forked")

    def __init__(self):
        self.fd = -1  # the private dup of the original fd 1
        self.pumps = ()  # the _Pump of fd 1 and of fd 2
        self.fence_poll = None  # the main thread's poll of the pump pipes (see _fence)
        self.libc = None  # ctypes' C library, for fflush at a fence
        self.parts = []  # the batch: the live cell's writes not shipped yet
        self.size = 0  # their length
        self.chan = None  # their channel, "stdout" or "stderr"
        self.bid = None  # the live cell's id while its batch is open, else None
        self.live = None  # id of the execute request currently running
        self.deferred = False  # a SIGINT that came mid-frame, retried once the frame is written
        self.forked = False  # a forked child: it writes no frames (its text goes to fds 1/2)


_out = _Output()
_wlock = _thread.RLock()  # one frame at a time; the main thread holding it defers SIGINT
_wlock_owned = _wlock._is_owned
_enc = _enc_ascii = _loads = _make_encoder = _esc_ascii = _esc_utf8 = None  # bound by _init_json


class _ScanContext(object):
    """What _json.make_scanner reads off json.JSONDecoder, without importing json (and re)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo = None

    @staticmethod
    def parse_constant(name):
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


def _init_json():
    """JSON straight from the _json accelerator: the json package would import re and enum,
    a few milliseconds of every session's first result. What JSON cannot hold goes as its repr."""
    global _enc, _enc_ascii, _loads, _esc_ascii, _esc_utf8, _make_encoder
    try:
        import _json
        scan = _json.make_scanner(_ScanContext())
        _make_encoder = _json.make_encoder
        _esc_ascii = _json.encode_basestring_ascii
        _esc_utf8 = _json.encode_basestring
    except (ImportError, AttributeError):  # not CPython's accelerator: the json package
        import json
        from json.encoder import encode_basestring, encode_basestring_ascii
        _esc_ascii, _esc_utf8 = encode_basestring_ascii, encode_basestring
        _enc = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                                default=repr).encode
        _enc_ascii = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"),
                                      default=repr).encode
        _loads = json.loads
        return
    enc = _make_encoder(None, repr, _esc_utf8, None, ":", ",", False, False, False)
    enc_ascii = _make_encoder(None, repr, _esc_ascii, None, ":", ",", False, False, False)
    _enc = lambda o: "".join(enc(o, 0))  # noqa: E731
    _enc_ascii = lambda o: "".join(enc_ascii(o, 0))  # noqa: E731
    ws = " \t\n\r"

    def loads(s):
        s = s.strip(ws)
        try:
            obj, end = scan(s, 0)
        except StopIteration as e:
            raise ValueError("Expecting value: char %s" % (e.value,))
        if end != len(s):
            raise ValueError("Extra data: char %d" % end)
        return obj
    _loads = loads


def _json_check(obj):
    """The length of obj's JSON text; TypeError/ValueError when obj is not plain JSON (what emit()
    accepts). The text is made to be measured, and let go."""
    def reject(o):
        raise TypeError("%s is not JSON-serializable" % type(o).__name__)
    if _make_encoder is None:  # the json package fallback (no _json accelerator)
        import json
        return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
    return sum(map(len, _make_encoder({}, reject, _esc_utf8, None, ":", ",", False, False, True)(obj, 0)))


def _sanitize(o):
    """Non-finite floats become null: JSON has no NaN and the host's parser rejects it."""
    if isinstance(o, float):
        return o if o == o and o not in (float("inf"), float("-inf")) else None
    if isinstance(o, dict):
        return {k: _sanitize(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_sanitize(v) for v in o]
    return o


def _frame(obj):
    try:
        s = _enc(obj)
    except ValueError:
        s = _enc(_sanitize(obj))
    try:
        return s.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # lone surrogates: \\uXXXX escapes keep the frame valid UTF-8
        try:
            s = _enc_ascii(obj)
        except ValueError:
            s = _enc_ascii(_sanitize(obj))
        return s.encode("ascii") + b"\n"


_timer_wake = _held_lock()  # released when a request starts while the batch timer sleeps
BATCH_BYTES = 65536  # a fast printer's frames: 8 KiB ones cost both sides 1.5-2x the CPU per byte
BATCH_SECONDS = 0.05
TIMER_LINGER_SECONDS = 0.2


# Control bytes JSON needs escaped, other than the \t \n \r the fast path replaces itself.
_RARE_CONTROLS = bytes(c for c in range(32) if c not in (9, 10, 13))


def _text_frame(chan, cid, text):
    """A stdout, stderr or result frame built directly: the generic encoder is several times slower."""
    if cid is None:
        head = '{"event":"%s","id":null,"text":' % chan
    else:
        head = '{"event":"%s","id":%s,"text":' % (chan, _esc_ascii(cid))
    if text.isascii():
        b = text.encode("ascii")
        if len(b.translate(None, _RARE_CONTROLS)) == len(b):
            # Plain ASCII text: escaping is five byte replaces (memchr-fast when absent),
            # well under the per-character cost of the JSON escaper.
            if b"\\" in b:
                b = b.replace(b"\\", b"\\\\")
            if b'"' in b:
                b = b.replace(b'"', b'\\"')
            b = b.replace(b"\n", b"\\n")
            if b"\r" in b:
                b = b.replace(b"\r", b"\\r")
            if b"\t" in b:
                b = b.replace(b"\t", b"\\t")
            return head.encode("ascii") + b'"' + b + b'"}\n'
        return (head + _esc_ascii(text) + "}\n").encode("ascii")
    try:
        return (head + _esc_utf8(text) + "}\n").encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return (head + _esc_ascii(text) + "}\n").encode("ascii")


def _flush_batch_locked():
    n = len(_out.parts)
    if not n:
        return
    text = "".join(_out.parts[:n])
    del _out.parts[:n]
    _out.size = 0
    _write_all(_text_frame(_out.chan, _out.bid, text))


def _flush_batch():
    with _wlock:
        _flush_batch_locked()
    if _out.deferred:
        _retry_deferred_sigint()


def _close_batch(data):
    """The request ends: its batch ships, then data (result and done). Later writes carrying
    its id (tasks outliving the cell) go unbatched."""
    if _out.forked:
        return
    with _wlock:
        _flush_batch_locked()
        _out.bid = None
        _out.chan = None
        if data:
            _write_all(data)
    if _out.deferred:
        _retry_deferred_sigint()


def _retry_deferred_sigint():
    if _out.deferred and _thread.get_ident() == _main_ident and not _wlock_owned():
        _out.deferred = False
        _on_sigint(2, None)


def _send(obj, prefix=None):
    """Ship one event; a pending batch goes first so order within the channel holds."""
    if _out.forked:
        return _send_forked(obj)
    data = _frame(obj)
    _write_event(data if prefix is None else prefix + data)


def _write_event(data):
    if _out.forked:
        return _forked_write(data)
    with _wlock:
        if _out.parts:
            _flush_batch_locked()
        _write_all(data)
    if _out.deferred:
        _retry_deferred_sigint()


def _write_events(header, raw):
    """A binary frame: its header line and its raw bytes, nothing of another thread between them."""
    with _wlock:
        if _out.parts:
            _flush_batch_locked()
        _write_all(header)
        _write_all(raw)
    if _out.deferred:
        _retry_deferred_sigint()


def _forked_write(frame):
    """Decode a text frame back into raw output (a forked child's unbatched write)."""
    try:
        obj = _loads(frame.decode("utf-8"))
    except ValueError:
        return
    _send_forked(obj)


def _send_forked(obj):
    """A forked child never writes frames: its text goes to the fd pipes like any raw write."""
    ev = obj.get("event")
    if ev in ("stdout", "stderr"):
        try:
            _os_write(1 if ev == "stdout" else 2, obj["text"].encode("utf-8", "replace"))
        except OSError:
            pass


def _batch_open(chan, cid, s):
    """Slow path of a live-cell write: (re)open the batch for this channel, then append."""
    with _wlock:
        _flush_batch_locked()
        _out.chan = chan
        _out.bid = cid
        _out.parts.append(s)
        _out.size = len(s)
    if _out.deferred:
        _retry_deferred_sigint()


def _block_sigint():
    """Runtime threads never take SIGINT: a signal sent to the process (kill -INT pid) must reach
    the main thread, where it wakes a blocking call in the cell."""
    try:
        _signal.pthread_sigmask(_signal.SIG_BLOCK, [_signal.SIGINT])
    except (AttributeError, OSError, ValueError):
        pass


def _batch_timer():
    """While requests come: one that has run TURN_SECONDS gives the reader thread the turn to read
    requests (_give_turn); a cell's batch ships every BATCH_SECONDS even when the cell stops
    printing. It ticks on for TIMER_LINGER_SECONDS after the last request: waking it costs the
    request that does so a thread wake-up and a GIL hand-over, which back-to-back requests then do
    not pay."""
    _block_sigint()
    while True:
        _timer_wake.acquire()
        flushed = quiet = _monotonic()
        seen = _rq.started
        while True:
            r = _rq.active
            watch = r is not None and _rd.main
            _sleep(TURN_SECONDS if watch else BATCH_SECONDS)
            if watch:
                _give_turn(r)
            now = _monotonic()
            if _out.parts and now - flushed >= BATCH_SECONDS * 0.9:
                with _wlock:
                    _flush_batch_locked()
                flushed = now
            if _rq.started != seen or _rq.active is not None or _out.live is not None or _out.parts:
                seen = _rq.started
                quiet = now
            elif now - quiet >= TIMER_LINGER_SECONDS:
                break


# ---------------------------------------------------------------------------------------------
# Streams, pumps: sys.stdout/stderr, print, the fd pump threads and their fences
# ---------------------------------------------------------------------------------------------

def _make_stream_class():
    import io
    out = _out

    class Stream(io.TextIOBase):
        """sys.stdout / sys.stderr: writes are tagged with the writing context's cell id."""

        encoding = "utf-8"
        errors = "replace"
        newlines = None
        line_buffering = False

        def __init__(self, chan, fd):
            self._chan = chan
            self._fd = fd
            self._buffer = None
            self.name = "<%s>" % chan

        def write(self, s):
            if type(s) is not str:
                if not isinstance(s, str):
                    raise TypeError("write() argument must be str, not %s" % type(s).__name__)
                s = str.__str__(s)
            if s:
                cid = _cell_get(None)
                if cid is out.bid and cid is not None and self._chan is out.chan:
                    out.parts.append(s)  # the live cell's open batch: the hot path
                    out.size += len(s)
                    if out.size >= BATCH_BYTES:
                        _flush_batch()
                elif cid is not None and cid == out.live:
                    _batch_open(self._chan, cid, s)
                else:  # user threads, tasks outliving their cell: shipped at once
                    _write_event(_text_frame(self._chan, cid, s))
            return len(s)

        def writable(self):
            return True

        def readable(self):
            return False

        def seekable(self):
            return False

        def isatty(self):
            return False

        def fileno(self):
            return self._fd

        def flush(self):
            # print(..., flush=True) before os._exit or a long C call must not lose the batch
            if _out.parts:
                _flush_batch()
            if self._buffer is not None:
                self._buffer.flush()

        @property
        def buffer(self):
            """Raw bytes go to the fd pipe: shipped with id null, like os.write."""
            if self._buffer is None:
                self._buffer = io.open(self._fd, "wb", closefd=False)
            return self._buffer

        def close(self):
            pass  # closing would break every later print

    return Stream


def _make_print(stream_class):
    """builtins.print, one write() per call instead of one per argument, separator and end.

    Each write() into a Stream is a Python call (the tag lookup and the batch append), so the
    builtin's two calls for print(line) cost more than the rest of shipping the line. Only the
    calls whose outcome cannot differ take this path: the file is a Stream and every argument is
    an exact str, int or float (whose str() runs no user code, so nothing can print or be
    interrupted between the parts). Anything else goes to the builtin unchanged, and so does
    the one failure possible here (an int too long for str()), which then fails as it would.
    """
    builtin_print = _builtins_mod.print
    sys_ = sys
    out = _out

    def print(*args, sep=" ", end="\n", file=None, flush=False):
        f = sys_.stdout if file is None else file
        if type(f) is not stream_class or type(sep) is not str or type(end) is not str:
            return builtin_print(*args, sep=sep, end=end, file=file, flush=flush)
        if len(args) == 1 and type(args[0]) is str:
            s = args[0] + end
        else:
            for a in args:
                t = type(a)
                if t is not str and t is not int and t is not float:
                    return builtin_print(*args, sep=sep, end=end, file=file, flush=flush)
            try:
                s = sep.join(map(str, args)) + end
            except ValueError:  # an int too long for str(): the builtin writes the parts before it
                return builtin_print(*args, sep=sep, end=end, file=file, flush=flush)
        cid = _cell_get(None)
        if cid is out.bid and cid is not None and f._chan is out.chan:
            out.parts.append(s)  # Stream.write's hot path, inlined: it is the other half of the cost
            out.size += len(s)
            if out.size >= BATCH_BYTES:
                _flush_batch()
        else:
            f.write(s)
        if flush:
            f.flush()

    print.__doc__ = builtin_print.__doc__
    print.__module__ = "builtins"
    print.__qualname__ = "print"  # pickled by reference, as builtins.print, like the builtin
    return print


def _partial_marker_tail(data, marker):
    """Length of the longest suffix of data that is a proper prefix of marker."""
    n = min(len(marker) - 1, len(data))
    while n > 0:
        if data.endswith(marker[:n]):
            return n
        n -= 1
    return 0


def _pump_read(p):
    """One read of pump p's pipe, shipped as one event; False when the pipe is closed."""
    # Busy from before the read: a fence that finds the pipe empty must know the bytes just taken
    # out of it have not shipped yet.
    p.busy = True
    try:
        try:
            data = _os_read(p.rfd, 1 << 16)
        except InterruptedError:
            return True
        except OSError:
            return False
        if not data:
            return False
        if p.carry:
            data = p.carry + data
            p.carry = b""
        fences = 0
        if b"\x00" in data:
            marker = _FENCE
            i = data.find(marker)
            while i >= 0:
                data = data[:i] + data[i + len(marker):]
                fences += 1
                i = data.find(marker)
            k = _partial_marker_tail(data, marker)
            if k:
                p.carry = data[-k:]
                data = data[:-k]
        if p.decoder is None:
            import codecs
            p.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = p.decoder.decode(data)
        if text:
            _write_event(_text_frame(p.chan, None, text))
        if fences:
            p.seen += fences
            if p.wake.locked():
                try:
                    p.wake.release()
                except RuntimeError:
                    pass
    finally:
        p.busy = False
    return True


def _pump_forever(pumps):
    """One thread reads both pipes, so fd-level stdout and stderr keep the order in which they
    became readable (two readers would race each other to the protocol). Without select.poll
    (Windows) each pipe gets a thread of its own. A pump must outlive any error: a dead pump would
    leave its pipe to fill up and the cell writing to it to block."""
    _block_sigint()
    try:
        import select
        poller = select.poll()
    except (ImportError, AttributeError):
        if len(pumps) > 1:
            for p in pumps[1:]:
                _thread.start_new_thread(_pump_forever, ([p],))
            pumps = pumps[:1]
        poller = None
    by_fd = {}
    turn = 0
    for p in pumps:
        by_fd[p.rfd] = p
        if poller is not None:
            poller.register(p.rfd, select.POLLIN)
    while by_fd:
        try:
            ready = poller.poll() if poller is not None else [(fd, 1) for fd in by_fd]
        except InterruptedError:
            continue
        except Exception:
            ready = []
        if len(ready) > 1:
            # Both pipes filled while the last chunk shipped: which was written first is not
            # recorded anywhere, so the one read least recently goes first (interleaved writers
            # alternate; a reader that always took fd 1 first would push stderr behind stdout).
            ready.sort(key=lambda fdm: by_fd[fdm[0]].turn if fdm[0] in by_fd else 0)
        for fd, _mask in ready:
            p = by_fd.get(fd)
            if p is None:
                continue
            turn += 1
            p.turn = turn
            try:
                alive = _pump_read(p)
            except Exception:
                p.busy = False
                alive = True
            if not alive:
                del by_fd[fd]
                if poller is not None:
                    poller.unregister(fd)


def _fence(pumps, r):
    """Every byte a cell wrote to fds 1/2 ships before its done: write a marker, await it."""
    for name in ("__stdout__", "__stderr__"):
        f = getattr(sys, name, None)
        try:
            if f is not None:
                f.flush()
        except Exception:
            pass
    for s in (sys.stdout, sys.stderr):
        b = getattr(s, "_buffer", None)
        if b is not None:
            try:
                b.flush()
            except Exception:
                pass
    if "ctypes" in sys.modules:  # C stdio buffers of extension code
        try:
            _libc_fflush()
        except Exception:
            pass
    unread = None  # the pipes holding bytes: one poll for both
    if _out.fence_poll is not None:
        try:
            unread = [fd for fd, _ in _out.fence_poll.poll(0)]
        except OSError:
            pass
    waits = []
    for p in pumps:
        if unread is not None and p.rfd not in unread and not p.busy:
            continue  # pipe empty and pump idle: everything written so far has shipped
        target = p.seen + 1
        try:
            _os_write(p.wfd, _FENCE)
        except OSError:
            continue
        waits.append((p, target))
    deadline = _monotonic() + 5.0
    for p, target in waits:
        while p.seen < target:
            left = deadline - _monotonic()
            if left <= 0:
                break
            p.wake.acquire(True, min(left, 0.5))


def _libc_fflush():
    import ctypes
    if _out.libc is None:
        _out.libc = ctypes.CDLL(None)
    _out.libc.fflush(None)


# ---------------------------------------------------------------------------------------------
# Requests: the queue, the active request, interrupts [_rq, _cell]
# ---------------------------------------------------------------------------------------------

class _Req(object):
    __slots__ = ("msg", "id", "type", "kbi", "pending", "in_user", "task", "done", "failed",
                 "cancelled", "result", "filename", "file_prev")

    def __init__(self, msg):
        self.msg = msg
        self.id = msg.get("id")
        self.type = msg.get("type")
        self.kbi = False  # an interrupt targets this request
        self.pending = False  # an interrupt that could not be raised yet: raised at the next checkpoint
        self.in_user = False  # running user code (or waiting on it): a KeyboardInterrupt may land here
        self.task = None
        self.done = False
        self.failed = False
        self.cancelled = False  # its task was cancelled on behalf of an interrupt
        self.result = None  # the result frame, written together with done (one syscall)
        self.filename = None  # execute's optional filename: __file__ while the cell runs
        self.file_prev = _NOTHING


class _Requests(object):
    """The queued requests: the one running, those waiting, and how interrupts reach them."""

    __slots__ = ("lock", "active", "queued", "q", "started", "sig_for", "use_signal", "stop", "serving")

    def __init__(self):
        self.lock = _thread.allocate_lock()  # guards active and queued
        self.active = None  # the request running now
        self.queued = []  # read, not begun: an interrupt may park on one
        self.q = None  # the _queue.SimpleQueue the serve loop takes them from
        self.started = 0  # requests begun so far (the batch timer watches it)
        self.sig_for = None  # the request a SIGINT sent by the reader thread is meant for
        self.use_signal = True  # interrupts SIGINT the main thread (else: cancel the cell's task)
        self.stop = False  # a shutdown ran: the serve loop ends
        self.serving = False  # this process serves the protocol (awrepl.is_active())


_rq = _Requests()


def _enqueue(r):
    with _rq.lock:
        _rq.queued.append(r)
    _rq.q.put(r)
    lp = _aio.loop
    if lp is not None:
        try:
            lp.call_soon_threadsafe(_aio.wake)
        except RuntimeError:
            pass


def _begin(r):
    """Queued request r becomes the active one; False when a parked interrupt has answered it."""
    if not _wd.started:
        _start_watchdog()  # not before ready: spawning it is not on the path to the handshake
    if _wd.sh_pids:
        _reap_sh()
    with _rq.lock:
        _rq.active = r
        try:
            _rq.queued.remove(r)
        except ValueError:
            pass
    if r.type == "execute":
        _out.live = r.id
        _fast_switching(True)
    _rq.started += 1
    if _timer_wake.locked():
        _timer_wake.release()  # the batch timer ticks while requests come
    if not r.kbi or r.type == "shutdown":  # a shutdown runs all the same
        return True
    if r.type == "execute":
        _fail(r, KeyboardInterrupt())
        _finish(r)
    else:
        _finish(r, {"reason": "interrupted"}, "error")
    return False


class _Cell(object):
    """The cells: how many ran, the running one's display state, the switch interval it replaced."""

    __slots__ = ("count", "display", "saved_switch")

    def __init__(self):
        self.count = 0  # names the next cell: <cell-N>
        self.display = None
        self.saved_switch = None


_cell = _Cell()
CELL_SWITCH_INTERVAL = 0.001


def _fast_switching(on):
    """While a cell runs, the GIL changes hands every 1 ms instead of 5: the reader thread must win
    it from a busy cell to deliver an interrupt. The user's own setting is restored afterwards
    (and left alone if the cell changed it)."""
    if on:
        cur = sys.getswitchinterval()
        if cur > CELL_SWITCH_INTERVAL:
            _cell.saved_switch = cur
            sys.setswitchinterval(CELL_SWITCH_INTERVAL)
    elif _cell.saved_switch is not None:
        if abs(sys.getswitchinterval() - CELL_SWITCH_INTERVAL) < 1e-7:
            sys.setswitchinterval(_cell.saved_switch)
        _cell.saved_switch = None


def _now_interrupt(rid, msg):
    """interrupt (at once): route it to the running request, or park it on a queued one."""
    with _rq.lock:
        a = _rq.active
        target = None
        if rid is None:
            target = a if a is not None else (_rq.queued[0] if _rq.queued else None)
        elif a is not None and a.id == rid:
            target = a
        else:
            for q in _rq.queued:
                if q.id == rid:
                    target = q
                    break
        if target is None:
            return  # finished or unknown: dropped
        target.kbi = True
        if target is not a:
            return  # parked: delivered when it becomes active
    if _rq.use_signal:
        _rq.sig_for = a
        _signal.pthread_kill(_main_ident, _signal.SIGINT)
    else:
        # No pthread_kill (Windows): cancel the cell's task on the loop. Cells suspended at an
        # await interrupt normally; cells in synchronous code cannot be broken.
        lp = _aio.loop
        if lp is not None and a.task is not None:
            a.cancelled = True
            lp.call_soon_threadsafe(_cancel_req, a)
        else:
            a.pending = True


def _cancel_req(r):
    t = r.task
    if t is not None and not t.done():
        t.cancel()


def _current_task():
    try:
        return _aio.asyncio.current_task(_aio.loop)
    except Exception:
        return None


def _on_sigint(signum, frame):
    """Main thread. Raise KeyboardInterrupt where it belongs, or cancel the cell's task."""
    if _out.forked:
        raise KeyboardInterrupt
    tok = _budget.expired
    if tok is not None:  # sent by a repr budget (_repr_budget): ends that one repr, nothing else
        _budget.expired = None
        a = _rq.active
        if a is not None and not a.kbi:
            if tok is _budget.clock[0] and a.in_user and not _wlock_owned():
                raise _ReprTimedOut()
            return  # that repr has finished since
    r = _rq.active
    s = _rq.sig_for
    _rq.sig_for = None
    if r is None or r.done:
        return  # nothing running: ignored
    if s is not None and s is not r:
        return  # meant for a request that has finished since
    r.kbi = True
    if _wlock_owned():
        _out.deferred = True  # mid-frame: retried once the frame is written
        return
    t = r.task
    cur = t if _aio.loop is None or t is None else _current_task()
    if cur is t:  # no loop, or the cell's own task holds the thread: raise here if its code runs
        if r.in_user:
            r.pending = False
            raise KeyboardInterrupt
        r.pending = True
        return
    # The cell is suspended at an await, or another task holds the thread: raising here would
    # land in the wrong context, so cancel the cell's task (reported as KeyboardInterrupt).
    if not t.done():
        r.cancelled = True
        _aio.loop.call_soon_threadsafe(_cancel_req, r)
    else:
        r.pending = True
    if cur is not None and cur is not _aio.dispatcher:
        raise KeyboardInterrupt  # a background task blocking the only thread dies with it


def _checkpoint(r):
    if r.pending:
        r.pending = False
        raise KeyboardInterrupt


# ---------------------------------------------------------------------------------------------
# Errors: tracebacks without runtime frames, the repeat line, call-shape remedies
# ---------------------------------------------------------------------------------------------

_fail_history = {}


def _strip_tb(tb):
    while tb is not None and tb.tb_frame.f_globals is _G:
        tb = tb.tb_next
    cur = tb
    while cur is not None:
        nxt = cur.tb_next
        while nxt is not None and nxt.tb_frame.f_globals is _G:
            nxt = nxt.tb_next
        try:
            cur.tb_next = nxt
        except Exception:
            pass
        cur = nxt
    return tb


def _strip_exc(e, seen=None):
    if seen is None:
        seen = set()
    if e is None or id(e) in seen:
        return
    seen.add(id(e))
    try:
        e.__traceback__ = _strip_tb(e.__traceback__)
    except Exception:
        pass
    _strip_exc(e.__cause__, seen)
    _strip_exc(e.__context__, seen)


def _format_exc(e):
    _strip_exc(e)
    try:
        _flush_sources()
        return _imp("traceback").format_exception(type(e), e, e.__traceback__)
    except Exception:  # traceback's own code sees the user's builtins: a cell may have broken them
        return _plain_tb(e)


def _plain_tb(e):
    """The traceback module's layout, without it: frames, their source lines, the message."""
    lines = []
    tb = e.__traceback__
    if tb is not None:
        lines.append("Traceback (most recent call last):\n")
    cache = getattr(_mods.get("linecache"), "cache", None)
    while tb is not None:
        co = tb.tb_frame.f_code
        lines.append('  File "%s", line %s, in %s\n' % (co.co_filename, tb.tb_lineno, co.co_name))
        entry = cache.get(co.co_filename) if type(cache) is dict else None
        try:
            src = entry[2][tb.tb_lineno - 1].strip()
        except Exception:
            src = ""
        if src:
            lines.append("    %s\n" % src)
        tb = tb.tb_next
    msg = _safe_str(e)
    lines.append("%s: %s\n" % (type(e).__name__, msg) if msg else "%s\n" % type(e).__name__)
    return lines


_mods = {}


def _imp(name):
    """A module the runtime uses, imported once and kept: a cell that later sets
    sys.modules[name] = None (or deletes it) does not take it away from the runtime."""
    m = _mods.get(name)
    if m is None:
        __import__(name)  # the private builtins' __import__: the user's replacement is not seen
        m = _mods[name] = sys.modules[name]
    return m


def _safe_str(e):
    try:
        return str(e)
    except Exception:
        return "<unprintable %s>" % type(e).__name__


def _send_error(rid, e, extra_lines=(), prefix=None):
    tb = _format_exc(e)
    tb.extend(extra_lines)
    _send({"event": "error", "id": rid, "ename": type(e).__name__, "evalue": _safe_str(e),
           "traceback": tb}, prefix)


def _fail(r, e, code=None):
    r.failed = True
    try:
        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, e.__traceback__
    except Exception:
        pass
    extra = []
    if code is not None and not isinstance(e, KeyboardInterrupt):
        try:
            extra.extend(_remedies(e))
            extra.extend(_loop_hint(e))
            extra.extend(_missing_module_hint(e, r))
        except Exception:
            pass
        key = (hash(code), len(code))  # not the code itself: a failing 10 MB cell stays small here
        prev = _fail_history.get(key)
        if prev is not None:
            extra.append("[awrepl] This identical cell already failed %d time%s before (%s); "
                         "running it again unchanged will fail the same way.\n"
                         % (prev[0], "" if prev[0] == 1 else "s", prev[1]))
        if len(_fail_history) > 256:
            _fail_history.clear()
        _fail_history[key] = ((prev[0] if prev else 0) + 1, type(e).__name__)
    prefix, r.result = r.result, None  # a result already made still precedes the error
    _send_error(r.id, e, extra, prefix)


_NESTED_LOOP_ERRORS = ("cannot be called from a running event loop", "event loop is already running",
                       "while another loop is running")


def _loop_hint(e):
    if isinstance(e, RuntimeError) and any(m in _safe_str(e) for m in _NESTED_LOOP_ERRORS):
        return ["[awrepl] awrepl runs cells on a persistent event loop: use `await main()` at top level "
                "instead of `asyncio.run(main())` (a cell with no top-level await may call "
                "asyncio.run() directly).\n"]
    return []


def _protocol_error(rid, message):
    _send({"event": "error", "id": rid, "ename": "ProtocolError", "evalue": message,
           "traceback": ["ProtocolError: %s\n" % message]})


# ---------------------------------------------------------------------------------------------
# Execution: compiling a cell, top-level await, the trailing value, finishing a request
# ---------------------------------------------------------------------------------------------

_CO_COROUTINE = 0x80
_TLA = 0x2000  # PyCF_ALLOW_TOP_LEVEL_AWAIT
_AST_ONLY = 0x400  # PyCF_ONLY_AST
_ns = None
_NOTHING = object()


class _Prep(object):
    __slots__ = ("body", "tail", "awaited", "needs_loop", "code", "outside_loop")


_pending_sources = []  # cell sources waiting for linecache (importing it costs re and tokenize)


def _register_source(filename, code):
    _pending_sources.append((filename, code))
    if "linecache" in _mods or sys.modules.get("linecache") is not None:
        _flush_sources()


_registered_sources = []  # (filename, size), oldest first
SOURCES_KEPT_BYTES = 64 << 20  # cell sources kept for tracebacks; the oldest go first beyond this
_sources_bytes = [0]


def _flush_sources(linecache=None):
    if linecache is None:
        try:
            linecache = _imp("linecache")
        except Exception:  # taken away by a cell before the runtime needed it: sources wait
            return
    while _pending_sources:
        filename, code = _pending_sources.pop(0)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        _registered_sources.append((filename, len(code)))
        _sources_bytes[0] += len(code)
    while _sources_bytes[0] > SOURCES_KEPT_BYTES and len(_registered_sources) > 1:
        filename, size = _registered_sources.pop(0)
        linecache.cache.pop(filename, None)
        _sources_bytes[0] -= size


class _LinecacheHook(object):
    """A meta-path finder that fills linecache with the pending cell sources the moment anything
    imports it (`import inspect` in a cell, then inspect.getsource of an earlier cell's function)."""

    def find_spec(self, name, path=None, target=None):
        if name != "linecache":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _AfterImportLoader(spec.loader, _linecache_imported)
        return spec


def _linecache_imported(module):
    _mods["linecache"] = module
    _flush_sources(module)


def _mentions_asyncio(co):
    if "asyncio" in co.co_names or "asyncio" in co.co_varnames:
        return True
    for c in co.co_consts:
        if type(c) is type(co) and _mentions_asyncio(c):
            return True
    return False


def _prepare(code, filename=None):
    _cell.count += 1
    fn = filename or "<cell-%d>" % _cell.count
    _register_source(fn, code)  # the user's text: tracebacks show a habit line as it was typed
    src = _habits_to_python(code)
    p = _Prep()
    p.code = code
    p.awaited = False  # the last line is `await v`: its value is final, never awaited again
    if len(src) < 2000 and "await" not in src:
        # One expression (1+1, f(x), name): compiled as is, no AST round trip.
        try:
            p.tail = compile(src, fn, "eval", _TLA, dont_inherit=True)
        except SyntaxError:
            pass
        else:
            p.body = None
            p.needs_loop = "asyncio" in sys.modules or bool(p.tail.co_flags & _CO_COROUTINE) \
                or _mentions_asyncio(p.tail)
            return _outside_loop(p)
    _ast = _imp("_ast")
    tree = compile(src, fn, "exec", _AST_ONLY | _TLA, dont_inherit=True)
    body = tree.body
    p.tail = None
    if body and type(body[-1]) is _ast.Expr:
        expr = body.pop().value
        p.awaited = type(expr) is _ast.Await
        if "await" in src:
            # `await v` anywhere in the last line, that line's own `await v` included, is awaited
            # in the cell's frame (so a traceback keeps the line) and returns a settled v unchanged.
            _settle_awaits(_ast, [expr])
        p.tail = compile(_ast.Expression(expr), fn, "eval", _TLA, dont_inherit=True)
    if "await" in src:
        _settle_awaits(_ast, body)
        _ns.setdefault(_SETTLE_NAME, _settle)
    p.body = compile(_ast.Module(body, []), fn, "exec", _TLA, dont_inherit=True) if body else None
    needs = "asyncio" in sys.modules
    for c in (p.body, p.tail):
        if c is not None and not needs:
            needs = bool(c.co_flags & _CO_COROUTINE) or _mentions_asyncio(c)
    p.needs_loop = needs
    return _outside_loop(p)


# Calls that start an event loop of their own, which Python refuses inside a running one.
_LOOP_RUNNERS = ("asyncio.run(", "run_until_complete(", "run_forever(")


def _outside_loop(p):
    """A cell that calls asyncio.run() (or runs a loop of its own) and has no top-level await runs
    as a script would: without a loop (none exists yet), or with the session's loop hidden while
    its code runs (see _run_outside_loop)."""
    p.outside_loop = False
    code = p.code
    if any(c is not None and c.co_flags & _CO_COROUTINE for c in (p.body, p.tail)):
        return p
    for runner in _LOOP_RUNNERS:
        if runner in code:
            p.outside_loop = True
            p.needs_loop = False
            break
    return p


def _run_outside_loop(p):
    """Run p on the loop's thread as if no loop were running: asyncio.run() makes and closes a loop
    of its own. The session's loop is paused meanwhile, as it is during any synchronous cell."""
    events = _aio.asyncio.events
    running = events._get_running_loop()
    events._set_running_loop(None)
    try:
        if p.body is not None:
            exec(p.body, _ns)
        return eval(p.tail, _ns) if p.tail is not None else None
    finally:
        events._set_running_loop(running)
        try:
            _aio.asyncio.set_event_loop(_aio.loop)  # asyncio.run() ends with set_event_loop(None)
        except Exception:
            pass


_SETTLE_NAME = "__awrepl_settle__"


class _Settled(object):
    """A plain value made awaitable: `await` on it returns it unchanged."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __await__(self):
        return self.value
        yield  # noqa: unreachable; makes __await__ a generator


def _settle(v):
    return v if _is_awaitable(v) else _Settled(v)


def _settle_awaits(_ast, nodes):
    """Rewrite the cell's own `await X` (not those inside functions) as `await settle(X)`, so
    awaiting a value that is already settled (`x = await _`) returns it instead of TypeError."""
    skip = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.Lambda, _ast.ClassDef)
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, skip):
            continue
        if type(node) is _ast.Await:
            inner = node.value
            call = _ast.Call(_ast.Name(_SETTLE_NAME, _ast.Load()), [inner], [])
            for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                v = getattr(inner, attr, None)
                if v is not None:
                    setattr(call, attr, v)
                    setattr(call.func, attr, v)
            node.value = call
            stack.append(inner)
            continue
        for field in node._fields:
            v = getattr(node, field, None)
            if isinstance(v, list):
                stack.extend(x for x in v if isinstance(x, _ast.AST))
            elif isinstance(v, _ast.AST):
                stack.append(v)


def _is_awaitable(v):
    if v is None or type(v) in (int, str, float, bool, list, dict, tuple):
        return False
    t = type(v)
    if t.__name__ == "coroutine":
        return True
    if hasattr(t, "__await__"):
        return True
    gi = getattr(v, "gi_code", None)
    return gi is not None and bool(getattr(gi, "co_flags", 0) & 0x100)


def _should_await(v):
    """A bare trailing value is awaited when awaitable (`f(x)` and `await f(x)` agree), except a
    started Task or a handle marked __awrepl_keep__: awaiting those would turn a background launch
    into a blocking wait."""
    if not _is_awaitable(v):
        return False
    a = sys.modules.get("asyncio")
    if a is not None and isinstance(v, a.Task):
        return False
    return not getattr(v, "__awrepl_keep__", False)


def _complete(r, value):
    if value is None:
        return
    _ns["_"] = value
    _checkpoint(r)
    r.in_user = True
    try:
        text = repr(value)
        if type(value) not in _PLAIN_TYPES:
            _show_value(value)  # its richer forms (html, png, ...) as a display entry
        elif type(value) in (list, tuple) and "matplotlib.artist" in sys.modules:
            _show_figures()  # plt.plot()'s list of lines: its figure now, to know it was shown
        if _shown_plot(value):
            return  # the image says what `<Figure size 640x480 with 1 Axes>` would
    finally:
        r.in_user = False
    r.result = _text_frame("result", r.id, text)


def _finish(r, extra=None, status=None):
    """Drain both channels, then the one done of this request."""
    if r.done:
        return
    if r.type == "execute":
        _end_cell_display(r)  # figures still open are shown (and closed)
        try:
            r.in_user = True  # the drain is still interrupt-targetable
            try:
                _checkpoint(r)
                _fence(_out.pumps, r)
            finally:
                r.in_user = False
        except KeyboardInterrupt as e:
            if not r.failed:
                _fail(r, e)
        if r.pending and not r.failed:
            r.pending = False
            _fail(r, KeyboardInterrupt())
        _fast_switching(False)
        if r.filename is not None:
            _end_cell_file(r)
    msg = {"event": "done", "id": r.id, "status": status or ("error" if r.failed else "ok")}
    if extra:
        msg.update(extra)
    d = _cell.display
    if r.type == "execute" and d.dropped and d.rid == r.id:
        msg["display_dropped"] = d.dropped
    _out.live = None
    r.done = True
    if _inbound:
        _inbound.pop(r.id, None)  # a restore that never ran (interrupted while queued)
    if r.id is None:
        data = b""
    elif len(msg) == 3 and type(r.id) is str:  # the usual done, built directly
        data = ('{"event":"done","id":%s,"status":"%s"}\n'
                % (_esc_ascii(r.id), msg["status"])).encode("ascii")
    else:
        data = _frame(msg)
    if r.result is not None:
        data = r.result + data
    _close_batch(data)
    with _rq.lock:
        if _rq.active is r:
            _rq.active = None


def _start_cell(r):
    """The execute request's code, with its optional filename applied (__file__ is set in the
    namespace while the cell runs); None when the request is malformed and has been answered."""
    code = r.msg.get("code")
    if not isinstance(code, str):
        _bad_request(r, "execute needs a string 'code'")
        return None
    bad = _display_begin(r)
    if bad is not None:
        _bad_request(r, bad)
        return None
    filename = r.msg.get("filename")
    if filename is not None:
        if not isinstance(filename, str) or not filename or "\x00" in filename:
            _bad_request(r, "execute 'filename' must be a non-empty string, got %r" % (filename,))
            return None
        r.filename = filename
        r.file_prev = _ns.get("__file__", _NOTHING)
        _ns["__file__"] = filename
    return code


def _end_cell_file(r):
    """Put back the __file__ the cell found, unless the cell set its own."""
    if _ns.get("__file__") is r.filename:
        if r.file_prev is _NOTHING:
            _ns.pop("__file__", None)
        else:
            _ns["__file__"] = r.file_prev


def _exec_sync(r, p):
    """Execute prepared cell p without an event loop; hands over to the loop when it needs one."""
    if p.needs_loop:
        return _go_loop(r, _cell_async(r, p))
    try:
        _checkpoint(r)
        value = None
        r.in_user = True
        try:
            if p.body is not None:
                exec(p.body, _ns)
            if p.tail is not None:
                value = eval(p.tail, _ns)
        finally:
            r.in_user = False
        if p.tail is not None and not p.awaited and _should_await(value):
            return _go_loop(r, _cell_async(r, p, value))
        _complete(r, value)
    except BaseException as e:
        _fail(r, e, p.code)
    _finish(r)


async def _cell_async(r, p, value=_NOTHING):
    try:
        try:
            _checkpoint(r)
            r.in_user = True
            try:
                if value is _NOTHING and p.outside_loop:
                    value = _run_outside_loop(p)
                elif value is _NOTHING:
                    value = None
                    if p.body is not None:
                        v = eval(p.body, _ns)
                        if p.body.co_flags & _CO_COROUTINE:
                            await v
                    if p.tail is not None:
                        value = eval(p.tail, _ns)
                        if p.tail.co_flags & _CO_COROUTINE:
                            value = await value
                if p.tail is not None and not p.awaited and _should_await(value):
                    value = await value
            finally:
                r.in_user = False
            _complete(r, value)
        except BaseException as e:
            if r.cancelled and isinstance(e, _aio.asyncio.CancelledError):
                k = KeyboardInterrupt()
                k.__traceback__ = e.__traceback__
                e = k
            _fail(r, e, p.code)
        _finish(r)
    except BaseException as e:  # never leave a request without its done
        if not r.done:
            try:
                _fail(r, e)
            finally:
                _finish(r)


# ---------------------------------------------------------------------------------------------
# Notebook habits: !cmd, %pip, %cd, %env, %time on lines of their own, as IPython reads them; the
# hint for a missing module
# ---------------------------------------------------------------------------------------------

# A line is a habit where IPython's input transformer sees an escape: its first character, after
# indentation, starts a logical line (not inside a string, brackets or a backslash continuation).
# Each becomes one call of _HABIT_NAME on the same line, its continuation lines left empty, so the
# cell keeps its line numbers and its source in tracebacks is the user's own text.
HABITS = ("!cmd", "%pip", "%cd", "%env", "%time")
_HABIT_NAME = "__awrepl_habit__"
_HABIT_MAGICS = ("pip", "cd", "env", "time")
CHILD_STOP_SECONDS = 0.5  # an interrupted !cmd or %pip: SIGINT first, SIGKILL after this


class UsageError(Exception):
    """A habit line that cannot run (IPython's name for it)."""


def _habit_candidate(code):
    """True when some '!' or '%' is the first character of a line after indentation: the cheap
    test that lets every other cell skip the scan (two `in` tests for a cell with neither)."""
    for ch in ("!", "%"):
        i = code.find(ch)
        while i >= 0:
            start = code.rfind("\n", 0, i) + 1
            if not code[start:i].strip(" \t\f"):
                return True
            i = code.find(ch, i + 1)
    return False


def _habit_lines(code):
    """[(offset, end, line number)] of the habit lines: offset of the '!' or '%', end of the last
    physical line it spans (backslash continuations joined, as IPython does)."""
    found = []
    i, n, line, depth = 0, len(code), 1, 0
    logical = True  # the next character that is not indentation starts a logical line
    while i < n:
        c = code[i]
        if logical and c in " \t\f":
            i += 1
            continue
        if logical and depth == 0 and c in "!%":
            start, first = i, line
            while True:
                j = code.find("\n", i)
                if j < 0:
                    end = i = n
                    break
                end = j
                continued = code[i:j].rstrip("\r").endswith("\\")
                i = j + 1
                line += 1
                if not continued or i >= n:
                    break
            found.append((start, end, first))
            continue
        logical = False
        if c == "\n":
            line += 1
            i += 1
            logical = depth == 0
        elif c == "#":
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif c == "\\" and code.startswith("\n", i + 1):
            i += 2
            line += 1
        elif c == "\\" and code.startswith("\r\n", i + 1):
            i += 3
            line += 1
        elif c in "([{":
            depth += 1
            i += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
            i += 1
        elif c in "'\"":
            q = c * 3 if code.startswith(c * 3, i) else c
            j = i + len(q)
            while j < n:
                d = code[j]
                if d == "\\":
                    if code.startswith("\n", j + 1):
                        line += 1
                    j += 2
                    continue
                if code.startswith(q, j):
                    j += len(q)
                    break
                if d == "\n":
                    if len(q) == 1:
                        break  # an unterminated string: compile() says so
                    line += 1
                j += 1
            i = j
        else:
            i += 1
    return found


def _habit_call(text, lineno, indent, strict):
    """The Python call standing in for one habit line (its text from the escape on, which is
    `indent` characters into its line)."""
    parts = text.split("\n")
    body = " ".join([p.rstrip("\r").rstrip()[:-1] for p in parts[:-1]] + [parts[-1].rstrip()])
    col = 0
    if body.startswith("!") and not body.startswith("!!"):
        kind, arg = "!", body[1:].strip()
    else:
        name, sep, rest = body[1:].partition(" ")
        kind, arg = name, rest.strip()
        col = 1 + len(name) + len(sep) + len(rest) - len(rest.lstrip())  # where the statement starts
        if body.startswith("%") and name in _HABIT_MAGICS:
            pass
        elif strict:
            raise UsageError("line %d: %s is not supported here; a cell understands %s, each on a line "
                             "of its own" % (lineno, body.split(" ")[0][:40], ", ".join(HABITS)))
    return "%s(%r, %r, %d, %d)%s" % (_HABIT_NAME, kind, arg, lineno, indent + col, "\n" * (len(parts) - 1))


def _habits_to_python(code, strict=True):
    """The cell with each habit line as a call (code itself when it has none); UsageError for a
    '%' line that is not a supported magic (strict), before any of the cell runs."""
    if ("!" not in code and "%" not in code) or not _habit_candidate(code):
        return code
    found = _habit_lines(code)
    if not found:
        return code
    out, pos = [], 0
    for start, end, lineno in found:
        out.append(code[pos:start])
        out.append(_habit_call(code[start:end], lineno, start - code.rfind("\n", 0, start) - 1, strict))
        pos = end
    out.append(code[pos:])
    _ns[_HABIT_NAME] = _habit
    return "".join(out)


def _habit_syntax_error(e, code):
    """A SyntaxError on a habit line (a `!ls` where a block needs its indentation) shows the line
    as the user typed it, not the call standing in for it."""
    if isinstance(e, SyntaxError) and isinstance(e.text, str) and e.text.lstrip().startswith(_HABIT_NAME + "("):
        lines = code.split("\n")
        if isinstance(e.lineno, int) and 0 < e.lineno <= len(lines):
            line = lines[e.lineno - 1].rstrip("\r")
            e.text = line + "\n"
            e.offset = len(line) - len(line.lstrip()) + 1
            if hasattr(e, "end_offset"):
                e.end_offset = len(line) + 1
    return e


def _habit(kind, arg, lineno, col):
    """One habit line, run in the cell (interruptible as the cell is; its errors are the cell's)."""
    if kind == "!":
        status = _run_child(arg, True)
        _ns["_exit_code"] = status  # IPython's name for it
        if status:
            _habit_note("!%s %s" % (_clip(arg, 60), _exit_text(status)))
        return None
    if kind == "pip":
        return _pip(arg)
    if kind == "cd":
        return _cd(arg)
    if kind == "env":
        return _env(arg)
    return _time_statement(arg, lineno, col, sys._getframe(1).f_code.co_filename)


def _clip(text, n):
    return text if len(text) <= n else text[:n - 3] + "..."


def _exit_text(status):
    return "was killed by signal %d" % -status if status < 0 else "exited with status %d" % status


def _habit_note(text):
    sys.stderr.write("[awrepl] %s\n" % text)


def _run_child(cmd, shell):
    """Run a command with the cell's fds (its output is captured like any other); its exit status.
    An interrupt stops the command and everything it started (SIGINT, then SIGKILL), then ends the cell."""
    subprocess = _imp("subprocess")
    _flush_batch()  # what the cell printed so far goes first
    if shell:
        cmd = ["/bin/sh", "-c", cmd]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
    try:
        return p.wait()
    except BaseException:
        _stop_tree(p)
        raise


def _child_pids(pid):
    """pid and its descendants (Linux /proc; just pid elsewhere)."""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task)) as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            pass
    return pids


def _stop_tree(p):
    """SIGINT to the command and its descendants, SIGKILL to whatever is left after a grace."""
    pids = _child_pids(p.pid)
    for pid in reversed(pids):
        _kill_quietly(pid, _signal.SIGINT)
    try:
        p.wait(CHILD_STOP_SECONDS)
    except Exception:
        pass
    for pid in _child_pids(p.pid)[1:] + pids[1:]:  # its children, also those it left behind
        _kill_quietly(pid, _signal.SIGKILL)
    if p.returncode is None:
        _kill_quietly(p.pid, _signal.SIGKILL)
        try:
            p.wait(CHILD_STOP_SECONDS)
        except Exception:
            pass


def _kill_quietly(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _externally_managed():
    """The path of this interpreter's EXTERNALLY-MANAGED marker (PEP 668: pip refuses to install
    into it), or None; a virtual environment never is."""
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        return None
    try:
        path = os.path.join(_imp("sysconfig").get_path("stdlib"), "EXTERNALLY-MANAGED")
    except Exception:
        return None
    return path if os.path.isfile(path) else None


def _interpreter():
    """The interpreter the session runs: its real path (and the name it was started by, when that
    is a link), version, and virtual environment."""
    exe = sys.executable
    real = os.path.realpath(exe)
    venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    return "%s%s (Python %d.%d.%d%s)" % ((exe + " \u2192 " if real != exe else ""), real, sys.version_info[0], sys.version_info[1],
                                          sys.version_info[2], ", virtual environment %s" % sys.prefix if venv else "")


_SANDBOX_NETWORK = None  # a sandboxed worker's network, "none" | "allow" | "full" (AWREPL_SANDBOX_NETWORK)


def _pip(arg):
    """%pip ARGS: this interpreter's own pip (sys.executable -m pip), never another Python's."""
    argv = [sys.executable, "-m", "pip"] + _imp("shlex").split(arg)
    status = _run_child(argv, False)
    _imp("importlib").invalidate_caches()  # the next import sees what pip installed
    if status:
        marker = _externally_managed()
        if marker is not None:
            _habit_note("pip %s: this session's Python, %s, is externally managed (PEP 668, %s), so pip "
                        "will not install into it; start the session in a virtual environment with "
                        "--venv DIR" % (_exit_text(status), _interpreter(), marker))
        if _SANDBOX_NETWORK == "none":
            _habit_note("pip %s: this session's sandbox has no network; start it with --sandbox-net or "
                        "--sandbox-allow pypi.org --sandbox-allow files.pythonhosted.org (or install from "
                        "a local directory with --no-index --find-links DIR)" % _exit_text(status))
        elif marker is None:
            _habit_note("pip %s" % _exit_text(status))
    return None


def _cd(arg):
    """%cd DIR (no DIR: home; '-': the previous one, as OLDPWD says); prints where it is now."""
    if arg in ("", "~"):
        target = os.path.expanduser("~")
    elif arg == "-":
        target = os.environ.get("OLDPWD")
        if not target:
            raise UsageError("%cd -: there is no previous directory")
    else:
        target = os.path.expanduser(arg[1:-1] if len(arg) > 1 and arg[0] == arg[-1] and arg[0] in "'\"" else arg)
    try:
        old = os.getcwd()
    except OSError:
        old = None
    os.chdir(target)
    new = os.getcwd()
    if old is not None:
        os.environ["OLDPWD"] = old
    os.environ["PWD"] = new
    print(new)
    return None


def _env(arg):
    """%env: every variable; %env NAME: its value; %env NAME=VALUE (or NAME VALUE): sets it."""
    if not arg:
        for k in sorted(os.environ):
            print("%s=%s" % (k, os.environ[k]))
        return None
    if "=" in arg:
        name, _, value = arg.partition("=")
    elif " " in arg:
        name, _, value = arg.partition(" ")
    else:
        if arg not in os.environ:
            raise UsageError("%%env: the environment has no variable %r" % arg)
        return os.environ[arg]
    name, value = name.strip(), value.strip()
    if not name:
        raise UsageError("%%env: no name before the '=' in %r" % arg)
    os.environ[name] = value
    print("env: %s=%s" % (name, value))
    return None


def _format_seconds(s):
    if s >= 60:
        return "%dmin %ds" % (s // 60, s % 60)
    for unit, scale in (("s", 1.0), ("ms", 1e3), ("\u00b5s", 1e6), ("ns", 1e9)):
        if s * scale >= 1 or unit == "ns":
            return "%.3g %s" % (s * scale, unit)


def _time_statement(arg, lineno, col, filename):
    """%time STATEMENT: runs it in the namespace and prints CPU and wall time as IPython does; the
    value of an expression is returned (the cell's value when the line is its last). It is compiled
    at its own line and column, so a traceback points into the line as typed."""
    if not arg:
        raise UsageError("%time needs a statement to time")
    _ast = _imp("ast")
    src = "\n" * (lineno - 1) + arg
    try:
        tree, mode = _ast.parse(src, filename, "eval"), "eval"
    except SyntaxError:
        tree, mode = _ast.parse(src, filename, "exec"), "exec"
    for node in _ast.walk(tree):
        if getattr(node, "lineno", None) == lineno:
            node.col_offset += col
            if getattr(node, "end_lineno", None) == lineno:
                node.end_col_offset += col
    code = compile(tree, filename, mode, dont_inherit=True)
    t0, c0 = _monotonic(), _cpu_times()
    value = eval(code, _ns)
    wall, c1 = _monotonic() - t0, _cpu_times()
    user, system = c1[0] - c0[0], c1[1] - c0[1]
    print("CPU times: user %s, sys: %s, total: %s\nWall time: %s" % (
        _format_seconds(user), _format_seconds(system), _format_seconds(user + system), _format_seconds(wall)))
    return value


def _cpu_times():
    """(user, system) CPU seconds of this process: getrusage's microseconds where it exists."""
    try:
        ru = _imp("resource").getrusage(0)  # RUSAGE_SELF
        return ru.ru_utime, ru.ru_stime
    except Exception:
        t = os.times()
        return t[0], t[1]


# Import names whose package is called something else (what `%pip install` needs).
_PACKAGE_NAMES = {"sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "Pillow", "yaml": "PyYAML",
                  "bs4": "beautifulsoup4", "skimage": "scikit-image", "dateutil": "python-dateutil",
                  "dotenv": "python-dotenv", "jwt": "PyJWT", "serial": "pyserial", "attr": "attrs"}


def _missing_module_hint(e, r):
    """One line for a ModuleNotFoundError of a top-level module the cell itself imported: which
    interpreter the session runs and how to install into it."""
    if type(e) is not ModuleNotFoundError or not isinstance(e.name, str) or "." in e.name or not e.name:
        return []
    tb, last = e.__traceback__, None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith("<frozen importlib") and tb.tb_frame.f_globals is not _G:
            last = name
        tb = tb.tb_next
    if last is None or not (last.startswith("<cell-") or last == r.filename):
        return []
    line = ("[awrepl] No module named %r in this session's Python, %s: install it with `%%pip install %s` in a "
            "cell (that interpreter's own pip)" % (e.name, _interpreter(), _PACKAGE_NAMES.get(e.name, e.name)))
    if _externally_managed() is not None:
        line += "; it is externally managed (PEP 668): start the session with --venv DIR to install packages"
    return [line + ".\n"]


# ---------------------------------------------------------------------------------------------
# The loop: the asyncio loop, created lazily (importing asyncio costs more than the interpreter's
# start-up); running queued requests [_aio]
# ---------------------------------------------------------------------------------------------

class _Loop(object):
    """The asyncio loop, created the first time a cell needs it."""

    __slots__ = ("loop", "asyncio", "wake", "dispatcher", "first")

    def __init__(self):
        self.loop = None
        self.asyncio = None  # the module, imported with the loop
        self.wake = None  # wakes the dispatcher: a request was queued
        self.dispatcher = None  # the task running requests in turn
        self.first = None  # the request handed over from the main thread, awaited first


_aio = _Loop()


def _ensure_loop():
    if _aio.loop is not None:
        return
    import asyncio
    import contextvars
    _aio.asyncio = asyncio
    lp = asyncio.new_event_loop()
    asyncio.set_event_loop(lp)
    ev = asyncio.Event()
    _aio.wake = ev.set
    _aio.dispatcher = contextvars.Context().run(lp.create_task, _dispatcher(ev))
    _aio.loop = lp
    _give_turn()  # the loop's thread never waits in a read: the reader thread reads from now on


def _drop_loop():
    a = _rq.active
    _aio.loop = _aio.dispatcher = _aio.first = None
    if a is not None and not a.done:
        a.failed = True
        _finish(a, {"reason": "the event loop was closed"})


def _go_loop(r, coro):
    _ensure_loop()
    r.task = _aio.loop.create_task(coro)  # the current context carries the cell id
    _aio.first = r


async def _await_req(r):
    try:
        await r.task
    except BaseException:
        pass
    if not r.done:  # cancelled before its first step
        if r.type == "execute":
            _fail(r, KeyboardInterrupt())
        _finish(r, status="error")


async def _dispatcher(ev):
    while True:
        if _aio.first is not None:
            r, _aio.first = _aio.first, None
            await _await_req(r)
            continue
        ev.clear()
        try:
            r = _rq.q.get_nowait()
        except _Empty:
            await ev.wait()
            continue
        try:
            await _dispatch_one(r)
        except BaseException as e:  # the dispatcher must outlive anything: it is the only one
            if not r.done:
                r.failed = True
                try:
                    _finish(r, {"reason": "internal error: %s: %s" % (type(e).__name__, _safe_str(e))})
                except BaseException:
                    pass
        if _rq.stop:
            _aio.loop.stop()
            return


async def _dispatch_one(r):
    if not _begin(r):
        return
    run = _runner(r)
    # A cell is prepared here, before any other task runs, and becomes a task of its own (its code
    # may await); any other request runs in a task too, so what it writes carries its id.
    coro = run(r) if run is _run_cell else _run_async(run, r)
    if coro is None:
        return
    ctx = _contextvars.copy_context()
    ctx.run(_cell_set, r.id)
    r.task = ctx.run(_aio.loop.create_task, coro)
    await _await_req(r)


async def _run_async(run, r):
    run(r)


def _handle_sync(r):
    """Mode without a loop: the main thread runs requests straight from the queue."""
    if not _begin(r):
        return
    token = _cell_set(r.id)
    try:
        _runner(r)(r)
    except BaseException as e:
        if not r.done and r.task is None:
            r.failed = True
            _finish(r, {"reason": "internal error: %s: %s" % (type(e).__name__, _safe_str(e))})
    finally:
        _cell_reset(token)


def _runner(r):
    """What runs queued request r: its `run` in _REQUESTS (see Dispatch); an unknown type fails."""
    row = _REQUESTS.get(r.type) if isinstance(r.type, str) else None
    return (row and row[1]) or _unknown_request


def _unknown_request(r):
    _bad_request(r, "unknown request type %r" % (r.type,))


def _bad_request(r, message):
    r.failed = True
    _protocol_error(r.id, message)
    _finish(r, {"reason": message}, "error")


def _run_cell(r):
    """execute. Without a loop the cell runs here (and hands over to the loop if it needs one); with
    one, it is prepared here and its coroutine returned, which the dispatcher runs as r's task."""
    code = _start_cell(r)
    if code is None:
        return None
    try:
        p = _prepare(code, r.filename)
    except BaseException as e:
        _fail(r, _habit_syntax_error(e, code), code)
        return _finish(r)
    return _exec_sync(r, p) if _aio.loop is None else _cell_async(r, p)


def _run_shutdown(r):
    """shutdown, in its turn: its done (when it has an id), then the serve loop ends."""
    _rq.stop = True
    _finish(r)
    if _aio.loop is not None:
        _aio.loop.stop()


class _RequestFailed(Exception):
    def __init__(self, reason, **extra):
        Exception.__init__(self, reason)
        self.reason = reason
        self.extra = extra


def _handler(fn):
    """A queued request answered in its done: fn(r) returns the fields the done adds (a "status"
    among them stands in for ok/error). _RequestFailed fails it with its reason and fields, an
    interrupt with "interrupted", any other exception with its text."""
    def run(r):
        try:
            _checkpoint(r)
            extra = fn(r)
        except _RequestFailed as e:
            r.failed = True
            return _finish(r, dict(e.extra, reason=e.reason))
        except KeyboardInterrupt:
            r.failed = True
            return _finish(r, {"reason": "interrupted"})
        except BaseException as e:
            r.failed = True
            return _finish(r, {"reason": "%s: %s" % (type(e).__name__, _safe_str(e))})
        status = extra.pop("status", None) if extra else None
        _finish(r, extra, status)
    return run


# ---------------------------------------------------------------------------------------------
# Namespace: the user namespace and the awrepl module (emit, host_request)
# ---------------------------------------------------------------------------------------------

_SKIP_NAMES = frozenset(["awrepl", "rlm", "mcp", "bash", "asyncio", "In", "Out", "get_ipython",
                         "exit", "quit", "open"])


def _fresh_namespace():
    ns = _user_module.__dict__
    ns.clear()
    ns.update({"__name__": "__main__", "__doc__": None, "__package__": None, "__spec__": None,
               "__loader__": None, "__builtins__": _builtins_mod})
    return ns


def _user_names():
    return sorted(k for k in _ns if not k.startswith("_") and k not in _SKIP_NAMES)


def _emit(data):
    """Ship one display event: data maps MIME type strings to JSON payloads, forwarded verbatim,
    except that a MIME type is cut to MIME_KEY_CHARS and a payload over the cell's cap on one payload
    is left out (the event's error says so, as for a repr method's)."""
    if not isinstance(data, dict) or not data:
        raise TypeError("emit() takes one non-empty dict keyed by MIME type strings")
    for k in data:
        if not isinstance(k, str):
            raise TypeError("emit() keys must be MIME type strings, not %s" % type(k).__name__)
    sizes = []
    for k, v in data.items():
        try:
            sizes.append(_utf8_size(v) if isinstance(v, str) else _json_check(v))
        except TypeError as e:
            raise TypeError("emit() data must be JSON-serializable: %s" % e)
        except ValueError:  # (NaN and infinities pass, and ship as null)
            raise TypeError("emit() data must be JSON-serializable: %s holds a circular reference"
                            % _short_repr(k, MIME_KEY_CHARS))
    if not _display_room():
        return
    out = {}
    errors = []
    for (mime, v), size in zip(data.items(), sizes):
        key = _mime_key(mime, out, errors)
        if key is None:
            continue
        try:
            _check_cap(size)
        except _OverCap as e:
            errors.append("emit() for %s %s" % (key, e))
            continue
        out[key] = v
    _send_display(out, error="; ".join(errors))


_host_waiters = {}
_host_seq = [0]


async def _host_request(data):
    """Send one host_request event and await the host's reply data."""
    if not isinstance(data, dict):
        raise TypeError("host_request() takes a dict, not %s" % type(data).__name__)
    import asyncio
    lp = asyncio.get_running_loop()
    with _rq.lock:
        _host_seq[0] += 1
        hid = "host-%d" % _host_seq[0]
    fut = lp.create_future()
    _host_waiters[hid] = fut
    try:
        _send({"event": "host_request", "id": hid, "data": data})
        return await fut
    finally:
        _host_waiters.pop(hid, None)


def _now_host_reply(rid, msg):
    """host_reply (at once): resolve the awaiting host_request; unknown or cancelled ids are
    dropped."""
    fut = _host_waiters.get(rid)
    if fut is None:
        return
    data = msg.get("data")
    if not isinstance(data, dict):
        data = {"value": data}

    def resolve():
        if not fut.done():
            fut.set_result(data)
    try:
        fut.get_loop().call_soon_threadsafe(resolve)
    except Exception:
        pass


def _is_active():
    """True while this process is serving the protocol (importing awrepl does not count)."""
    return _rq.serving and not _out.forked


def _make_awrepl_module():
    import types
    m = types.ModuleType("awrepl", "awrepl's bridge to the host: emit(), display(), host_request(), is_active().")
    for public, fn in (("emit", _emit), ("display", _display), ("host_request", _host_request),
                       ("is_active", _is_active)):
        fn.__module__ = "awrepl"
        fn.__name__ = fn.__qualname__ = public
        setattr(m, public, fn)
    m.__all__ = ["emit", "display", "host_request", "is_active"]
    m.__path__ = []  # a package: matplotlib imports its backend as awrepl.inline (served by _DisplayImportWatch)
    _class_ref.__module__ = "awrepl"  # pickled by reference: snapshots name it awrepl._class_ref
    _class_ref.__qualname__ = "_class_ref"
    m._class_ref = _class_ref
    m.PROTOCOL = PROTOCOL
    return m


# ---------------------------------------------------------------------------------------------
# Rich display: display(), Jupyter's repr protocol, matplotlib inline, IPython.display
# ---------------------------------------------------------------------------------------------
# Nothing here imports a library: matplotlib and IPython are hooked when a cell imports them (an
# import watcher on sys.meta_path), and every repr method is looked up on the object in hand.

# Jupyter's repr methods and the MIME types they produce (text/plain comes from repr()).
_REPR_METHODS = (
    ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"), ("image/svg+xml", "_repr_svg_"),
    ("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"), ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"), ("application/pdf", "_repr_pdf_"),
)
# A trailing value of one of these types has nothing richer than its repr: not probed at all.
_PLAIN_TYPES = frozenset([int, float, complex, bool, str, bytes, bytearray, list, tuple, dict, set,
                          frozenset, range, type(None)])
_TEXT_LIKE = ("image/svg+xml", "application/json", "application/javascript", "application/xml")
INLINE_BACKEND = "module://awrepl.inline"  # matplotlib's backend in a session (see _on_matplotlib)
ERROR_CHARS = 1000  # of one repr method's exception message in an entry's `error`
# One payload's cap when execute names none (the host's default: displayMaxPayloadBytes in
# lib/core/limits.ts). A bigger payload is left out before it is encoded: its base64, the frame and
# the host's copies would each be as big again (a 200 MB PNG took a supervisor to 878 MB).
DISPLAY_PAYLOAD_BYTES = 32 * 1024 * 1024
MIME_KEY_CHARS = 100  # a MIME type from user code is cut to this (a 5,000-character key was echoed whole)


class _DisplayCell(object):
    """The display state of the running cell: its entry count and limit (execute's
    max_display_entries, 0 = none), the entries past it, the figure format, the figures shown, and
    the cap on one payload (execute's max_display_payload_bytes, 0 = none)."""

    __slots__ = ("rid", "count", "limit", "dropped", "fmt", "shown", "cap")

    def __init__(self, rid=None, limit=0, fmt="png", cap=DISPLAY_PAYLOAD_BYTES):
        self.rid = rid
        self.count = 0
        self.limit = limit
        self.dropped = 0
        self.fmt = fmt
        self.shown = {}  # id(figure) -> figure: shown in this cell, so not shown again by itself
        self.cap = cap


_cell.display = _DisplayCell()


def _display_begin(r):
    """Reads execute's display fields into a fresh per-cell state; an error text when one is bad."""
    fmt = r.msg.get("figure_format", "png")
    limit = r.msg.get("max_display_entries", 0)
    cap = r.msg.get("max_display_payload_bytes", DISPLAY_PAYLOAD_BYTES)
    if fmt not in ("png", "svg"):
        return "execute 'figure_format' must be \"png\" or \"svg\", got %r" % (fmt,)
    for key, value in (("max_display_entries", limit), ("max_display_payload_bytes", cap)):
        if type(value) is not int or value < 0:
            return "execute '%s' must be a whole number, 0 or more, got %r" % (key, value)
    _cell.display = _DisplayCell(r.id, limit, fmt, cap)
    return None


def _display_room():
    """True when the cell may ship one more entry; past its limit the entry is only counted (and
    never built: a loop making 1,000 figures renders as many as are kept)."""
    d = _cell.display
    if d.limit and d.count >= d.limit:
        d.dropped += 1
        return False
    d.count += 1
    return True


def _send_display(data, source=None, error=None):
    ev = {"event": "display", "id": _cell_get(None), "data": data}
    if source is not None:
        ev["source"] = source
    if error:
        ev["error"] = error
    _send(ev)


def _real_method(obj, name):
    """obj's repr method `name` when it really has one, as IPython decides it: an object that claims
    every attribute (a mock, a proxy) has none, nor has a class (its methods are unbound)."""
    try:
        if getattr(obj, "_ipython_canary_method_should_not_exist_", None) is not None:
            return None
        m = getattr(obj, name, None)
    except Exception:
        return None
    if m is None or isinstance(obj, type) or not callable(m):
        return None
    return m


def _is_text_mime(mime):
    return mime.startswith("text/") or mime in _TEXT_LIKE or mime.endswith(("+json", "+xml"))


def _method_error(name, e):
    msg = _safe_str(e)
    if len(msg) > ERROR_CHARS:
        msg = msg[:ERROR_CHARS] + "..."
    return "%s raised %s%s" % (name, type(e).__name__, ": " + msg if msg else "")


class _OverCap(Exception):
    """A payload over the cell's cap on one payload: left out, before it is encoded."""


def _size_text(n):
    if n < 1024:
        return "%d B" % n
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024.0
        if n < 1024 or unit == "GiB":
            return "%.1f %s" % (n, unit)


def _check_cap(size):
    cap = _cell.display.cap
    if cap and size > cap:
        raise _OverCap("returned %d bytes (%s), over the cap of %d bytes (%s) on one display payload: "
                       "left out" % (size, _size_text(size), cap, _size_text(cap)))


UTF8_SLICE = 1 << 20  # characters encoded at a time to measure a text


def _utf8_size(s):
    """UTF-8 bytes of s, measured a slice at a time (never a second copy of all of it)."""
    n = str.__len__(s)
    if str.isascii(s):
        return n
    return sum(len(str.__getitem__(s, slice(i, i + UTF8_SLICE)).encode("utf-8", "surrogatepass"))
               for i in range(0, n, UTF8_SLICE))


def _payload(mime, v):
    """A repr method's return value as JSON for `mime`: text for text types, base64 for bytes of a
    binary one (Jupyter's convention), plain JSON data for JSON types; else a TypeError. Over the
    cell's cap (its size as returned: bytes, UTF-8 text, JSON text) it is _OverCap, raised before
    anything is encoded or copied."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        _check_cap(v.nbytes if isinstance(v, memoryview) else len(v))
        if isinstance(v, memoryview) and not v.c_contiguous:
            v = v.tobytes()  # what the encoders below can read (at most the cap)
        if _is_text_mime(mime):
            return str(v, "utf-8", "replace")
        return _imp("binascii").b2a_base64(v, newline=False).decode("ascii")  # no bytes() copy first
    if isinstance(v, str):
        _check_cap(_utf8_size(v))
        return str(v) if _is_text_mime(mime) else v.strip()  # base64 from b2a_base64 ends in "\n"
    if mime == "application/json" or mime.endswith("+json"):
        try:
            size = _json_check(v)
        except ValueError:  # NaN passes the check (it ships as null): this is a cycle
            raise TypeError("returned data with a circular reference")
        _check_cap(size)
        return v
    raise TypeError("returned %s, not str or bytes" % type(v).__name__)


def _put(data, errors, mime, v, where):
    try:
        data[mime] = _payload(mime, v)
    except (TypeError, _OverCap) as e:
        errors.append("%s for %s %s" % (where, mime, _safe_str(e)))


def _mime_key(mime, data, errors):
    """A MIME type from user code as the entry's key: cut to MIME_KEY_CHARS, with the cut said;
    None when, cut, it is a key the entry has already."""
    n = str.__len__(mime)
    if n <= MIME_KEY_CHARS:
        return mime
    key = str.__getitem__(mime, slice(0, MIME_KEY_CHARS)) + "..."
    note = "a MIME type of %d characters was cut to its first %d" % (n, MIME_KEY_CHARS)
    if key in data:
        errors.append(note + ", the same as an earlier one: left out")
        return None
    errors.append(note)
    return key


def _figure_class():
    return getattr(sys.modules.get("matplotlib.figure"), "Figure", None)


def _bundle(obj, include=None, exclude=None, rich_only=False):
    """The MIME bundle of obj, as Jupyter builds it: _repr_mimebundle_(include, exclude) first, then
    each _repr_*_ for the types it did not give, then text/plain (unless rich_only: the trailing
    value's text is its `result`). A matplotlib Figure is rendered. Returns (data, errors): a repr
    method that raises adds an error and leaves its type out; it never fails the caller."""
    data = {}
    errors = []

    def wanted(mime):
        return (include is None or mime in include) and (exclude is None or mime not in exclude)

    fig = _figure_class()
    if fig is not None and isinstance(obj, fig):
        mime = "image/svg+xml" if _cell.display.fmt == "svg" else "image/png"
        if wanted(mime):
            _render_figure(obj, mime, data, errors)
    else:
        m = _real_method(obj, "_repr_mimebundle_")
        if m is not None:
            try:
                got = m(include=include, exclude=exclude)
            except Exception as e:
                errors.append(_method_error("_repr_mimebundle_()", e))
                got = None
            if isinstance(got, tuple) and len(got) == 2:
                got = got[0]  # (data, metadata)
            if isinstance(got, dict):
                for mime, v in got.items():
                    if isinstance(mime, str) and wanted(mime) and v is not None and not (rich_only and mime == "text/plain"):
                        key = _mime_key(mime, data, errors)
                        if key is not None:
                            _put(data, errors, key, v, "_repr_mimebundle_()")
            elif got is not None:
                errors.append("_repr_mimebundle_() returned %s, not a dict" % type(got).__name__)
        for mime, name in _REPR_METHODS:
            if mime in data or not wanted(mime):
                continue
            m = _real_method(obj, name)
            if m is None:
                continue
            try:
                v = m()
            except Exception as e:
                errors.append(_method_error(name + "()", e))
                continue
            if isinstance(v, tuple) and len(v) == 2:
                v = v[0]  # (data, metadata)
            if v is not None:
                _put(data, errors, mime, v, name + "()")
    if not rich_only and "text/plain" not in data and wanted("text/plain"):
        _put(data, errors, "text/plain", _plain_text(obj, errors), "repr()")
    return data, errors


def _plain_text(obj, errors):
    """repr(obj), or IPython's pretty text for an object with _repr_pretty_ once a cell imported
    IPython (its Markdown("# hi") is "# hi" there, not "<...Markdown object>")."""
    if "IPython" in sys.modules and _real_method(obj, "_repr_pretty_") is not None:
        try:
            __import__("IPython.lib.pretty")
            return sys.modules["IPython.lib.pretty"].pretty(obj)
        except Exception:
            pass
    try:
        text = repr(obj)
        if isinstance(text, str):
            return text
        errors.append("repr() returned %s, not str" % type(text).__name__)
    except Exception as e:
        errors.append(_method_error("repr()", e))
    return "<%s object at %#x>" % (type(obj).__name__, id(obj))


def _render_figure(fig, mime, data, errors):
    """A matplotlib figure drawn by Agg at its own size and DPI (rcParams: figure.figsize,
    figure.dpi, savefig.*): PNG as base64, or SVG text."""
    buf = _imp("io").BytesIO()
    try:
        fig.savefig(buf, format="svg" if mime == "image/svg+xml" else "png")
    except Exception as e:
        errors.append(_method_error("drawing the figure", e))
        return
    _put(data, errors, mime, buf.getbuffer(), "savefig()")  # the buffer itself, not a copy of it
    _cell.display.shown[id(fig)] = fig


def _show(obj, include=None, exclude=None):
    if not _display_room():
        return
    data, errors = _bundle(obj, include, exclude)
    _send_display(data, error="; ".join(errors))


def _display(*objs, **kwargs):
    """display(*objs, include=None, exclude=None, raw=False, display_id=None, ...): one display entry
    per object, built from its repr methods (Jupyter's display protocol). With raw=True each object
    is a ready MIME bundle (a dict). Metadata, transient and clear are accepted and ignored."""
    include = kwargs.get("include")
    exclude = kwargs.get("exclude")
    for obj in objs:
        if kwargs.get("raw"):
            _publish_display_data(obj)
        else:
            _show(obj, include, exclude)
    display_id = kwargs.get("display_id")
    if display_id:
        return _DisplayHandle(os.urandom(8).hex() if display_id is True else display_id)
    return None


class _DisplayHandle(object):
    """What display(..., display_id=...) returns; an update is shown as a new entry."""

    def __init__(self, display_id):
        self.display_id = display_id

    def display(self, obj, **kwargs):
        _display(obj, **kwargs)

    def update(self, obj, **kwargs):
        _display(obj, **kwargs)

    def __repr__(self):
        return "<DisplayHandle display_id=%s>" % self.display_id


def _publish_display_data(data, metadata=None, *args, **kwargs):
    """IPython's publish_display_data: a ready bundle, normalised like a repr method's output."""
    if not isinstance(data, dict):
        raise TypeError("display data must be a dict keyed by MIME type, not %s" % type(data).__name__)
    if not _display_room():
        return
    out = {}
    errors = []
    for mime, v in data.items():
        if isinstance(mime, str) and v is not None:
            key = _mime_key(mime, out, errors)
            if key is not None:
                _put(out, errors, key, v, "display data")
    _send_display(out, error="; ".join(errors))


def _update_display(obj, *args, **kwargs):
    kwargs.pop("display_id", None)
    kwargs.pop("update", None)
    _display(obj, **kwargs)


def _clear_output(wait=False):
    """Nothing to clear: every entry is kept in the cell's result."""


def _show_value(value):
    """The trailing value's richer forms (its text is the `result`), after the figures still open; a
    trailing pyplot figure is shown once, as the value."""
    fig = _figure_class()
    is_fig = fig is not None and isinstance(value, fig)
    _show_figures(value if is_fig else None)
    if is_fig and id(value) in _cell.display.shown:
        return
    data, errors = _bundle(value, rich_only=True)
    if (data or errors) and _display_room():
        _send_display(data, "value", "; ".join(errors))


def _shown_plot(value):
    """True for a trailing matplotlib artist whose figure this cell showed: a Figure, an Axes, a
    list of them or of the lines plt.plot() returns. Its repr says nothing its image does not, so
    the cell sends no result for it (the value is still bound to _)."""
    artist = getattr(sys.modules.get("matplotlib.artist"), "Artist", None)
    d = _cell.display
    if not isinstance(artist, type) or d is None or not d.shown:
        return False
    items = value if type(value) in (list, tuple) and 0 < len(value) <= 100 else (value,)
    for v in items:
        if not isinstance(v, artist):
            return False
        fig = v
        for _ in range(3):  # an artist's figure, a subfigure's parent
            if fig is None or id(fig) in d.shown:
                break
            fig = getattr(fig, "figure", None)
        if fig is None or id(fig) not in d.shown:
            return False
    return True


def _inline_backend_on():
    mpl = sys.modules.get("matplotlib")
    try:
        return dict.get(mpl.rcParams, "backend") == INLINE_BACKEND  # dict.get: never resolves a backend
    except Exception:
        return False


def _show_figures(exclude=None):
    """Every open pyplot figure is rendered, shipped and closed, as matplotlib-inline does at the end
    of a cell and on plt.show(); only while the inline backend is the one in use (a cell that chose
    another backend keeps its figures). One already shown in this cell is only closed."""
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    if helpers is None or not _inline_backend_on():
        return
    gcf = helpers.Gcf
    managers = gcf.get_all_fig_managers()  # most recently active last: shown in creation order
    if not managers:
        return
    try:
        for m in sorted(managers, key=lambda m: m.num if isinstance(m.num, int) else 0):
            fig = m.canvas.figure
            if fig is not exclude and id(fig) not in _cell.display.shown:
                _show(fig)
    finally:
        gcf.destroy_all()  # what plt.close("all") does


def _end_cell_display(r):
    """At the end of a cell (not one interrupted): the figures still open. An interrupt here fails
    the cell as any other; a failure of the display machinery itself is never the cell's."""
    if "matplotlib._pylab_helpers" not in sys.modules or r.kbi:
        return
    r.in_user = True
    try:
        _show_figures()
    except KeyboardInterrupt as e:
        if not r.failed:
            _fail(r, e)
    except Exception:
        pass
    finally:
        r.in_user = False


def _mpl_show(*args, **kwargs):
    """plt.show() under the inline backend: every open figure shown now, then closed."""
    _show_figures()


def _fill_inline_backend(module):
    """awrepl.inline, matplotlib's backend in a session: Agg canvases whose plt.show() and
    fig.show() ship the figure as a display entry (matplotlib-inline's design; no window ever)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.backend_bases import FigureManagerBase

    class FigureManager(FigureManagerBase):
        def show(self, *args, **kwargs):
            _show(self.canvas.figure)

    class FigureCanvas(FigureCanvasAgg):
        manager_class = FigureManager

    module.FigureCanvas = FigureCanvas
    module.FigureManager = FigureManager
    module.show = _mpl_show
    module.backend_version = "awrepl"
    if not hasattr(FigureCanvasAgg, "new_manager"):  # matplotlib before 3.6 asks the module
        def new_figure_manager_given_figure(num, figure):
            return FigureManager(FigureCanvas(figure), num)

        def new_figure_manager(num, *args, **kwargs):
            from matplotlib.figure import Figure
            cls = kwargs.pop("FigureClass", Figure)
            return new_figure_manager_given_figure(num, cls(*args, **kwargs))
        module.new_figure_manager = new_figure_manager
        module.new_figure_manager_given_figure = new_figure_manager_given_figure


def _on_matplotlib(mpl):
    """matplotlib was just imported by a cell: its backend becomes the inline one before pyplot
    picks one (so a headless worker never tries a GUI). matplotlib.use() in a cell still wins."""
    mpl.use(INLINE_BACKEND)


def _on_ipython_display(mod):
    """IPython's display functions publish to awrepl (no InteractiveShell is started: without one,
    IPython's display() would only print the object's repr)."""
    names = vars(mod)
    for name, fn in (("display", _display), ("publish_display_data", _publish_display_data),
                     ("update_display", _update_display), ("clear_output", _clear_output)):
        if name in names:
            setattr(mod, name, fn)


_AFTER_IMPORT = {
    "matplotlib": _on_matplotlib,
    "IPython.core.display_functions": _on_ipython_display,  # IPython >= 7.14
    "IPython.core.display": _on_ipython_display,  # older IPython defines display() here
}


class _DisplayImportWatch(object):
    """A sys.meta_path finder that runs the hooks above right after their module executes (whoever
    else finds it), and serves the inline backend module; every other import passes untouched."""

    def find_spec(self, name, path=None, target=None):
        if name == "awrepl.inline":
            from importlib.machinery import ModuleSpec
            return ModuleSpec(name, _InlineBackendLoader())
        after = _AFTER_IMPORT.get(name)
        if after is None:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _AfterImportLoader(spec.loader, after)
        return spec


class _AfterImportLoader(object):
    """A module's own loader, then `after(module)` (which never fails the import)."""

    def __init__(self, loader, after):
        self._loader = loader
        self._after = after

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        try:
            self._after(module)
        except Exception:
            pass  # the module works as it would without awrepl


class _InlineBackendLoader(object):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        _fill_inline_backend(module)


def _install_display():
    """display() becomes a builtin (as in IPython), the import watch starts; libraries a cell
    imported before this (none, normally) are hooked now."""
    _builtins_mod.display = _display
    sys.meta_path.insert(0, _DisplayImportWatch())
    for name, after in _AFTER_IMPORT.items():
        mod = sys.modules.get(name)
        if mod is not None:
            try:
                after(mod)
            except Exception:
                pass


# ---------------------------------------------------------------------------------------------
# Reading: who reads requests (the main thread between requests, the reader thread while one
# runs); the requests answered at once; the watchdog [_rd, _wd]
# ---------------------------------------------------------------------------------------------

EOF_GRACE = 1.5
_keep = []  # fds that must stay open for the process's lifetime


_DATA_HEAD = b'{"type":"data","id":"'


def _on_line(line):
    """Whoever reads requests: one request line, answered here if its type is answered at once (its
    `now` in _REQUESTS, see Dispatch), also while a request runs; else queued."""
    if line.startswith(_DATA_HEAD) and _data_line(line):
        return
    line = line.strip()
    if not line:
        return
    try:
        msg = _loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return _protocol_error(None, "request is not valid UTF-8")
    except ValueError as e:
        head = line[:80].decode("utf-8", "replace")
        return _protocol_error(None, "malformed request line (%s): %s" % (e, head))
    if not isinstance(msg, dict):
        return _protocol_error(None, "a request must be a JSON object, got %s" % type(msg).__name__)
    t = msg.get("type")
    rid = msg.get("id")
    if rid is not None and not isinstance(rid, str):
        return _protocol_error(None, "request id must be a string, got %r" % (rid,))
    row = _REQUESTS.get(t) if isinstance(t, str) else None
    if row is not None and row[0] is not None:
        return row[0](rid, msg)
    if rid is None:
        return _needs_id(msg)
    r = _Req(msg)
    if t == "restore" and msg.get("from") == "host":
        _open_inbound(r)  # the payload's data lines may arrive while another request runs
    _enqueue(r)


def _needs_id(msg):
    _protocol_error(None, "request of type %r needs a string id" % (msg.get("type"),))


def _now_data(rid, msg):
    """A data request: a base64 piece, a binary frame's header (returns the count of raw bytes that
    follow, which the reader reads as such), or a binary restore's closing sha256."""
    if rid is None:
        n = msg.get("bytes")
        _protocol_error(None, "a data request needs the string id of its restore")
        return n if type(n) is int and n > 0 else None  # framing holds: its bytes are dropped
    if "bytes" in msg:
        n = msg.get("bytes")
        if type(n) is not int or n < 0:
            return _fail_one(rid, "a data frame's bytes must be a non-negative integer, got %r" % (n,))
        _rd.raw_id = rid
        return n
    if "sha256" in msg:
        return _end_inbound(rid, msg.get("sha256"))
    _feed_inbound(rid, msg.get("data"))


def _now_ping(rid, msg):
    _beat(b".")
    if rid is not None:
        _send({"event": "done", "id": rid, "status": "ok", "time": _time()})


def _now_info(rid, msg):
    if rid is None:
        return _needs_id(msg)
    _send({"event": "done", "id": rid, "status": "ok", "facts": _facts()})


def _now_shutdown(rid, msg):
    """shutdown: queued (with or without an id), or with "now": true the process exits here and now
    (the watchdog, seeing fd 4 hang up, kills what is left of our group; without one, we do)."""
    if msg.get("now") is not True:
        return _enqueue(_Req(msg))
    if _wd.beat_w < 0 and _wd.own_group:
        try:
            os.killpg(_pid, 9)
        except OSError:
            pass
    _os_exit(0)


# Who reads the requests. Between requests the main thread reads them itself: handing each one over
# from a reader thread woke a second thread (and the GIL's hand-over) per request, each wake-up a
# cross-vCPU one when the two threads sit apart (BENCHMARKS.md, "The library's round trip"). While a
# request runs someone else must read (interrupts, pings, info, a restore's payload), so the reader
# thread gets the turn when a request has run TURN_SECONDS (the batch timer sees to it), when the
# event loop starts (the loop's thread never sits in a read), when a request waits on the reader
# (a restore's payload), and for good once stdin is at its end. The main thread takes it back over
# the turn pipe when it is idle again; requests the reader has queued meanwhile go first. A short
# request that has the turn leaves an interrupt or a ping unread for at most TURN_SECONDS.
TURN_SECONDS = 0.002
REQUEST_READ = 1 << 16  # a larger buffer is above glibc's mmap threshold: every request would pay
# an mmap + mremap + munmap (~35 µs); longer lines arrive in parts.


class _Reading(object):
    """The requests' channel and whose turn it is to read it."""

    __slots__ = ("fd", "main", "lock", "go", "parked", "turn_r", "turn_w", "poller", "idle_poll",
                 "ended", "parts", "raw_left", "raw_id")

    def __init__(self):
        self.fd = -1  # the private dup of the original fd 0
        self.main = False  # the main thread reads (between requests); else the reader thread does
        self.lock = _thread.allocate_lock()  # guards main
        self.go = _held_lock()  # released: the reader thread has the turn
        self.parked = _held_lock()  # released: the reader gave the turn back
        self.turn_r = self.turn_w = -1  # the turn pipe: a byte asks the reader to give the turn back
        self.poller = None  # the reader thread's poll of fd and turn_r
        self.idle_poll = None  # the main thread's poll of fd while idle tasks wait (it has the turn)
        self.ended = False  # stdin is at its end
        self.parts = []  # the first pieces of a request line whose newline has not arrived yet
        self.raw_left = 0  # raw bytes of a binary data frame still to come (then lines again)
        self.raw_id = None  # the restore they belong to


_rd = _Reading()


def _setup_turn():
    """The main thread reads between requests when the reader thread can be told to stop reading
    (select.poll on the request fd and the turn pipe); otherwise the reader thread reads always."""
    try:
        import select
        poller, idle = select.poll(), select.poll()
        r, w = os.pipe()
    except (ImportError, AttributeError, OSError):
        _rd.go.release()
        return
    _rd.turn_r, _rd.turn_w = _move_high(r), _move_high(w)
    _keep.extend((_rd.turn_r, _rd.turn_w))
    poller.register(_rd.fd, select.POLLIN)
    poller.register(_rd.turn_r, select.POLLIN)
    idle.register(_rd.fd, select.POLLIN)
    _rd.poller, _rd.idle_poll = poller, idle
    _rd.main = True


def _feed(chunk):
    """Split request bytes into lines and handle each; a line's unfinished end waits in _rd.parts.
    A binary data frame's header line announces raw bytes: those go to its restore, unsearched."""
    start = 0
    while True:
        if _rd.raw_left:
            take = min(_rd.raw_left, len(chunk) - start)
            if take:
                _rd.raw_left -= take
                _raw_in(memoryview(chunk)[start:start + take])
                start += take
            if _rd.raw_left:
                return
        i = chunk.find(b"\n", start)
        if i < 0:
            if start < len(chunk):
                _rd.parts.append(chunk[start:])
            return
        if _rd.parts:
            _rd.parts.append(chunk[start:i])
            line = b"".join(_rd.parts)
            del _rd.parts[:]
        else:
            line = chunk[start:i]
        start = i + 1
        try:
            raw = _on_line(line)
            if type(raw) is int and raw > 0:
                _rd.raw_left = raw
        except Exception as e:  # whoever reads never dies of a request
            try:
                _protocol_error(None, "bad request: %s: %s" % (type(e).__name__, _safe_str(e)))
            except Exception:
                pass


def _give_turn(busy=None):
    """Any thread: the reader thread reads from now on; with busy, only while that request runs
    (main is not reading then: it reads only between requests)."""
    with _rd.lock:
        if not _rd.main or (busy is not None and (busy.done or _rq.active is not busy)):
            return
        _rd.main = False
        _rd.go.release()


def _take_turn():
    """Main thread, between requests, the reader thread having the turn: True once the reader has
    given it back; False while the reader must keep it (the event loop runs, stdin ended, no turn
    pipe). Only the main thread asks for the turn back, and nobody gives it away between requests,
    so _rd.main cannot change under the main thread while it is here."""
    if _aio.loop is not None or _rd.ended or _rd.turn_w < 0:
        return False
    try:
        _os_write(_rd.turn_w, b"t")
    except OSError:
        return False
    while not _rd.parked.acquire(True, 0.05):
        if _rd.ended:
            return False  # the reader is ending the process: it never parks again
    return True


def _main_read():
    """Main thread, between requests, holding the turn: one read of requests, handled (queued)."""
    try:
        chunk = _read_requests(_rd.fd)
    except InterruptedError:
        return
    except OSError:
        chunk = b""
    if chunk is None:
        return
    if chunk:
        return _feed(chunk)
    _rd.ended = True
    _give_turn()  # the reader thread finds the end too and ends the process as it always has


def _read_requests(fd):
    """One read of the request channel: bytes to _feed, b"" at its end, or None when the bytes went
    straight into the buffer of the restore whose binary frame is being read (no copy)."""
    ib = _inbound.get(_rd.raw_id) if _rd.raw_left else None
    if ib is None or not ib.binary or ib.buf is None or not ib.ready.locked() or ib.req.done or ib.got + _rd.raw_left > ib.expected:
        return _os_read(fd, REQUEST_READ)  # lines, or raw bytes to drop: _feed sorts them out
    n = _os_readv(fd, [memoryview(ib.buf)[ib.got:ib.got + _rd.raw_left]])
    if n == 0:
        return b""
    _rd.raw_left -= n
    ib.hash.update(memoryview(ib.buf)[ib.got:ib.got + n])
    ib.got += n
    return None


def _reader():
    _block_sigint()
    poller = _rd.poller
    fd = _rd.fd
    while True:
        _rd.go.acquire()  # the turn
        while True:
            if poller is not None:
                try:
                    ready = dict(poller.poll())
                except InterruptedError:
                    continue
                if ready.get(_rd.turn_r):
                    _os_read(_rd.turn_r, 64)
                    with _rd.lock:
                        _rd.main = True
                    _rd.parked.release()
                    break
            try:
                chunk = _read_requests(fd)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if chunk is None:
                continue
            if not chunk:
                _reader_eof()
            _feed(chunk)


def _reader_eof():
    """stdin closed: equivalent to shutdown, and the process is gone soon whatever runs. The
    watchdog learns that we saw the EOF (without this byte it ends us 0.5 s after the hang-up:
    a reader that cannot see the EOF is stuck behind a C loop holding the GIL)."""
    _rd.ended = True
    _beat(b"E")
    _fail_inbound("stdin closed before the restore payload arrived")
    _enqueue(_Req({"type": "shutdown"}))
    _sleep(EOF_GRACE)
    _os_exit(0)


# The watchdog, run as `python -S -I -c _WATCHDOG pid grace own_group stuck`: fd 3 is our request
# pipe (stdin), fd 4 a pipe whose write end only we hold (its hang-up: we are gone), fd 5 the beat
# pipe: our reader thread writes "." per ping, "E" when it sees stdin's EOF, "H<ms>;" to set the
# heartbeat deadline (0: off). It needs no GIL of ours, so it acts while a cell spins in C:
# - we exit: it kills what is left of our process group (the cells' children), when we own it;
# - stdin hangs up: "E" must follow within `stuck` s, else, if we spent at least half of that time on
#   the CPU (our CPU time from /proc), our reader is stuck behind a C loop holding the GIL and nobody
#   will ever read a request again: the group is killed now; without the "E" but idle (a starved
#   reader on a loaded machine, or no /proc to tell) we get the grace too. Then `grace` s for the
#   shutdown before the group is killed;
# - heartbeat on: no "." and no growth of the unread bytes in stdin (FIONREAD: pings piling up
#   behind a stuck reader prove the host is alive) for the deadline: the group is killed.
_WATCHDOG = (
    "import os,select,sys,time\n"
    "a=sys.argv;pid=int(a[1]);grace=float(a[2]);grp=a[3]=='1';stuck=float(a[4])\n"
    "H=select.POLLHUP|select.POLLERR|select.POLLNVAL|getattr(select,'POLLRDHUP',0)\n"
    "def end(gone=False):\n"
    " try:\n"
    "  if grp:os.killpg(pid,9)\n"
    "  elif not gone:os.kill(pid,9)\n"
    " except OSError:pass\n"
    " os._exit(0)\n"
    "def cpu():\n"
    " try:\n"
    "  f=open('/proc/%d/stat'%pid).read().rsplit(')',1)[1].split();return (int(f[11])+int(f[12]))/os.sysconf('SC_CLK_TCK')\n"
    " except Exception:return None\n"
    "def unread():\n"
    " try:\n"
    "  import fcntl,termios,array;b=array.array('i',[0]);fcntl.ioctl(3,termios.FIONREAD,b,True);return b[0]\n"
    " except Exception:return -1\n"
    "p=select.poll();p.register(3,H);p.register(4,H);p.register(5,select.POLLIN|H)\n"
    "hb=0.0;last=time.monotonic();seen=-2;eof=None;saw=False;slow=False;c0=None;buf=b''\n"
    "while 1:\n"
    " now=time.monotonic()\n"
    " if eof is not None:w=eof+(grace if saw or slow else stuck)-now\n"
    " elif hb:w=min(0.25,hb/4)\n"
    " else:w=None\n"
    " e=dict(p.poll(None if w is None else max(0,int(w*1000)+1)))\n"
    " now=time.monotonic()\n"
    " if e.get(4):end(True)\n"
    " if e.get(5):\n"
    "  d=os.read(5,4096)\n"
    "  if not d:end(True)\n"
    "  buf+=d\n"
    "  while buf:\n"
    "   c=buf[:1]\n"
    "   if c==b'H':\n"
    "    i=buf.find(b';')\n"
    "    if i<0:break\n"
    "    hb=int(buf[1:i] or 0)/1000.0;last=now;buf=buf[i+1:];continue\n"
    "   if c==b'.':last=now\n"
    "   elif c==b'E':saw=True\n"
    "   buf=buf[1:]\n"
    " if e.get(3) and eof is None:eof=now;c0=cpu();p.unregister(3)\n"
    " if eof is not None:\n"
    "  if saw or slow:\n"
    "   if now-eof>=grace:end()\n"
    "  elif now-eof>=stuck:\n"
    "   c1=cpu()\n"
    "   if c0 is None or c1 is None or c1-c0<(now-eof)/2:slow=True\n"
    "   else:end()\n"
    "  continue\n"
    " if hb:\n"
    "  n=unread()\n"
    "  if n!=seen:seen=n;last=now\n"
    "  if now-last>=hb:end()\n"
)
EOF_STUCK = 0.5


class _Watchdog(object):
    """The watchdog process (see _start_watchdog) and the process group it ends."""

    __slots__ = ("lock", "started", "beat_w", "sh_pids", "own_group")

    def __init__(self):
        self.lock = _thread.allocate_lock()  # the reader (heartbeat) and the main thread may both start it
        self.started = False
        self.beat_w = -1  # the beat pipe's write end: -1 while no watchdog runs
        self.sh_pids = []  # the sh that started it, reaped before any cell runs (see _reap_sh)
        self.own_group = False  # we lead our process group (see _take_group)


_wd = _Watchdog()


def _start_watchdog():
    """A helper process that ends us (and our group) when the host is gone and we cannot see it.

    Whoever reads requests handles EOF, but it needs the GIL, and a cell stuck in a C loop
    (sum(range(10**12))) never releases it; the helper needs no GIL. It is a fresh interpreter
    (python -S -I), not a fork of this one: a fork would come to hold a private copy of every page
    we touch afterwards. It is started through `sh -c '... &'` so it is not our child: a cell's
    os.wait() never meets it. It stays in our process group (the last thing it kills is itself).
    Returns whether it runs.
    """
    with _wd.lock:
        if _wd.started:
            return _wd.beat_w >= 0
        _wd.started = True
        exe = sys.executable
        if (not hasattr(os, "posix_spawn") or not exe or not os.path.exists("/bin/sh")
                or os.environ.get("AWREPL_NO_WATCHDOG")):
            return False
        # alive_w stays here, close-on-exec: HUP on alive_r = we are gone. All four high before the
        # spawn: its dup2 actions target fds 3-5, which a low pipe fd could be (and be overwritten).
        alive_r, alive_w = [_move_high(fd) for fd in os.pipe()]
        beat_r, beat_w = [_move_high(fd) for fd in os.pipe()]
        if min(_rd.fd, alive_r, beat_r) <= 5:  # no room up high (a tiny NOFILE limit): no watchdog
            for fd in (alive_r, alive_w, beat_r, beat_w):
                os.close(fd)
            return False
        actions = [(os.POSIX_SPAWN_DUP2, _rd.fd, 3), (os.POSIX_SPAWN_DUP2, alive_r, 4),
                   (os.POSIX_SPAWN_DUP2, beat_r, 5),
                   (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
        argv = ["/bin/sh", "-c", '"$@" &', "sh", exe, "-S", "-I", "-c", _WATCHDOG,
                str(os.getpid()), str(EOF_GRACE + 0.4), "1" if _wd.own_group else "0", str(EOF_STUCK)]
        try:
            pid = os.posix_spawn("/bin/sh", argv, dict(os.environ), file_actions=actions)
        except OSError:
            os.close(alive_w)
            os.close(beat_w)
            return False
        finally:
            os.close(alive_r)
            os.close(beat_r)
        os.set_blocking(beat_w, False)  # a full beat pipe drops beats, never blocks the reader
        _keep.append(alive_w)
        _wd.beat_w = beat_w
        _wd.sh_pids.append(pid)  # reaped before any cell runs: a cell's os.wait() must never meet it
        return True


def _take_group():
    """Become the leader of a process group of our own, so our cells' children can be ended with
    us. The host's spawn already does it for a local worker; one behind ssh, bwrap or `docker exec`
    may be a member of someone else's group. Not when stdin is a terminal: a background group
    reading it would be stopped (someone running runtime.py by hand)."""
    try:
        if os.getpgid(0) != _pid and not os.isatty(0):
            os.setpgid(0, 0)
        _wd.own_group = os.getpgid(0) == _pid
    except (AttributeError, OSError):
        _wd.own_group = False


def _beat(b):
    if _wd.beat_w >= 0:
        try:
            _os_write(_wd.beat_w, b)
        except OSError:
            pass


def _now_heartbeat(rid, msg):
    """heartbeat (at once): (re)arm the watchdog's heartbeat deadline; 0 turns it off."""
    if rid is None:
        return _needs_id(msg)
    timeout_ms = msg.get("timeout_ms")
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
        return _send({"event": "done", "id": rid, "status": "error",
                      "reason": "heartbeat needs a non-negative integer timeout_ms, got %r" % (timeout_ms,)})
    ok = _start_watchdog()
    _beat(("H%d;" % timeout_ms).encode())
    _send({"event": "done", "id": rid, "status": "ok", "watchdog": ok})


def _reap_sh():
    """Wait for the watchdog's sh, which exits as soon as it has started the watchdog (~1 ms)."""
    while _wd.sh_pids:
        try:
            os.waitpid(_wd.sh_pids.pop(), 0)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------
# Introspection: variables, inspect, reset, list_names; the time budget of a repr [_budget]
# ---------------------------------------------------------------------------------------------

# Short reprs (variables, inspect) are cut before they are formatted, never after: the builtin repr
# of a 1 GiB bytearray runs in C, where the time budget cannot stop it, for 15-26 s and 4-8 GiB, and
# reprlib has no repr_bytes, sorts every key of a dict or set before it shows ten, and asks an
# ndarray or a DataFrame for its full repr. So a type known here is shown from a slice of itself (a
# string's head and tail, a container's first items, each within what is left of the room), numpy
# and pandas objects through their own bounded forms, and only the rest through their own repr (cut
# afterwards; a user __repr__ is what the time budget is for). Work and memory are O(the limit).
BRIEF_ITEMS = 10  # of a container, shown before "..."
BRIEF_DEPTH = 6  # containers shown inside containers (reprlib's maxlevel); deeper ones are "[...]"
BRIEF_ROWS = 10  # of a pandas DataFrame or Series (head and tail)
COUNTER_SORTED = 100000  # a Counter up to this size shows its most common first, as its repr does
BRIEF_INT_BITS = 14000  # about 4200 digits: a bigger int is described, not converted (the
#                          conversion is quadratic before 3.11 and refused past 4300 digits after)


def _short_repr(v, limit=120):
    """A bounded repr of at most `limit` characters; a failing one becomes a marker, so one bad
    name never fails a listing."""
    try:
        text = _brief(v, limit, BRIEF_DEPTH)
    except Exception as e:
        text = "<repr failed: %s: %s>" % (type(e).__name__, _safe_str(e))
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return text


def _cut_middle(s, room):
    """s in `room` characters: its head, "...", its tail (as reprlib cuts)."""
    if len(s) <= room:
        return s
    i = max(0, (room - 3) // 2)
    j = max(0, room - 3 - i)
    return s[:i] + "..." + s[len(s) - j:]


def _brief_chars(part, n, room):
    """A str, bytes or bytearray of length n, from its head and tail only: part(a, b) is a copy of
    x[a:b] (through the base type, never a subclass's __getitem__)."""
    if n <= room:
        return repr(part(0, n))
    i = max(0, (room - 3) // 2)
    j = max(0, room - 3 - i)
    s = repr(part(0, i) + part(n - j, n))
    return s[:i] + "..." + s[len(s) - j:]


def _own_repr(t, base):
    """t is base, or a subclass that kept base's repr (a list subclass still shows as a list)."""
    return t is base or (issubclass(t, base) and t.__repr__ is base.__repr__)


def _brief_items(items, n, room, depth, pairs=False):
    """The first items of a container (key: value for pairs), within `room` characters."""
    parts = []
    used = 0
    for item in items:
        if len(parts) >= BRIEF_ITEMS or used >= room:
            break
        left = room - used
        if pairs:
            s = "%s: %s" % (_brief(item[0], left, depth), _brief(item[1], left, depth))
        else:
            s = _brief(item, left, depth)
        parts.append(s)
        used += len(s) + 2
    if len(parts) < n:
        parts.append("...")
    return ", ".join(parts)


def _brief_container(x, t, room, depth):
    """A builtin container's repr from its first items; None when x is not one."""
    shape = _container_shape(x, t)
    if shape is None:
        return None
    base, opening, closing, empty = shape
    n = base.__len__(x)
    if n == 0:
        return empty
    if depth <= 0:
        return opening + "..." + closing
    pairs = issubclass(base, dict)
    items = base.items(x) if pairs else base.__iter__(x)  # the base's own: what its repr would walk
    if base.__name__ == "Counter" and n <= COUNTER_SORTED:
        items = base.most_common(x, BRIEF_ITEMS)  # its repr's order (a heap of 10, not a sort)
    inner = _brief_items(items, n, room - len(opening) - len(closing), depth - 1, pairs)
    return opening + inner + ("," if base is tuple and n == 1 else "") + closing


_BRIEF_SHAPES = (  # base type, opening, closing, empty
    (list, "[", "]", "[]"), (tuple, "(", ")", "()"), (dict, "{", "}", "{}"),
    (set, "{", "}", "set()"), (frozenset, "frozenset({", "})", "frozenset()"),
    (type({}.keys()), "dict_keys([", "])", "dict_keys([])"),
    (type({}.values()), "dict_values([", "])", "dict_values([])"),
    (type({}.items()), "dict_items([", "])", "dict_items([])"),
)


def _container_shape(x, t):
    """(base type, opening, closing, empty repr) of a container that shows as its base type does
    (a subclass that kept the base's repr included), else None. The collections and array types
    are looked up only where a cell has imported them: x cannot be one otherwise."""
    for shape in _BRIEF_SHAPES:
        base = shape[0]
        if _own_repr(t, base):
            if t is not base and base in (set, frozenset):  # a subclass's repr names it
                return base, t.__name__ + "({", "})", t.__name__ + "()"
            return shape
    name = t.__name__
    coll = sys.modules.get("collections")
    for kind in ("deque", "defaultdict", "OrderedDict", "Counter"):
        base = getattr(coll, kind, None)
        if not isinstance(base, type) or not _own_repr(t, base):
            continue
        if kind == "deque":
            tail = "" if x.maxlen is None else ", maxlen=%d" % x.maxlen
            return base, name + "([", "]%s)" % tail, name + "([]%s)" % tail
        if kind == "defaultdict":
            head = "%s(%s, " % (name, _brief(x.default_factory, 80, 0))
            return base, head + "{", "})", head + "{})"
        return base, name + "({", "})", name + "()"
    array_type = getattr(sys.modules.get("array"), "array", None)
    if isinstance(array_type, type) and _own_repr(t, array_type) and x.typecode not in ("u", "w"):
        return array_type, "%s(%r, [" % (name, x.typecode), "])", "%s(%r)" % (name, x.typecode)
    return None  # (an array of characters shows as a string: its own repr)


def _brief_library(x, t, room):
    """numpy arrays and pandas objects through their own bounded forms, whatever display options
    the cell set (only once the cell imported them: nothing is imported here); None otherwise."""
    np = sys.modules.get("numpy")
    ndarray = getattr(np, "ndarray", None)
    if isinstance(ndarray, type) and issubclass(t, ndarray) and hasattr(np, "printoptions"):
        with np.printoptions(threshold=BRIEF_ITEMS * 10, edgeitems=3):  # the cell's options come back after
            return repr(x)
    mod = getattr(t, "__module__", None)
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(mod, str) or not (mod == "pandas" or mod.startswith("pandas.")):
        return None
    try:
        if issubclass(t, pd.DataFrame):
            s = x.to_string(max_rows=BRIEF_ROWS, max_cols=BRIEF_ITEMS, max_colwidth=50, show_dimensions=True)
        elif issubclass(t, pd.Series):
            s = x.to_string(max_rows=BRIEF_ROWS, length=True, dtype=True, name=True)
        else:
            s = None
        if isinstance(s, str):
            return s
    except TypeError:
        pass  # a pandas without one of these arguments: its repr, under the same bounds
    with pd.option_context("display.max_rows", BRIEF_ROWS, "display.max_columns", BRIEF_ITEMS,
                           "display.max_colwidth", 50, "display.max_seq_items", BRIEF_ITEMS):
        return repr(x)


def _brief(x, room, depth):
    """x's repr in about `room` characters (the caller cuts it exactly), built from no more of x
    than it shows."""
    t = type(x)
    if _own_repr(t, str):
        return _brief_chars(lambda a, b: str.__getitem__(x, slice(a, b)), str.__len__(x), room)
    if _own_repr(t, bytes):
        return _brief_chars(lambda a, b: memoryview(x)[a:b].tobytes(), bytes.__len__(x), room)
    if _own_repr(t, bytearray):
        inner = _brief_chars(lambda a, b: memoryview(x)[a:b].tobytes(), bytearray.__len__(x),
                             room - len(t.__name__) - 2)
        return "%s(%s)" % (t.__name__, inner)
    if _own_repr(t, int):
        bits = int.bit_length(x)
        if bits > BRIEF_INT_BITS:
            return "<int of %d bits, about %d decimal digits>" % (bits, int(bits * 0.30102999566398) + 1)
        return int.__repr__(x)
    try:
        s = _brief_container(x, t, room, depth)
        if s is None:
            s = _brief_library(x, t, room)
        if s is None:
            s = repr(x)
    except Exception:  # reprlib's marker for an object whose repr fails
        return "<%s instance at %#x>" % (t.__name__, id(x))
    return _cut_middle(s, room)


REPR_BUDGET_SECONDS = 0.1  # per value in variables/inspect: a lazy proxy must not stall a listing


class _Budget(object):
    """The time budget of the user code running now for variables, inspect or a snapshot."""

    __slots__ = ("clock", "expired", "watching")

    def __init__(self):
        self.clock = (None, 0.0, 0.0)  # main thread: (token of the code running now, its start, its budget)
        self.expired = None  # budget thread -> _on_sigint: the token whose budget ran out
        self.watching = None  # the request a budget thread watches


_budget = _Budget()


class _ReprTimedOut(KeyboardInterrupt):
    pass


def _repr_budget(r):
    """Thread: SIGINT the main thread once a value's repr has run past its budget. _on_sigint
    raises _ReprTimedOut only if that same repr is still running, so a late signal is dropped."""
    _block_sigint()
    sent = None
    while not r.done and _rq.active is r:
        tok, started, budget = _budget.clock
        if tok is not None and tok is not sent and _monotonic() - started > budget:
            sent = tok
            _budget.expired = tok
            try:
                _signal.pthread_kill(_main_ident, _signal.SIGINT)
            except Exception:
                return
        _sleep(0.02)


def _within_budget(r, fn, timed_out, interrupted, budget=REPR_BUDGET_SECONDS):
    """fn() inside a request, within `budget` seconds (pure-Python code; C code cannot be
    broken): `timed_out` when the budget ran out. An interrupt aimed at the request ends it (the
    caller's KeyboardInterrupt), while a KeyboardInterrupt the user's code raises by itself gives
    `interrupted` for this one value."""
    if r is not None and _rq.use_signal and _budget.watching is not r:
        _budget.watching = r
        _thread.start_new_thread(_repr_budget, (r,))
    _budget.clock = (object(), _monotonic(), budget)
    try:
        return fn()
    except _ReprTimedOut:
        return timed_out
    except KeyboardInterrupt:
        if r is None or r.kbi:
            raise
        return interrupted
    finally:
        _budget.clock = (None, 0.0, 0.0)


_TIMED_OUT = "<repr timed out after %d ms>" % (REPR_BUDGET_SECONDS * 1000)


def _guarded_repr(r, v, limit=120):
    """_short_repr of v, within the request's per-value budget."""
    return _within_budget(r, lambda: _short_repr(v, limit), _TIMED_OUT, "<repr failed: KeyboardInterrupt>")


def _guarded_fact(r, fn):
    """A fact about a user object (its len(), __doc__, dir()) within the same budget; None when it
    fails or runs out of time, so one odd object never fails an inspect."""
    def attempt():
        try:
            return fn()
        except Exception:
            return None
    return _within_budget(r, attempt, None, None)


def _type_name(v):
    t = type(v)
    mod = getattr(t, "__module__", "builtins")
    if mod in ("builtins", "__main__", None):
        return t.__qualname__
    return "%s.%s" % (mod, t.__qualname__)


VARIABLE_CHARS = 120  # one `variables` line, whatever the value
ELEMENTS_SAMPLED = 50  # of a container, for its element types
DIR_LISTED = 40  # attribute names in an inspect answer unless `full`
DOC_CHARS = 2000  # of a docstring's first paragraph unless `full` (then FULL_DOC_CHARS of all of it)
FULL_DOC_CHARS = 20000
FRAME_COLUMNS = 100  # columns (and their dtypes) of a DataFrame in an inspect answer


def _one_line(s):
    """A repr on one line: its line breaks (and the indentation after them) become one space."""
    if "\n" not in s:
        return s
    return " ".join(part.strip() for part in s.split("\n") if part.strip())


def _type_names(values):
    """The element type of a sample: `int`, `int | str`, or `mixed` past three kinds."""
    names = []
    for v in values:
        n = type(v).__name__
        if n not in names:
            names.append(n)
            if len(names) > 3:
                return "mixed"
    return " | ".join(names)


def _sample(it):
    out = []
    for v in it:
        out.append(v)
        if len(out) >= ELEMENTS_SAMPLED:
            break
    return out


def _container_kind(v, t):
    """`list[int] len 3`, `dict[str, int] len 2` for a builtin container (subclasses by their name),
    else None; built from its base type's own methods and a sample of its first items."""
    for base in (list, tuple, set, frozenset, dict):
        if isinstance(v, base):
            n = base.__len__(v)
            if n == 0:
                return "%s len 0" % t.__name__
            if base is dict:
                items = _sample(dict.items(v))
                inner = "%s, %s" % (_type_names(k for k, _ in items), _type_names(x for _, x in items))
            else:
                inner = _type_names(_sample(base.__iter__(v)))
            return "%s[%s] len %d" % (t.__name__, inner, n)
    return None


def _shape_text(shape):
    return "\u00d7".join(str(d) for d in shape) if isinstance(shape, tuple) else str(shape)


def _frame_facts(v):
    """(shape, [(column, dtype)]) of a DataFrame-like value (duck-typed: shape, columns and dtypes
    with items(); nothing is imported), or None."""
    t = type(v)
    if isinstance(v, type) or not all(hasattr(t, a) for a in ("shape", "columns", "dtypes")):
        return None
    shape = v.shape
    dtypes = v.dtypes
    if not isinstance(shape, tuple) or len(shape) != 2 or not hasattr(dtypes, "items"):
        return None
    cols = []
    for col, dtype in dtypes.items():
        cols.append((str(col), str(dtype)))
        if len(cols) >= FRAME_COLUMNS:
            break
    return shape, cols


def _array_facts(v):
    """(dtype, shape) of an ndarray-like value (shape and dtype on its type; a Series too), or None."""
    t = type(v)
    if isinstance(v, type) or not (hasattr(t, "shape") and hasattr(t, "dtype")):
        return None
    shape, dtype = v.shape, v.dtype
    if not isinstance(shape, tuple) or callable(dtype) and isinstance(dtype, type):
        return None
    return str(dtype), tuple(shape)  # a tuple subclass (torch.Size) as the plain tuple it is


def _what(v, limit=VARIABLE_CHARS):
    """One line that says what v is: `DataFrame 7×2 [a: float64, b: object]`, `ndarray float64
    (3, 4)`, `list[int] len 3: [1, 2, 3]`, `function f(x, y)`, else `type: short repr`; at most
    `limit` characters, never more than one line. A fact that fails (a property that raises) gives
    the `type: short repr` line instead: one odd value never fails a listing."""
    try:
        return _what_facts(v, limit)
    except Exception:
        return _cut_end("%s: %s" % (_type_name(v), _one_line(_short_repr(v, limit))), limit)


def _what_facts(v, limit):
    t = type(v)
    frame = _frame_facts(v)
    if frame is not None:
        shape, cols = frame
        line = "%s %s [%s]" % (t.__name__, _shape_text(shape), ", ".join("%s: %s" % c for c in cols))
        return line if len(line) <= limit else line[:limit - 4] + "...]"
    array = _array_facts(v)
    if array is not None and array[1] != ():
        return _cut_end("%s %s %s" % (t.__name__, array[0], tuple.__repr__(array[1])), limit)
    if isinstance(v, type):
        return _cut_end("class %s" % _type_name_of(v), limit)
    if t.__name__ in ("function", "builtin_function_or_method", "method") and hasattr(v, "__qualname__"):
        return _cut_end("%s %s%s" % (t.__name__, v.__qualname__, _signature_text(v) or "(...)"), limit)
    if t.__name__ == "module":
        return _cut_end("module %s" % getattr(v, "__name__", "?"), limit)
    head = _container_kind(v, t)
    if head is None and isinstance(v, (str, bytes, bytearray)) and len(v) > 40:
        head = "%s len %d" % (t.__name__, len(v))
    if head is None:
        head = _type_name(v)
    room = limit - len(head) - 2
    if room < 8:
        return _cut_end(head, limit)
    return "%s: %s" % (head, _cut_end(_one_line(_short_repr(v, room)), room))


def _cut_end(s, limit):
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _type_name_of(cls):
    mod = getattr(cls, "__module__", None)
    qual = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "?")
    return qual if mod in ("builtins", "__main__", None) else "%s.%s" % (mod, qual)


@_handler
def _h_variables(r):
    """Each name in one line that says what it is (_what); `form: "repr"` gives `type: short repr`
    instead (what a host compares to tell whether the namespace changed)."""
    form = r.msg.get("form", "line")
    if form not in ("line", "repr"):
        raise _RequestFailed("variables 'form' must be \"line\" or \"repr\", got %r" % (form,))
    out = {}
    names = _user_names()
    for name in names[:VARIABLES_LISTED]:
        v = _ns[name]
        r.in_user = True  # a user __repr__ may run long: interruptible
        try:
            _checkpoint(r)
            tn = _type_name(v)
            try:
                if form == "repr":
                    text = "%s: %s" % (tn, _guarded_repr(r, v))
                else:
                    text = _within_budget(r, lambda: _what(v), "%s: %s" % (tn, _TIMED_OUT),
                                          "%s: <repr failed: KeyboardInterrupt>" % tn)
            except _ReprTimedOut:  # landed just as the repr returned
                text = "%s: %s" % (tn, _TIMED_OUT)
            out[name] = text
        finally:
            r.in_user = False
    if len(names) > VARIABLES_LISTED:
        # A key no Python name can be: the listing says how much it left out.
        out["..."] = "%d more names not listed" % (len(names) - VARIABLES_LISTED)
    return {"variables": out}


VARIABLES_LISTED = 1000  # names in one `variables` answer: each is bounded, so the whole is too


def _lookup(name):
    """A dotted name in the namespace (then builtins); no evaluation of arbitrary code."""
    builtins = _builtins_mod
    parts = name.split(".")
    head = parts[0]
    if head in _ns:
        obj = _ns[head]
    elif hasattr(builtins, head):
        obj = getattr(builtins, head)
    else:
        raise _RequestFailed("name %r is not defined" % head)
    for i, attr in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, attr)
        except Exception:
            raise _RequestFailed("%r has no attribute %r" % (".".join(parts[:i]), attr))
    return obj


def _signature_text(obj):
    if not callable(obj):
        return None
    try:
        import inspect
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return None


@_handler
def _h_inspect(r):
    name = r.msg.get("name")
    if not isinstance(name, str) or not name:
        raise _RequestFailed("inspect needs a string 'name'")
    full = r.msg.get("full", False)
    if not isinstance(full, bool):
        raise _RequestFailed("inspect 'full' must be true or false, got %r" % (full,))
    obj = _lookup(name)
    r.in_user = True
    try:
        return {"info": _describe(name, obj, full)}
    finally:
        r.in_user = False


def _first_paragraph(doc):
    """A docstring's first paragraph (up to its first blank line), its lines' indentation dropped."""
    lines = []
    for line in doc.strip().split("\n"):
        if not line.strip():
            break
        lines.append(line.strip())
    return "\n".join(lines)


def _describe(name, obj, full=False):
    """What inspect says, the facts that size a value first (shape, dtypes, columns, len, element
    types), then repr, signature, docstring (its first paragraph unless `full`), module, file, keys,
    dir (public names, at most DIR_LISTED, unless `full`: every name). `more` counts what was left
    out ({"docstring": characters, "dir": names}), which `full` gives."""
    r = _rq.active
    info = {"name": name, "type": _type_name(obj)}
    more = {}
    _describe_size(r, obj, info)
    info["repr"] = _guarded_repr(r, obj, 2000)
    sig = _signature_text(obj)
    if sig is not None:
        info["signature"] = sig
    doc = _guarded_fact(r, lambda: getattr(obj, "__doc__", None))
    if isinstance(doc, str):
        whole = str.__getitem__(doc, slice(0, FULL_DOC_CHARS * 2)).strip()  # sliced first: a doc may be huge
        text = whole[:FULL_DOC_CHARS] if full else _first_paragraph(whole)[:DOC_CHARS]
        info["docstring"] = text  # the original awrepl's key
        if len(text) < len(doc.strip()):
            more["docstring"] = len(doc.strip()) - len(text)
    mod = getattr(obj, "__module__", None)
    if isinstance(mod, str):
        info["module"] = mod
    f = getattr(obj, "__file__", None)
    if isinstance(f, str):
        info["file"] = f
    if "columns" not in info and (isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__")
                                                            and not isinstance(obj, type))):
        def keys():
            out = []
            for k in obj.keys():
                if isinstance(k, str):  # as it is (not its repr), but cut like one
                    out.append(k if len(k) <= 200 else str.__getitem__(k, slice(0, 197)) + "...")
                else:
                    out.append(_short_repr(k))
                if len(out) >= 100:
                    break
            return out
        listed = _guarded_fact(r, keys)
        if isinstance(listed, list):
            info["keys"] = listed
    names = _guarded_fact(r, lambda: dir(obj))
    if isinstance(names, list):
        shown = [n for n in names if isinstance(n, str) and (full or not n.startswith("_"))]
        cap = VARIABLES_LISTED if full else DIR_LISTED
        info["dir"] = shown[:cap]  # the original awrepl's key
        if len(names) > len(info["dir"]):
            more["dir"] = len(names) - len(info["dir"])
    if more:
        info["more"] = more
    return info


def _describe_size(r, obj, info):
    """The facts that say how big a value is and what it holds, first in an inspect answer."""
    frame = _guarded_fact(r, lambda: _frame_facts(obj))
    if frame is not None:
        shape, cols = frame
        info["shape"] = tuple.__repr__(tuple(shape))
        info["columns"] = [c for c, _ in cols]
        info["dtypes"] = dict(cols)
    else:
        array = _guarded_fact(r, lambda: _array_facts(obj))
        if array is not None:
            info["shape"] = tuple.__repr__(array[1])
            info["dtype"] = array[0][:200]
    n = _guarded_fact(r, lambda: len(obj))
    if isinstance(n, int):
        info["len"] = n
    kind = _guarded_fact(r, lambda: _container_kind(obj, type(obj)))
    if kind is not None and n:
        info["elements"] = kind[kind.index("[") + 1:kind.rindex("]")]
    line = _within_budget(r, lambda: _what(obj), None, None)
    if isinstance(line, str):
        info["summary"] = line


@_handler
def _h_reset(r):
    _fresh_namespace()  # the same dict, emptied
    _fail_history.clear()
    return None


@_handler
def _h_list_names(r):
    return {"names": _user_names()}


def _facts():
    """Whoever reads requests (`info`): the facts `sessions` shows about the worker, measured where
    it runs (behind ssh or bwrap the host only sees its transport's process). Answered mid-cell
    too, with `busy` naming the running request."""
    f = {"pid": _pid, "own_group": _wd.own_group, "host": None, "cwd": None, "rss": None,
         "peak_rss": None, "python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
         "prefix": sys.prefix, "base_prefix": getattr(sys, "base_prefix", sys.prefix),
         "watchdog": _wd.beat_w >= 0, "busy": None}
    try:
        f["ppid"] = os.getppid()
        f["pgid"] = os.getpgid(0)
        f["uid"] = os.getuid()
        f["host"] = os.uname().nodename
    except (AttributeError, OSError):
        pass
    try:
        f["cwd"] = os.getcwd()
    except OSError:
        pass
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    f["rss"] = int(line.split()[1]) * 1024
                elif line.startswith(b"VmHWM:"):
                    f["peak_rss"] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        try:
            import resource
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            f["peak_rss"] = peak if sys.platform == "darwin" else peak * 1024
        except Exception:
            pass
    a = _rq.active
    if a is not None:
        f["busy"] = {"id": a.id, "type": a.type}
    return f


# ---------------------------------------------------------------------------------------------
# Editing help: complete, is_complete
# ---------------------------------------------------------------------------------------------

@_handler
def _h_complete(r):
    import re
    code = r.msg.get("code")
    if not isinstance(code, str):
        raise _RequestFailed("complete needs a string 'code'")
    cursor = r.msg.get("cursor")
    if cursor is None:
        cursor = len(code)
    if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor <= len(code):
        raise _RequestFailed("cursor must be an integer within the code, got %r" % (cursor,))
    text = code[:cursor]
    matches = []
    m = re.search(r"([A-Za-z_][\w.]*)\[\s*(['\"])([^'\"]*)$", text)
    if m:
        obj = _lookup_quiet(m.group(1))
        prefix = m.group(3)
        try:
            matches = [k for k in obj.keys() if isinstance(k, str) and k.startswith(prefix)]
        except Exception:
            matches = []
        return {"matches": sorted(set(matches))[:500]}
    m = re.search(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.(\w*)$", text)
    if m:
        obj = _lookup_quiet(m.group(1))
        if obj is _NOTHING:
            return {"matches": []}
        prefix = m.group(2)
        try:
            names = dir(obj)
        except Exception:
            names = []
        hide = not prefix.startswith("_")
        matches = ["%s.%s" % (m.group(1), n) for n in names
                   if n.startswith(prefix) and not (hide and n.startswith("_"))]
        return {"matches": sorted(set(matches))[:500]}
    m = re.search(r"[A-Za-z_]\w*$", text)
    if not m:
        return {"matches": []}
    builtins = _builtins_mod
    import keyword
    prefix = m.group(0)
    pool = set(_ns) | set(dir(builtins)) | set(keyword.kwlist)
    hide = not prefix.startswith("_")
    matches = [n for n in pool if n.startswith(prefix) and not (hide and n.startswith("_"))]
    return {"matches": sorted(matches)[:500]}


def _lookup_quiet(name):
    try:
        return _lookup(name)
    except Exception:
        return _NOTHING


@_handler
def _h_is_complete(r):
    code = r.msg.get("code")
    if not isinstance(code, str):
        raise _RequestFailed("is_complete needs a string 'code'")
    status, indent = _completeness(_habits_to_python(code, strict=False))
    return {"status": status, "indent": indent}


def _open_block(code):
    """True when the last statement sits inside an indented block (tokenize's view)."""
    import io
    import tokenize
    depth = 0
    nlines = code.count("\n") + 1
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.INDENT:
                depth += 1
            elif tok.type == tokenize.DEDENT:
                if tok.start[0] > nlines or (tok.start[0] == nlines and not code.split("\n")[-1].strip()):
                    break  # the dedents tokenize adds at end of input
                depth -= 1
    except (tokenize.TokenError, SyntaxError):
        return False
    return depth > 0


def _completeness(code):
    """complete | incomplete | invalid, and the indent the next line should get."""
    import codeop
    if not code.strip():
        return "complete", ""
    cc = codeop.CommandCompiler()
    cc.compiler.flags |= _TLA
    try:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = cc(code, "<input>", "exec")
    except (SyntaxError, ValueError, OverflowError, MemoryError):
        return "invalid", ""
    lines = [ln for ln in code.split("\n") if ln.strip()]
    last = lines[-1] if lines else ""
    indent = last[:len(last) - len(last.lstrip())]
    if compiled is None:
        if last.split("#")[0].rstrip().endswith(":"):
            indent += "    "
        return "incomplete", indent
    # It compiles, but a block still open at the end wants an empty line to finish it.
    if _open_block(code) and not (code.endswith("\n") and code.rstrip(" \t").endswith("\n\n")):
        return "incomplete", indent
    return "complete", ""


# ---------------------------------------------------------------------------------------------
# Signatures: the published-call index and the call-shape remedies drawn from it
# ---------------------------------------------------------------------------------------------

_sig_index = {}  # short and qualified names -> ("qualified(signature)", the callable)

_CALL_SHAPE = (r"^([A-Za-z_][\w.]*)\(\) (got an unexpected keyword argument '(\w+)'|missing \d+ required"
               r"|takes |got multiple values|got some positional-only)")


def _public_calls(mod):
    names = getattr(mod, "__all__", None)
    if not isinstance(names, (list, tuple)):
        names = [n for n in dir(mod) if not n.startswith("_")]
    out = []
    for n in names:
        try:
            obj = getattr(mod, n)
        except Exception:
            continue
        if not callable(obj) or type(obj).__name__ == "module":
            continue
        if getattr(obj, "__module__", None) != mod.__name__ and not isinstance(getattr(mod, "__all__", None), (list, tuple)):
            continue  # re-exported imports are someone else's calls
        out.append((n, obj))
    return out


def _shape_line(name, cls):
    fields = getattr(cls, "__dataclass_fields__", None)
    if isinstance(fields, dict):
        items = [(k, getattr(f, "type", None)) for k, f in fields.items()]
    elif isinstance(getattr(cls, "_fields", None), tuple) or getattr(cls, "__total__", None) is not None:
        ann = getattr(cls, "__annotations__", {}) or {}
        items = list(ann.items()) or [(f, None) for f in getattr(cls, "_fields", ())]
    else:
        return None

    def tname(t):
        if t is None:
            return "Any"
        if isinstance(t, str):
            return t
        return getattr(t, "__name__", None) or str(t).replace("typing.", "")
    return "%s: {%s}" % (name, ", ".join("%s: %s" % (k, tname(t)) for k, t in items))


@_handler
def _h_signatures(r):
    import importlib
    mods = r.msg.get("modules")
    if mods is not None and (not isinstance(mods, list) or not all(isinstance(m, str) for m in mods)):
        raise _RequestFailed("modules must be a list of strings")
    targets, failed = [], []
    if mods is None:
        for k in _user_names():  # the user's own modules in the namespace stand in for skills
            v = _ns[k]
            if type(v).__name__ == "module" and not _is_installed(v):
                targets.append((k, v))
    else:
        for name in mods:
            try:
                targets.append((name, importlib.import_module(name)))
            except BaseException as e:
                if isinstance(e, KeyboardInterrupt):
                    raise
                failed.append({"name": name, "reason": "%s: %s" % (type(e).__name__, _safe_str(e))[:500]})
    index, lines, shapes = {}, [], []
    for alias, mod in targets:
        for n, obj in _public_calls(mod):
            sig = _signature_text(obj)
            if sig is None:
                continue
            text = "%s.%s%s" % (alias, n, sig)
            index[n] = index["%s.%s" % (alias, n)] = (text, obj)
            lines.append(text)
            if isinstance(obj, type):
                line = _shape_line("%s.%s" % (alias, n), obj)
                if line:
                    shapes.append(line)
    _sig_index.clear()
    _sig_index.update(index)
    return {"calls": len(lines), "failed": failed, "digest": "\n".join(lines + shapes)}


def _is_installed(mod):
    """True for the stdlib, builtins and installed packages: only the user's own modules (the
    project's, PYTHONPATH's) stand in for skills."""
    f = getattr(mod, "__file__", None)
    if not f:
        return True
    parts = os.path.abspath(f).split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    import sysconfig
    std = sysconfig.get_paths().get("stdlib", "")
    return bool(std) and os.path.abspath(f).startswith(os.path.abspath(std) + os.sep)


def _remedies(e):
    """For a call-shape TypeError: the signature of the callee, and the nearest legal name."""
    if type(e) is not TypeError or not e.args or not isinstance(e.args[0], str):
        return []
    import re
    m = re.match(_CALL_SHAPE, e.args[0])  # compiled once: re keeps it
    if not m:
        return []
    qual = m.group(1)
    short = qual.rsplit(".", 1)[-1]
    entry = _sig_index.get(qual) or _sig_index.get(short)
    sig = entry[0] if entry else None
    obj = entry[1] if entry else _find_callee(e, qual)
    params = None
    if obj is not _NOTHING:
        try:
            import inspect
            s = inspect.signature(obj)
            params = [p.name for p in s.parameters.values()
                      if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)]
            if sig is None:
                sig = "%s%s" % (qual, s)
        except (TypeError, ValueError):
            pass
    if sig is None:
        return []
    out = ["[awrepl] Signature: %s\n" % sig]
    bad = m.group(3)
    if bad and params:
        import difflib
        near = difflib.get_close_matches(bad, params, n=1, cutoff=0.5)
        if near:
            out.append("[awrepl] Did you mean %s=...? (%r is not a parameter of %s)\n" % (near[0], bad, qual))
    return out


def _find_callee(e, qual):
    """Resolve the called name in the frame that made the call (the innermost one left)."""
    builtins = _builtins_mod
    tb = e.__traceback__
    frame = None
    while tb is not None:
        frame = tb.tb_frame
        tb = tb.tb_next
    scopes = [frame.f_locals, frame.f_globals] if frame is not None else []
    scopes.append(_ns)
    parts = [p for p in qual.split(".") if p != "<locals>"]
    for scope in scopes:
        obj = scope.get(parts[0], _NOTHING) if isinstance(scope, dict) else _NOTHING
        if obj is _NOTHING:
            continue
        try:
            for p in parts[1:]:
                obj = getattr(obj, p)
            return obj
        except Exception:
            continue
    obj = getattr(builtins, parts[0], _NOTHING)
    return obj if len(parts) == 1 else _NOTHING


# ---------------------------------------------------------------------------------------------
# Snapshots: snapshot / restore, dill when importable, else pickle (names it cannot save are
# skipped)
# ---------------------------------------------------------------------------------------------

SNAPSHOT_FORMAT = 1
_NEVER_RESTORE = frozenset(["In", "Out", "get_ipython"])
# A __main__ global reference in a protocol-4/5 pickle: the module name as a SHORT_BINUNICODE. The
# first use of any string in a stream is written out in full (later ones may be memo references),
# so a stream without these bytes refers to nothing defined in a cell.
_MAIN_REF = b"\x8c\x08__main__"
# Names the snapshot filter drops that a saved function may still call (a `_helper`, `asyncio`):
# saved beside the names as support, restored only where the namespace lacks them.
_SUPPORT_SKIP = frozenset(["_", "In", "Out", "get_ipython", "exit", "quit", "open"])


class _Codec(object):
    """Serialises one value at a time, the cheapest way that restores it right.

    Plain data goes through the C pickler (dill's pure-Python pickler is ~60x slower), and modules
    by name (importing dill costs more than most snapshots). A cell-defined class bound in the
    namespace under its own name is saved BY REFERENCE wherever it occurs inside another value
    (awrepl._class_ref(name), resolved against the namespace at restore, where classes are
    restored first): instances in lists and dicts then belong to the session's class, not to a
    copy of it. The names referenced this way are collected in `refs`. A value whose stream still
    refers to __main__ (functions, classes themselves, instances of unbound classes) or that pickle
    cannot save goes to dill when importable, without recurse mode: a cell function's globals are
    then saved as a reference to __main__'s dict, so restored into the session's namespace it
    reads and writes the live globals (recurse mode would give each function a private copy of
    them, functions in containers included). The global names of every code object dill writes
    are collected in `needed`, so filtered names they use can be saved too. Without dill, modules
    are saved by name and cell definitions are refused with a reason.
    """

    def __init__(self):
        self.pickle = _imp("pickle")
        self.needed = set()
        self.refs = set()  # cell classes the last dump() referenced by name
        self._top = None  # the value being saved: a class saved as itself is saved by value
        self._dill = None
        self._dill_pickler = None
        self._c_pickler = None

    def _reduce(self, obj):
        """reducer_override of both picklers: cell classes by reference, modules by name."""
        t = type(obj)
        if t is type(sys):
            # Modules travel by name: `import json` survives a snapshot without dill.
            name = getattr(obj, "__name__", None)
            if name and sys.modules.get(name) is obj and name not in ("__main__", "awrepl"):
                return _imp("importlib").import_module, (name,)
        elif isinstance(obj, type) and obj is not self._top:
            name = _cell_class_name(obj)
            if name is not None:
                self.refs.add(name)
                return _class_ref, (name,)
        return NotImplemented

    def dump(self, v, out):
        """Stream v into `out`, a _PayloadFile record; the kind, "pickle" or "dill" (raises what
        the fallback raises). A failed attempt is rewound: the record holds the one that worked."""
        self._top = v
        self.refs = set()
        first = None
        out.scan = True
        try:
            self._dump_c(v, out)
            if not out.main_ref:
                return "pickle"
        except Exception as e:
            if out.error is not None:
                raise
            first = e
        finally:
            out.scan = False
        self.refs = set()
        out.rewind()
        if self._load_dill():
            self._dump_dill(v, out)
            return "dill"
        if first is not None:
            raise first
        raise TypeError("pickle cannot save functions or classes defined in cells (dill can)")

    def _dump_c(self, v, f):
        pickle = self.pickle
        if self._c_pickler is None:
            reduce = self._reduce

            class Pickler(pickle.Pickler):
                def reducer_override(self, obj):
                    return reduce(obj)
            self._c_pickler = Pickler
        self._c_pickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(v)

    def _load_dill(self):
        if self._dill is None:
            try:
                import dill
                self._dill = dill
            except Exception:
                self._dill = False
        return self._dill

    def _dump_dill(self, v, f):
        if self._dill_pickler is None:
            code_type = type(_dill_probe.__code__)
            needed = self.needed
            reduce = self._reduce

            class Pickler(self._dill.Pickler):
                def persistent_id(self, obj):
                    if type(obj) is code_type:
                        needed.update(obj.co_names)
                    return None

                def reducer_override(self, obj):
                    return reduce(obj)
            self._dill_pickler = Pickler
        p = self._dill_pickler(f, self.pickle.HIGHEST_PROTOCOL, byref=False, recurse=False)
        p._main = _user_module  # dill's own notion of __main__ is fixed when dill is imported
        p.dump(v)

    def loader(self, kind, from_file=False):
        """The loads for `kind` (load, reading a file at a record's offset, with from_file), or None
        when it is dill and dill is not importable."""
        if kind != "dill":
            return self.pickle.load if from_file else self.pickle.loads
        dill = self._load_dill()
        if not dill:
            return None

        def loads(src):
            u = dill.Unpickler(src if from_file else _imp("io").BytesIO(src))
            u._main = _user_module  # a function's globals reference resolves to the live namespace
            return u.load()
        return loads


def _cell_class_name(cls):
    """The name a cell-defined class is bound to in the namespace under its own name, else None."""
    try:
        if cls.__module__ != "__main__":
            return None
        name = cls.__qualname__
    except Exception:
        return None
    if type(name) is str and _ns.get(name) is cls:
        return name
    return None


class ClassNotRestoredError(LookupError):
    pass


def _class_ref(name):
    """awrepl._class_ref: a snapshot's reference to the session's class `name` (see _Codec)."""
    cls = _ns.get(name)
    if not isinstance(cls, type):
        raise ClassNotRestoredError("needs the class %r, which was not restored" % (name,))
    return cls


def _dill_probe():
    pass


def _support_names(needed, taken):
    """The filtered-out names of the namespace that saved cell code uses (see _SUPPORT_SKIP)."""
    out = []
    for k in needed:
        if k in taken or k not in _ns or k in _SUPPORT_SKIP:
            continue
        if k.startswith("__") and k.endswith("__"):
            continue
        if k.startswith("_") or k in _SKIP_NAMES:
            out.append(k)
    return sorted(out)


def _atomic_write(path, data):
    """Write a temp file beside path, then rename it over path: data, or what the function data(fd)
    writes (its value is returned). Created 0600: a snapshot holds the session's variables (tokens,
    data), and a path the user names may be in a shared directory."""
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    try:
        try:
            os.unlink(tmp)  # a killed writer's leftover: O_EXCL below must create a fresh 0600 file
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        if callable(data):
            try:
                value = data(fd)
            finally:
                os.close(fd)
        else:
            with open(fd, "wb") as f:
                f.write(data)
            value = None
        os.replace(tmp, path)
        return value
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_MANIFEST_KEYS = ("version", "savedNames", "timestamp")
MANIFEST_MAX_BYTES = 16 << 20


def _check_manifest_target(path):
    """Refuse to replace a file at manifest_path that is not an awrepl manifest: the manifest
    name is derived from the snapshot's (x.pkl -> x.json), so it may be a file of the user's."""
    if not os.path.lexists(path):
        return
    refuse = "refusing to overwrite %s: it exists and is not an awrepl snapshot manifest " \
             "(move it away or snapshot to another path)" % path
    if not os.path.isfile(path) or os.path.getsize(path) > MANIFEST_MAX_BYTES:
        raise _RequestFailed(refuse)
    try:
        with open(path, "rb") as f:
            m = _loads(f.read().decode("utf-8"))
    except OSError as e:
        raise _RequestFailed("cannot read the existing manifest %s: %s" % (path, e.strerror or e))
    except ValueError:  # not UTF-8, not JSON
        raise _RequestFailed(refuse)
    if not isinstance(m, dict) or not all(k in m for k in _MANIFEST_KEYS):
        raise _RequestFailed(refuse)


def _manifest_text(manifest):
    try:
        return _imp("json").dumps(manifest, indent=2) + "\n"
    except Exception:  # the json package taken away by a cell: the runtime's own encoder
        return _enc(manifest) + "\n"


def _int_field(r, key):
    v = r.msg.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _RequestFailed("%s must be a non-negative integer, got %r" % (key, v))
    return v


def _drop_orphans(deps, blobs, support, kinds, saved, skipped):
    """A value referring to a class that is not saved could not be restored: skip it, with why."""
    changed = True
    while changed:
        changed = False
        for name in [n for n in deps if n in blobs or n in support]:
            missing = sorted(c for c in deps[name] if c not in blobs and c not in support)
            if not missing:
                continue
            blobs.pop(name, None)
            support.pop(name, None)
            kinds.pop(name, None)
            if name in saved:
                saved.remove(name)
                skipped.append({"name": name, "reason": "needs the class %s, which was not saved"
                                % ", ".join(missing)})
            changed = True


def _restore_rank(name):
    v = _ns.get(name)
    if isinstance(v, type):
        try:
            return (0, len(v.__mro__))
        except Exception:
            return (0, 0)
    return (1, 0)


# Restore payloads sent by the host (restore "from": "host"): the reader thread collects the data
# requests into a buffer of the declared size, the restore handler waits for it on the main thread.
# With "binary": true the pieces are raw bytes after a header line (_read_requests reads them straight
# into the buffer, hashing as they come) and the host's sha256 arrives in a closing data request.
_inbound = {}


class _Inbound(object):
    __slots__ = ("req", "expected", "buf", "got", "error", "ready", "binary", "hash", "sha256")

    def __init__(self, req, expected):
        self.req = req
        self.expected = expected
        self.binary = req.msg.get("binary") is True  # raw frames, the sha256 after the last one
        self.hash = _imp("hashlib").sha256() if self.binary else None  # of the bytes as they come
        self.sha256 = None  # the host's, from the closing data request
        self.buf = bytearray(expected)  # the host's declared size; the host enforces the snapshot cap
        self.got = 0
        self.error = None
        self.ready = _held_lock()  # released once every byte (or an error) is in


def _open_inbound(r):
    expected = r.msg.get("bytes")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        return  # the handler refuses the request
    if r.msg.get("binary") is True:
        _widen_pipe(_rd.fd)
    try:
        ib = _Inbound(r, expected)
    except MemoryError:
        ib = _Inbound(r, 0)
        ib.error = "no memory for a payload of %d bytes" % expected
    _inbound[r.id] = ib
    if ib.error is not None or (expected == 0 and not ib.binary):
        ib.ready.release()


def _data_line(line):
    """A data request in the exact shape hosts write ({"type":"data","id":"ID","data":"B64"}),
    fed without decoding it as UTF-8 and JSON (a restore's payload is mostly these lines).
    False for any other shape: the line then takes the general path."""
    q = line.find(b'"', len(_DATA_HEAD))
    if q < 0 or not line.startswith(b',"data":"', q + 1) or not line.endswith(b'"}'):
        return False
    rid = line[len(_DATA_HEAD):q]
    if b"\\" in rid:
        return False
    _feed_inbound(rid.decode("utf-8", "replace"), line[q + 10:-2])
    return True


def _feed_inbound(rid, data):
    """Whoever reads requests: the next piece of restore rid's payload."""
    ib = _inbound.get(rid)
    if ib is None:
        return
    if ib.req.done:  # interrupted before it ran: its buffer goes now, the rest of its pieces too
        _inbound.pop(rid, None)
        return
    if ib.error is not None or not ib.ready.locked():
        return  # failed or complete: the rest is dropped
    if ib.binary:
        return _fail_one(rid, "a base64 data piece arrived for a binary restore")
    try:
        piece = _imp("binascii").a2b_base64(data)
    except (TypeError, ValueError) as e:
        ib.error = "a data piece is not base64: %s" % e
        ib.ready.release()
        return
    end = ib.got + len(piece)
    if end > ib.expected:
        ib.error = "the host sent %d bytes, more than the %d declared" % (end, ib.expected)
        ib.buf = None
        ib.ready.release()
        return
    ib.buf[ib.got:end] = piece  # preallocated: no regrowth copies
    ib.got = end
    if end == ib.expected:
        ib.ready.release()


PIPE_WIDE = 1 << 20  # Linux's default pipe-max-size: what an unprivileged process may ask for


def _widen_pipe(fd):
    """A pipe of 1 MiB instead of 64 KiB for a payload's frames: fewer, fuller reads and writes on
    both sides (Linux; elsewhere, or when it is not a pipe, nothing changes)."""
    try:
        _imp("fcntl").fcntl(fd, 1031, PIPE_WIDE)  # F_SETPIPE_SZ
    except (OSError, ImportError, AttributeError, ValueError):
        pass


def _raw_in(mv):
    """Whoever reads requests: raw bytes of a binary frame, read with lines (a copy; most go
    straight into the buffer, see _read_requests)."""
    ib = _inbound.get(_rd.raw_id)
    if ib is None:
        return
    if ib.req.done:
        _inbound.pop(_rd.raw_id, None)
        return
    if ib.error is not None or not ib.ready.locked():
        return
    if not ib.binary:
        return _fail_one(_rd.raw_id, "a binary data frame arrived for a base64 restore")
    end = ib.got + len(mv)
    if end > ib.expected:
        return _fail_one(_rd.raw_id, "the host sent %d bytes, more than the %d declared" % (end, ib.expected))
    ib.buf[ib.got:end] = mv
    ib.hash.update(mv)
    ib.got = end


def _end_inbound(rid, sha256):
    """A binary restore's closing line: every byte is in (or the restore fails), its hash known."""
    ib = _inbound.get(rid)
    if ib is None or not ib.ready.locked():
        return
    if ib.got + (_rd.raw_left if _rd.raw_id == rid else 0) > ib.expected:
        return _fail_one(rid, "the host sent more than the %d bytes declared" % ib.expected)
    if ib.got != ib.expected:
        return _fail_one(rid, "the host sent %d bytes of the %d declared" % (ib.got, ib.expected))
    if not isinstance(sha256, str):
        return _fail_one(rid, "the closing data request needs a string sha256")
    ib.sha256 = sha256
    ib.ready.release()


def _fail_one(rid, reason):
    ib = _inbound.get(rid)
    if ib is not None and ib.ready.locked():
        ib.error = reason
        ib.buf = None
        ib.ready.release()


def _fail_inbound(reason):
    for ib in list(_inbound.values()):
        if ib.ready.locked():
            ib.error = reason
            ib.ready.release()


SNAPSHOT_CHUNK = 1 << 18  # raw bytes per data event (350 KB of base64)
SNAPSHOT_BINARY_CHUNK = 1 << 20  # raw bytes per binary frame
SNAPSHOT_CHUNK_MAX = 1 << 24


def _snapshot_manifest(saved, skipped, pruned, size, kind, kinds, support):
    return {"version": SNAPSHOT_FORMAT, "savedNames": saved, "skipped": skipped, "pruned": pruned,
            "bytes": size, "pythonVersion": "%d.%d.%d" % sys.version_info[:3],
            "timestamp": _time(), "serializer": kind, "serializers": kinds,
            "support": sorted(support)}


class _DataStream(object):
    """Where a _PayloadFile sends a payload to the host: ships what it is given as data events of
    `chunk` raw bytes (base64), so the payload is never held whole here; counts and hashes it. An
    interrupt lands between two pieces (the host then drops what it received)."""

    def __init__(self, r, chunk, binary=False):
        self.req = r
        self.binary = binary  # a header line, then the piece's raw bytes (no base64)
        if binary:
            _widen_pipe(_out.fd)
        self.head = ('{"event":"data","id":%s,"seq":' % _esc_ascii(r.id)).encode("ascii")
        self.b64 = _imp("binascii").b2a_base64
        self.chunk = chunk
        self.buf = bytearray()
        self.seq = 0
        self.bytes = 0
        self.hash = _imp("hashlib").sha256()

    def write(self, b):
        mv = memoryview(b).cast("B")  # a big bytes object pickle hands over as is: sliced, not copied
        n = len(mv)
        c = self.chunk
        i = 0
        if self.buf or n < c:
            i = min(c - len(self.buf), n)
            self.buf += mv[:i]
            if len(self.buf) < c:
                return n
            self._ship(self.buf)
            self.buf = bytearray()
        while n - i >= c:
            self._ship(mv[i:i + c])
            i += c
        if i < n:
            self.buf += mv[i:]
        return n

    def _ship(self, piece):
        _checkpoint(self.req)
        self.hash.update(piece)
        self.bytes += len(piece)
        if self.binary:
            header = b"".join((self.head, b"%d" % self.seq, b',"bytes":%d}\n' % len(piece)))
            self.seq += 1
            return _write_events(header, piece)
        frame = b"".join((self.head, b"%d" % self.seq, b',"data":"',
                          self.b64(piece, newline=False), b'"}\n'))
        self.seq += 1
        _write_event(frame)

    def close(self):
        if self.buf:
            self._ship(self.buf)
            self.buf = bytearray()

    @property
    def sha256(self):
        return self.hash.hexdigest()


class _PayloadFile(object):
    """A snapshot's payload as it is written (format 2), straight into its file (path) or a
    _DataStream (to the host), never as a second copy of the namespace in memory: MAGIC, then
    each name's pickle as a record of its own, then the index (a pickle of {format, serializer,
    serializers, names: {name: [offset, length]}, support: {...}}, names in restore order), then
    the index's offset (8 bytes, little-endian) and MAGIC again: a file without that trailer is
    torn. A pickler writes into the current record (begin); a name that fails, or goes over its
    room, is rewound (cut off), so a record holds one whole pickle or nothing.

    A record starts where everything before it is already out (begin flushes): a rewind, wherever
    an interrupt or the time budget cut the writing, cuts the file back to that offset. Into a file,
    small writes (the pickler's frames) are gathered and big ones (a value's own bytes, which the C
    pickler writes by themselves: PEP 574) go out as they come. To the host a record is held until it
    is kept, as references to the pickler's pieces (the value's own buffers: no copy), since what
    was sent cannot be taken back."""

    MAGIC = b"AWREPL\x02\n"
    GATHER = 1 << 20
    SLICE = 1 << 26  # a big write goes out in slices, an interrupt checked between two

    def __init__(self, r, fd=None, stream=None):
        self.req = r
        self.fd = fd
        self.stream = stream
        self.pickle = _imp("pickle")
        self.pieces = []  # not yet out: bytes-like objects, the last one a bytearray gathering
        self.start = self.end = 0  # the current record's offset; the end of the last one kept
        self.size = 0  # the current record's bytes, counted on past its room
        self.room = None
        self.over = False
        self.scan = False  # look for a __main__ reference in what the C pickler writes
        self.main_ref = False
        self.error = None  # writing failed (disk full): the snapshot fails, not the name
        self.index = {"names": {}, "support": {}}
        self.begin(None)
        self.write(self.MAGIC)
        self.keep(None, False)

    def begin(self, room):
        """Start a record: at most `room` bytes (None: any), at the end of the last one kept."""
        self._flush()
        self.start = self.end
        self.size = 0
        self.room = room
        self.over = False
        self.main_ref = False

    def write(self, b):
        if type(b) is not bytes:
            try:
                b = memoryview(b).cast("B")
            except TypeError:
                b = b.raw()  # a PickleBuffer of a Fortran-ordered array
        n = len(b)
        self.size += n
        if self.scan and not self.main_ref and type(b) is bytes and (n < 65536 or self._frame(b)) and _MAIN_REF in b:
            self.main_ref = True
        if self.over or (self.room is not None and self.size > self.room):
            self.over = True  # counted, not written: the record is rewound
            return n
        last = self.pieces[-1] if self.pieces else None
        if n < self.GATHER and type(last) is bytearray and len(last) < self.GATHER:
            last += b
        elif n < self.GATHER:
            self.pieces.append(bytearray(b))
        else:
            self.pieces.append(b)  # held by reference: the pickler's own object
        if self.fd is not None and (n >= self.GATHER or len(self.pieces) > 1):
            self._flush()
        return n

    @staticmethod
    def _frame(b):
        """Whether a big write is one of the C pickler's frames (FRAME and its 8-byte length, after
        PROTO at the start, perhaps followed by the opcode of a value whose bytes come next), which
        may hold a __main__ reference, rather than a value's own bytes, which hold none (scanning a
        1 GiB bytes value took 0.65 s)."""
        i = 2 if b[0] == 0x80 else 0
        if b[i] != 0x95:
            return False
        end = i + 9 + int.from_bytes(b[i + 1:i + 9], "little")
        return end <= len(b) <= end + 9

    def rewind(self):
        """Cut the current record off: its attempt failed, or it went over its room."""
        self.pieces = []
        if self.fd is not None:
            os.ftruncate(self.fd, self.start)
            os.lseek(self.fd, self.start, 0)
        self.size = 0
        self.over = False
        self.main_ref = False

    def keep(self, name, support):
        """The current record is whole: list it in the index (name None: the header)."""
        if self.fd is not None:
            self._flush()
        if name is not None:
            self.index["support" if support else "names"][name] = (self.start, self.size)
        self.end = self.start + self.size
        self.room = None

    def _flush(self):
        while self.pieces:
            piece = self.pieces[0]
            if self.fd is None:
                self.stream.write(piece)  # ships in chunks, checking for an interrupt between two
            else:
                mv = memoryview(piece)
                try:
                    while mv:
                        _checkpoint(self.req)
                        mv = mv[os.write(self.fd, mv[:self.SLICE]):]
                except OSError as e:
                    self.error = e
                    raise
            del self.pieces[0]

    def finish(self, index, durable=True):
        """The index and trailer after the records kept; the payload's size. A file is made durable
        (fsync, before it is renamed into place) unless told otherwise."""
        self.begin(None)
        at = self.start
        self.pickle.Pickler(self, protocol=self.pickle.HIGHEST_PROTOCOL).dump(index)
        self.keep(None, False)
        self.begin(None)
        self.write(at.to_bytes(8, "little") + self.MAGIC)
        self.keep(None, False)
        self._flush()
        if self.fd is None:
            self.stream.close()
        elif durable:
            os.fsync(self.fd)
        return self.end

    @staticmethod
    def serializer(kinds):
        return "dill" if "dill" in kinds.values() else "pickle"  # what a restore needs

    def index_of(self, kinds):
        """The payload's index: classes first, bases before subclasses (values refer to them by
        name, see _Codec)."""
        names, support = self.index["names"], self.index["support"]
        return {"format": 2, "serializer": self.serializer(kinds), "serializers": kinds,
                "names": dict((n, names[n]) for n in sorted(names, key=_restore_rank)),
                "support": dict((n, support[n]) for n in sorted(support, key=_restore_rank))}

    @classmethod
    def records(cls, read, size):
        """The index of a format 2 payload of `size` bytes, read(offset, n) giving its bytes, each
        record's bounds checked; None for a format 1 payload (one pickle of {format, names:
        {name: blob}, ...})."""
        if size < len(cls.MAGIC) or bytes(read(0, len(cls.MAGIC))) != cls.MAGIC:
            return None
        tail = 8 + len(cls.MAGIC)
        trailer = bytes(read(max(0, size - tail), tail))
        at = int.from_bytes(trailer[:8], "little")
        if len(trailer) != tail or trailer[8:] != cls.MAGIC or not len(cls.MAGIC) <= at <= size - tail:
            raise ValueError("the payload is torn: the index at its end is missing")
        index = _imp("pickle").loads(read(at, size - tail - at))
        for key in ("names", "support"):
            for name, (offset, length) in index[key].items():
                if not (type(name) is str and len(cls.MAGIC) <= offset and offset + length <= at):
                    raise ValueError("record %r lies outside the payload" % (name,))
        return index


@_handler
def _h_snapshot(r):
    path = r.msg.get("path")
    manifest_path = r.msg.get("manifest_path")
    to_host = r.msg.get("to") == "host"
    prune = bool(r.msg.get("prune_oversized"))
    if to_host:
        if prune:
            raise _RequestFailed("prune_oversized needs a path: a payload sent to the host may not be kept")
        binary = r.msg.get("binary") is True
        chunk = _int_field(r, "chunk_bytes") or (SNAPSHOT_BINARY_CHUNK if binary else SNAPSHOT_CHUNK)
        if chunk > SNAPSHOT_CHUNK_MAX:
            raise _RequestFailed("chunk_bytes must be at most %d, got %d" % (SNAPSHOT_CHUNK_MAX, chunk))
    elif not isinstance(path, str) or not path or not isinstance(manifest_path, str) or not manifest_path:
        raise _RequestFailed("snapshot needs string 'path' and 'manifest_path' (or 'to': 'host')")
    max_bytes = _int_field(r, "max_bytes")
    max_var = _int_field(r, "max_variable_bytes")
    max_ms = _int_field(r, "max_variable_ms")  # a name slower to pickle is skipped, not the snapshot
    if to_host:
        stream = _DataStream(r, chunk, binary)
        out = _PayloadFile(r, stream=stream)
        saved, skipped, pruned, kinds, support = _snapshot_names(r, out, max_bytes, max_var, max_ms, False)
        size = out.finish(out.index_of(kinds))
        manifest = _snapshot_manifest(saved, skipped, pruned, size, _PayloadFile.serializer(kinds), kinds, support)
        return {"saved": saved, "skipped": skipped, "pruned": [], "bytes": size,
                "sha256": stream.sha256, "manifest": manifest}
    _check_manifest_target(manifest_path)  # before anything is written

    durable = r.msg.get("fsync") is not False  # fsync before the rename: ~3 ms for a small payload

    def fill(fd):
        out = _PayloadFile(r, fd=fd)
        names = _snapshot_names(r, out, max_bytes, max_var, max_ms, prune)
        return names, out.finish(out.index_of(names[3]), durable)
    try:
        (saved, skipped, pruned, kinds, support), size = _atomic_write(path, fill)
    except OSError as e:
        raise _RequestFailed("cannot write snapshot %s: %s" % (path, e.strerror or e))
    manifest = _snapshot_manifest(saved, skipped, pruned, size, _PayloadFile.serializer(kinds), kinds, support)
    try:
        _atomic_write(manifest_path, _manifest_text(manifest).encode())
    except OSError as e:
        raise _RequestFailed("cannot write manifest %s: %s" % (manifest_path, e.strerror or e))
    for name in pruned:  # only once everything is on disk
        _ns.pop(name, None)
    return {"saved": saved, "skipped": skipped, "pruned": pruned, "bytes": size}


def _snapshot_names(r, out, max_bytes, max_var, max_ms, prune):
    """Each name into a record of `out`, one at a time: (saved, skipped, pruned, kinds, support
    names). A name that cannot be saved, is too big or too slow is skipped with why."""
    codec = _Codec()
    saved, skipped, pruned, kinds = [], [], [], {}
    deps = {}  # name -> the cell classes its value refers to by name
    total = 0
    pending = _user_names()
    support_round = False
    while pending:
        for name in pending:
            room = max_var
            if max_bytes is not None:
                room = max_bytes - total if room is None else min(room, max_bytes - total)
            _checkpoint(r)
            out.begin(room)  # outside the time budget: a record starts where the kept ones end
            r.in_user = True  # user __reduce__ / __getstate__ run here: interruptible
            try:
                if max_ms:
                    kind = _within_budget(r, lambda: codec.dump(_ns[name], out), "slow", "interrupted", max_ms / 1000.0)
                    if kind in ("slow", "interrupted"):
                        out.rewind()
                        why = "took longer than %d ms to pickle" % max_ms if kind == "slow" else "KeyboardInterrupt while pickling"
                        skipped.append({"name": name, "reason": why})
                        continue
                else:
                    kind = codec.dump(_ns[name], out)
                if codec.refs:
                    deps[name] = codec.refs
                    codec.needed.update(codec.refs)  # a _Private class is saved as support
            except KeyboardInterrupt:
                raise
            except BaseException as e:
                if out.error is not None:
                    raise out.error
                out.rewind()
                skipped.append({"name": name, "reason": "%s: %s" % (type(e).__name__, _safe_str(e))[:500]})
                continue
            finally:
                r.in_user = False
            size = out.size
            if max_var is not None and size > max_var:
                out.rewind()
                skipped.append({"name": name, "reason": "%d bytes exceeds max_variable_bytes %d" % (size, max_var)})
                if prune and not support_round:
                    pruned.append(name)
                continue
            if max_bytes is not None and total + size > max_bytes:
                out.rewind()
                skipped.append({"name": name, "reason": "%d bytes would exceed max_bytes %d" % (size, max_bytes)})
                continue
            out.keep(name, support_round)
            kinds[name] = kind
            if not support_round:
                saved.append(name)
            total += size
        # Filtered names that saved cell code calls, until none is new (a helper may need another).
        support_round = True
        index = out.index
        pending = _support_names(codec.needed, set(index["names"]) | set(index["support"]) | set(s["name"] for s in skipped))
    _drop_orphans(deps, out.index["names"], out.index["support"], kinds, saved, skipped)
    return saved, skipped, pruned, kinds, sorted(out.index["support"])


def _receive_payload(r):
    """Main thread: wait (interruptibly) until the reader has collected the payload of restore r."""
    ib = _inbound.get(r.id)
    if ib is None:
        raise _RequestFailed("restore from the host needs a non-negative integer 'bytes'", restored=[], failed=[])
    _give_turn()  # the payload's data lines are read while this waits
    try:
        while not ib.ready.acquire(True, 0.05):
            _checkpoint(r)
    finally:
        _inbound.pop(r.id, None)  # later pieces (an interrupted restore) are dropped
    if ib.error is not None:
        raise _RequestFailed("cannot read snapshot <from host>: %s" % ib.error, restored=[], failed=[])
    want = ib.sha256 if ib.binary else r.msg.get("sha256")
    if ib.binary:
        got = ib.hash.hexdigest()
        if got != want.lower():
            raise _RequestFailed("corrupt snapshot <from host>: sha256 %s, expected %s" % (got, want),
                                 restored=[], failed=[])
    elif isinstance(want, str) and want:
        got = _imp("hashlib").sha256(ib.buf).hexdigest()
        if got != want.lower():
            raise _RequestFailed("corrupt snapshot <from host>: sha256 %s, expected %s" % (got, want),
                                 restored=[], failed=[])
    return ib.buf


@_handler
def _h_restore(r):
    path = r.msg.get("path")
    f = None
    if r.msg.get("from") == "host":
        path = "<from host>"
        mv = memoryview(_receive_payload(r))
        size = len(mv)

        def read(offset, n):
            return mv[offset:offset + n]
    elif not isinstance(path, str) or not path:
        raise _RequestFailed("restore needs a string 'path' (or 'from': 'host' and 'bytes')")
    else:
        mv = None
        try:
            f = open(path, "rb")
            size = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            return {"restored": [], "failed": [], "reason": "snapshot not found"}
        except OSError as e:
            raise _RequestFailed("cannot read snapshot %s: %s" % (path, e.strerror or e), restored=[], failed=[])

        def read(offset, n):
            f.seek(offset)
            return f.read(n)
    try:
        return _restore_names(r, path, f, mv, read, size)
    finally:
        if f is not None:
            f.close()


def _restore_names(r, path, f, mv, read, size):
    """The names of a payload of `size` bytes, in file f or in memory mv, into the namespace."""
    pickle = _imp("pickle")
    try:
        index = _PayloadFile.records(read, size)
        if index is None:  # format 1: every name's pickle is a bytes value inside one pickle
            if f is not None:
                f.seek(0)
            index = pickle.load(f) if f is not None else pickle.loads(mv)
        default_kind = index["serializer"]
        blobs = index["names"]
        kinds = index.get("serializers") or {}
        support = index.get("support") or {}
        if not isinstance(blobs, dict) or not isinstance(kinds, dict) or not isinstance(support, dict):
            raise ValueError("names is not a mapping")
    except OSError as e:
        raise _RequestFailed("cannot read snapshot %s: %s" % (path, e.strerror or e), restored=[], failed=[])
    except Exception as e:
        raise _RequestFailed("corrupt snapshot %s: %s: %s" % (path, type(e).__name__, _safe_str(e)),
                             restored=[], failed=[])
    from_file = f is not None and index.get("format") == 2

    def source(ref):
        """What a loader reads: a format 1 blob, the file at a record, or the record's bytes."""
        if index.get("format") != 2:
            return ref
        if from_file:
            f.seek(ref[0])
            return f
        return mv[ref[0]:ref[0] + ref[1]]
    codec = _Codec()
    restored, failed = [], []
    # Payload order (classes first); support names only where the namespace has none of its own.
    items = [(n, b, False) for n, b in blobs.items()] + [(n, b, True) for n, b in support.items()]
    while items:
        # A value whose class comes later in the payload (a support class, a class used as a class
        # attribute) waits for another pass; a pass restoring nothing ends it.
        waiting = []
        for name, ref, is_support in items:
            if name in _NEVER_RESTORE or (is_support and name in _ns):
                continue
            loads = codec.loader(kinds.get(name, default_kind), from_file)
            if loads is None:
                failed.append({"name": name, "reason": "the snapshot was made with dill, which is not importable"})
                continue
            r.in_user = True
            try:
                _checkpoint(r)
                _ns[name] = loads(source(ref))
                if not is_support:
                    restored.append(name)
            except KeyboardInterrupt:
                raise
            except ClassNotRestoredError as e:
                waiting.append((name, ref, is_support, e))
            except BaseException as e:
                failed.append({"name": name, "reason": "%s: %s" % (type(e).__name__, _safe_str(e))[:500]})
            finally:
                r.in_user = False
        if len(waiting) == len(items):
            for name, _b, _s, e in waiting:
                failed.append({"name": name, "reason": "%s: %s" % (type(e).__name__, _safe_str(e))[:500]})
            break
        items = [w[:3] for w in waiting]
    restored.sort()
    return {"restored": restored, "failed": failed}


# ---------------------------------------------------------------------------------------------
# Dispatch: every request type and who answers it, declared once [_REQUESTS]
# ---------------------------------------------------------------------------------------------

# now  answered by whoever reads its line (the reader thread while a request runs), as soon as it
#      is read, also while a cell runs; fn(rid, msg). It never waits in the queue.
# run  queued: run strictly in order, one at a time, on the main thread or as a task on the loop,
#      with exactly one done, after its other events; fn(r). A queued request needs an id, except
#      a shutdown (its done comes only when it has one).
# shutdown has both: at once with "now": true, else queued. lib/protocol/declared_once.test.ts holds
# this table to lib/protocol/runtime.ts (the request types, AtOnceType) and docs/protocol.md.
_REQUESTS = {
    # type         now               run
    "interrupt":   (_now_interrupt,  None),
    "host_reply":  (_now_host_reply, None),
    "data":        (_now_data,       None),
    "ping":        (_now_ping,       None),
    "heartbeat":   (_now_heartbeat,  None),
    "info":        (_now_info,       None),
    "shutdown":    (_now_shutdown,   _run_shutdown),
    "execute":     (None,            _run_cell),
    "snapshot":    (None,            _h_snapshot),
    "restore":     (None,            _h_restore),
    "list_names":  (None,            _h_list_names),
    "signatures":  (None,            _h_signatures),
    "variables":   (None,            _h_variables),
    "inspect":     (None,            _h_inspect),
    "reset":       (None,            _h_reset),
    "complete":    (None,            _h_complete),
    "is_complete": (None,            _h_is_complete),
}


# ---------------------------------------------------------------------------------------------
# Start-up: main(), the serve loop, exit
# ---------------------------------------------------------------------------------------------

# Bound once at start-up (main, _setup_state, _install_namespace), constants from then on:
_signal = _monotonic = _sleep = _time = _Empty = _contextvars = _user_module = _runtime_module = None
_cell_get = _cell_set = _cell_reset = None  # the writing context's cell id (a ContextVar)
_FENCE = b""


def _after_fork_in_child():
    _out.forked = True
    # A forked child (multiprocessing) must not keep our channels open after we are gone: the
    # watchdog and the host learn of our exit by their hang-up.
    for fd in _keep + [_wd.beat_w, _out.fd, _rd.fd]:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
    del _keep[:]
    _wd.beat_w = _out.fd = _rd.fd = -1
    _rq.serving = False
    _out.live = _out.bid = None  # nothing batches in the child: every write takes the raw path
    del _out.parts[:]  # the parent ships its own copy
    _out.size = 0


def main():
    global _signal
    import _signal
    _signal.signal(_signal.SIGINT, _on_sigint)  # first: a SIGINT during start-up is ignored, not fatal
    _take_group()
    pumps = _setup_fds()
    version = "%d.%d.%d" % sys.version_info[:3]
    _write_all(('{"event":"ready","protocol":%d,"python":"%s","capabilities":[%s],"pid":%d}\n'
                % (PROTOCOL, version, ",".join('"%s"' % c for c in CAPABILITIES), _pid)).encode())
    # Everything below runs while the host prepares its first request.
    _setup_state()
    _setup_pumps(pumps)
    _install_namespace()
    _init_json()  # before the threads: the pumps frame with it
    _start_threads(pumps)
    _serve()


def _setup_state():
    global _monotonic, _sleep, _time, _Empty, _contextvars, _cell_get, _cell_set, _cell_reset, _FENCE
    import time
    import _queue
    import contextvars
    _monotonic, _sleep, _time = time.monotonic, time.sleep, time.time
    _Empty = _queue.Empty
    _contextvars = contextvars
    _rq.q = _queue.SimpleQueue()
    cell = contextvars.ContextVar("awrepl_cell")  # the writing context's cell id
    _cell_get, _cell_set, _cell_reset = cell.get, cell.set, cell.reset
    _FENCE = b"\x00\x1bawrepl-fence-" + os.urandom(8).hex().encode() + b"\x00"
    _rq.use_signal = hasattr(_signal, "pthread_kill") and not os.environ.get("AWREPL_INTERRUPT_FALLBACK")
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)


def _setup_pumps(pumps):
    try:
        import select
        if hasattr(select, "poll"):
            _out.fence_poll = select.poll()  # the main thread's: a poll object is never polled concurrently
            for p in pumps:
                _out.fence_poll.register(p.rfd, select.POLLIN)
    except ImportError:
        pass
    try:
        import fcntl
        for p in pumps:  # a larger pipe: C code writing a burst rarely waits on the pump
            fcntl.fcntl(p.wfd, 1031, 1 << 20)  # F_SETPIPE_SZ (Linux)
    except Exception:
        pass
    _out.pumps = pumps
    Stream = _make_stream_class()
    sys.stdout = Stream("stdout", 1)
    sys.stderr = Stream("stderr", 2)
    _builtins_mod.print = _make_print(Stream)


def _install_namespace():
    """Cells run in a fresh module installed as __main__ (pickle and dill look classes up there);
    the runtime's own module stays referenced so its globals live on."""
    global _runtime_module, _user_module, _ns, _SANDBOX_NETWORK
    import types
    # The host's word on a sandbox's network, for %pip's message: not the cells' (nor their children's).
    _SANDBOX_NETWORK = os.environ.pop("AWREPL_SANDBOX_NETWORK", None)
    if sys.argv[0] not in ("", "-c") and sys.path and not getattr(sys.flags, "safe_path", False):
        if os.environ.pop("AWREPL_SAFE_PATH", None):
            # A cwd a sandbox could write: no import looks there, this runtime's own lazy ones
            # (pickle, dill at a snapshot) included, as with `python -P`.
            del sys.path[0]
        else:
            sys.path[0] = ""  # as `python -i`: imports resolve against the cwd, not the runtime's cache dir
    sys.argv = [""]
    _runtime_module = sys.modules.get("__main__")
    _user_module = types.ModuleType("__main__")
    sys.modules["__main__"] = _user_module
    sys.modules["awrepl"] = _make_awrepl_module()
    _install_display()
    if "linecache" not in sys.modules:
        sys.meta_path.insert(0, _LinecacheHook())
    _ns = _fresh_namespace()


def _start_threads(pumps):
    _setup_turn()
    _thread.start_new_thread(_pump_forever, (list(pumps),))
    _thread.start_new_thread(_batch_timer, ())
    _rq.serving = True
    _thread.start_new_thread(_reader, ())


def _next_request():
    """The next request, read by the main thread itself when it has the turn (see _take_turn);
    while none comes for 50 ms, deferred start-up work is done instead: none of it is on the path
    to the first result, all of it makes later requests cheaper."""
    while True:
        try:
            return _rq.q.get_nowait()  # queued by the reader thread, or by the last read
        except _Empty:
            pass
        if not _rd.main:
            if not _take_turn():
                return _queued_request()
            continue  # what the reader queued after the look above and before it parked goes first
        if _idle_tasks and not _rd.idle_poll.poll(IDLE_SECONDS * 1000):
            _idle_task()
            continue
        _main_read()


def _queued_request():
    """The next request the reader thread queues."""
    while _idle_tasks:
        try:
            return _rq.q.get(timeout=IDLE_SECONDS)
        except _Empty:
            _idle_task()
    return _rq.q.get()


def _idle_task():
    task = _idle_tasks.pop(0)
    try:
        task()
    except Exception:
        pass


def _warm_imports():
    for name in ("_ast", "traceback", "linecache", "io", "pickle"):  # cells, errors, snapshots
        _imp(name)
    _flush_sources()


_idle_tasks = [_start_watchdog, _warm_imports]
IDLE_SECONDS = 0.05


def _serve():
    while not _rq.stop:
        if _aio.loop is None:
            r = _next_request()
            try:
                _handle_sync(r)
            except BaseException:
                pass  # _handle_sync reports; nothing may end the serve loop
            _restore_stdio()
        else:
            try:
                _aio.loop.run_forever()
            except BaseException:
                pass  # a KeyboardInterrupt raised into a background task, or its SystemExit
            if _aio.loop.is_closed():
                _drop_loop()  # user code closed it from a thread: start over without one
            _restore_stdio()
    _exit_process()


def _restore_stdio():
    """exit()/quit() close sys.stdin; user code may replace sys.stdout. Keep the channels sane."""
    s = sys.stdin
    if s is None or getattr(s, "closed", False):
        try:
            sys.stdin = open(0, "r", closefd=False)
        except Exception:
            pass


def _exit_process():
    _rq.serving = False
    if _aio.loop is not None:
        try:
            _aio.loop.set_exception_handler(lambda loop, context: None)
        except Exception:
            pass

    started = _held_lock()

    def hard_exit():
        started.release()
        _block_sigint()
        _sleep(2.0)
        _os_exit(0)
    _thread.start_new_thread(hard_exit, ())  # non-daemon user threads must not hold the exit
    # A thread still starting when finalization begins crashes CPython (SIGSEGV in
    # _PyThreadState_SetCurrent, seen on 3.11 in one shutdown out of five): let it run first.
    started.acquire(True, 1.0)
    sys.exit(0)


if __name__ == "__main__":
    # Not main() itself: on 3.9 a frame called from one with the same globals inherits its builtins,
    # and this module-level frame still has the real ones. exec's frame has other globals, so
    # main() and everything it calls look up the private __builtins__ above.
    exec("main()", {"main": main, "__builtins__": __builtins__})
