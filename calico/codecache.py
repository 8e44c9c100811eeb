"""Reuse the code the standard library compiles from generated source, from one process to the
next: ``@dataclass`` methods, ``namedtuple`` constructors, ``typing`` forward references.

Why: ``dataclasses`` writes each generated method (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, a frozen class's ``__setattr__``/``__delattr__``) as source text and ``exec``s
it, so every class costs 4-6 ``compile`` calls on Python 3.11: ~1 ms a class, and Felix creates
~250 classes before its first apply, ~20% of its cold start. ``namedtuple`` ``eval``s its
``__new__``, and ``typing.ForwardRef`` compiles every string annotation (pydantic's TypedDicts
and models have hundreds). A text always compiles to the same code, so its code object can be
kept like a ``.pyc`` (design/performance.md "Cold start: dataclasses and imports").

:func:`install` puts memoising stand-ins in those modules' globals, which shadow the builtins
for that module only: ``dataclasses.exec``, ``collections.eval`` and ``typing.compile``. A text
already compiled, in this process or an earlier one, reuses its code object; any other text is
compiled as the builtin would have compiled it there (file name ``<string>``, no
``__future__`` flags inherited: none of the three modules has any); calls of any other shape
go to the builtin unchanged, and errors (a forward reference that is not an expression) are
raised by the builtin as before, never cached. The code objects persist in one marshal file in
the ``calico`` package's ``__pycache__`` (each entry unmarshalled when first asked for),
tagged with the interpreter's bytecode magic and optimisation level, read at :func:`install`,
written (atomically, when new texts were compiled
and writing bytecode is allowed) by :func:`flush`, which runs at exit and which a daemon may
call once it has started. A missing, unreadable, corrupt or foreign file is ignored.
"""

from __future__ import annotations

import atexit
import builtins
import collections
import dataclasses
import importlib.util
import marshal
import os
import sys
import typing
from types import CodeType
from typing import Any, TypeVar

K = TypeVar("K", str, bytes)

_HEADER = importlib.util.MAGIC_NUMBER + b"cc2" + bytes([sys.flags.optimize])
# Entries kept across runs: past this, a write keeps only the texts this process used (code
# that changed leaves texts nobody asks for any more).
MAX_ENTRIES = 20_000
# The modules whose builtins are shadowed, and by what (see install()).
_HOOKS = (("exec", dataclasses), ("eval", collections), ("compile", typing))

# key: mode, NUL, text. A value read from the file stays marshalled bytes until it is asked for:
# a short command that creates a few classes does not unmarshal a whole Felix's worth.
_codes: dict[str, CodeType | bytes] = {}
_used: set[str] = set()
_new = 0
_path: str | None = None


def default_path() -> str:
    """The cache file beside ``calico``'s own ``.pyc`` files (``sys.pycache_prefix`` honoured)."""
    probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_codecache.py")
    return os.path.join(
        os.path.dirname(importlib.util.cache_from_source(probe)),
        f"generated-code.{sys.implementation.cache_tag}.bin",
    )


def compile_text(text: str, mode: str = "exec") -> CodeType:
    """The code the builtin makes of ``text`` in a module without ``__future__`` imports."""
    return builtins.compile(text, "<string>", mode, dont_inherit=True)


def _code(text: str, mode: str) -> CodeType:
    global _new
    key = f"{mode}\0{text}"
    code = _codes.get(key)
    if type(code) is bytes:
        try:
            code = marshal.loads(code)
        except (EOFError, ValueError, TypeError):
            code = None
        if type(code) is not CodeType:
            code = None
    if code is None:
        code = compile_text(text, mode)  # a SyntaxError propagates, nothing is cached
        _new += 1
    _codes[key] = code
    _used.add(key)
    return code


def cached_exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """``exec`` with the compile of a text memoised (anything else goes to the builtin)."""
    if type(source) is str:
        source = _code(source, "exec")
    builtins.exec(source, globals, locals)


def cached_eval(source: Any, globals: Any = None, locals: Any = None, /) -> Any:
    """``eval`` with the compile of a text memoised (anything else goes to the builtin)."""
    if type(source) is str:
        source = _code(source, "eval")
    return builtins.eval(source, globals, locals)


def cached_compile(
    source: Any,
    filename: Any,
    mode: str,
    flags: int = 0,
    dont_inherit: bool = False,
    optimize: int = -1,
    **kwargs: Any,
) -> Any:
    """``compile`` as called from a module without ``__future__`` imports; a plain text
    compiled to code with default flags is memoised."""
    plain = not flags and optimize == -1 and not kwargs and mode in ("exec", "eval")
    if plain and type(source) is str and filename == "<string>":
        return _code(source, mode)
    # Inheriting would take this module's ``annotations`` flag, not the caller's (none).
    return builtins.compile(source, filename, mode, flags, True, optimize, **kwargs)


_STAND_INS = {"exec": cached_exec, "eval": cached_eval, "compile": cached_compile}


def load(path: str) -> dict[str, bytes]:
    """The entries of a cache file, each code object still marshalled; empty for a missing,
    unreadable or foreign file (an entry that does not unmarshal to code is compiled anew)."""
    return load_marshalled(path, _HEADER, str)


def load_marshalled(path: str, header: bytes, key_type: type[K]) -> dict[K, bytes]:
    """The ``key_type -> bytes`` entries of a file written as ``header`` + a marshalled dict
    (this cache's layout, shared by ``calico.policyeval.convcache``); empty for a missing,
    unreadable, foreign or corrupt file, and entries of other types are dropped."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    if not data.startswith(header):
        return {}
    try:
        entries = marshal.loads(data[len(header) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if type(k) is key_type and type(v) is bytes}


def installed() -> bool:
    return all(getattr(mod, name, None) is _STAND_INS[name] for name, mod in _HOOKS)


def install(path: str | None = None) -> None:
    """Shadow the three builtins in their modules and load the cache file (``path``, else
    :func:`default_path`). Idempotent; what was compiled before it is unaffected."""
    global _path
    if installed():
        return
    _path = path or default_path()
    loaded: dict[str, CodeType | bytes] = dict(load(_path))
    loaded.update(_codes)  # texts compiled in this process so far win
    _codes.clear()
    _codes.update(loaded)
    for name, mod in _HOOKS:
        setattr(mod, name, _STAND_INS[name])
    atexit.register(flush)


def uninstall() -> None:
    """Give the modules their builtins back (tests)."""
    for name, mod in _HOOKS:
        if getattr(mod, name, None) is _STAND_INS[name]:
            delattr(mod, name)
    atexit.unregister(flush)


def flush() -> bool:
    """Write the cache file if this process compiled texts it lacked (and bytecode may be
    written); True if it wrote. Failures (read-only install, full disk) are silent: the cache
    is an optimisation, as ``.pyc`` files are."""
    global _new
    if not _new or _path is None or sys.dont_write_bytecode:
        return False
    keep = _codes if len(_codes) <= MAX_ENTRIES else {k: _codes[k] for k in _used}
    entries = {k: v if type(v) is bytes else marshal.dumps(v) for k, v in keep.items()}
    directory = os.path.dirname(_path)
    try:
        import tempfile

        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".generated-code.")
        try:
            os.fchmod(fd, 0o644)  # as a .pyc: readable by whoever may run the code
            with os.fdopen(fd, "wb") as f:
                f.write(_HEADER + marshal.dumps(entries))
            os.replace(tmp, _path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    _new = 0
    return True
