"""The spec a session is created with, filled from the caller's environment as ``sessionSpec`` of
``lib/client/attach.ts`` does: the supervisor's own directory and environment are whoever started it."""

import os
from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple, Union

Sandbox = Union[None, bool, Dict[str, Any]]
#: ``{memory_bytes, max_procs, cpu_percent, max_file_bytes, best_effort}`` (lib/protocol/limits.ts), each optional.
Limits = Optional[Mapping[str, Any]]


def caller_env(env: Mapping[str, str]) -> Dict[str, str]:
    """The caller's environment minus awrepl's own settings (``AWREPL_*``)."""
    return {k: v for k, v in env.items() if not k.startswith("AWREPL_")}


def sandbox_field(sandbox: Sandbox) -> Any:
    if sandbox is None:
        return None
    if sandbox is True:
        return {}
    if sandbox is False or isinstance(sandbox, dict):
        return sandbox
    raise TypeError("sandbox must be None, a bool or a dict (a sandbox profile), not %s" % type(sandbox).__name__)


def limits_field(limits: Limits) -> Optional[Dict[str, Any]]:
    """The spec's ``limits``: a mapping sent as it is (the supervisor checks each key and value where it
    plans the worker, and its error names a bad one: one rule, lib/worker/limits/)."""
    if limits is None:
        return None
    if not isinstance(limits, Mapping):
        raise TypeError("limits must be None or a dict (memory_bytes, max_procs, cpu_percent, max_file_bytes, best_effort), not %s" % type(limits).__name__)
    return dict(limits)


def session_spec(
    env: Mapping[str, str],
    *,
    python: Optional[str] = None,
    cwd: Optional[str] = None,
    extra_env: Optional[Mapping[str, str]] = None,
    sandbox: Sandbox = None,
    timeout_ms: Optional[int] = None,
    max_output_bytes: Optional[int] = None,
    grace_ms: Optional[int] = None,
    autosave: Optional[bool] = None,
    limits: Limits = None,
    venv: Optional[str] = None,
) -> Dict[str, Any]:
    """The ``spec`` of every request that may create the session. ``$VIRTUAL_ENV`` and ``./.venv`` are
    resolved by the supervisor from the ``cwd`` and ``env`` sent (one rule, lib/worker/interpreter.ts)."""
    for key, value in (("python", python), ("cwd", cwd), ("venv", venv)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise TypeError("%s must be a string, not %s" % (key, type(value).__name__))
    whole = caller_env(env)
    if extra_env is not None:
        for k, v in extra_env.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("env must map strings to strings; %r: %r is not" % (k, v))
            whole[k] = v
    where = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    spec = {
        "python": os.fspath(python) if python is not None else env.get("AWREPL_PYTHON"),
        "python_given": True if python is not None else None,
        # Resolved here, against the session's directory: the supervisor's directory is not the caller's.
        "venv": os.path.join(where, os.fspath(venv)) if venv is not None else None,
        "sandbox": sandbox_field(sandbox),
        "cwd": where,
        "env": whole,
        "timeout_ms": timeout_ms,
        "max_output_bytes": max_output_bytes,
        "grace_ms": grace_ms,
        "autosave": autosave,
        "limits": limits_field(limits),
    }
    return {k: v for k, v in spec.items() if v is not None}


def check_count(name: str, value: object) -> Optional[int]:
    """A limit: None, or an int >= 0 (0 means no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("%s must be a whole number of at least 0 (0: no limit), not %r" % (name, value))
    return value


class Setup(NamedTuple):
    """What a session object is made with, resolved once when it is made: the spec to create the
    session with, the state directory's layout, the executable, and the caller's environment."""

    spec: Dict[str, Any]
    layout: Any
    exe: Any
    env: Dict[str, str]


def _setup(spec_fields: Dict[str, Any], home: Optional[str] = None) -> Setup:
    from ._binary import describe, find_executable
    from ._home import layout_of

    caller = dict(os.environ)
    return Setup(session_spec(caller, **spec_fields), layout_of(caller, home), describe(find_executable(caller)), caller)


def owned_setup(
    session_id: Optional[str],
    timeout_ms: int,
    max_output_bytes: int,
    python: Optional[str],
    cwd: Optional[str],
    env: Optional[Mapping[str, str]],
    sandbox: Sandbox,
    limits: Limits = None,
    venv: Optional[str] = None,
) -> "Tuple[str, str, Setup]":
    """The label (generated when None), the supervisor's unique name for it, and the setup of a session of its own."""
    from ._names import check_session_name

    if session_id is None:
        session_id = "session-" + os.urandom(4).hex()
    check_session_name(session_id, "session_id")
    check_count("timeout_ms", timeout_ms)
    check_count("max_output_bytes", max_output_bytes)
    setup = _setup(dict(python=python, cwd=cwd, extra_env=env, sandbox=sandbox, timeout_ms=timeout_ms, max_output_bytes=max_output_bytes, limits=limits, venv=venv))
    return session_id, "%s.%s" % (session_id[:55], os.urandom(4).hex()), setup


def named_setup(name: str, existing: bool, home: Optional[str], **fields: Any) -> Setup:
    """The setup of ``attach(name, ...)``: the name checked, every limit checked, ``existing`` in the spec."""
    from ._names import check_session_name

    check_session_name(name)
    for key in ("timeout_ms", "max_output_bytes", "grace_ms"):
        check_count(key, fields.get(key))
    env = fields.pop("env", None)
    setup = _setup(dict(fields, extra_env=env), home)
    if existing:
        setup.spec["existing"] = True
    return setup
