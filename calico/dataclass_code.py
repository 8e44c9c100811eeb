"""Reuse the compiled code of ``@dataclass``'s generated methods from one process to the next.

Why: ``dataclasses`` writes each generated method (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, a frozen class's ``__setattr__``/``__delattr__``) as source text and ``exec``s
it, so every class costs 4-6 ``compile`` calls on Python 3.11: ~1 ms a class, and Felix creates
~250 classes before its first apply, ~20% of its cold start (design/performance.md "Cold start:
dataclasses and imports"). The text of a method depends only on the class's fields and options,
so its code object is the same in every process that runs the same code.

:func:`install` makes ``dataclasses`` look its ``exec`` up here (a module global, which shadows
the builtin for that module only): a text already compiled, in this process or in an earlier
one, reuses its code object; any other text is compiled as ``exec(text)`` compiles it (file name
``<string>``, no ``__future__`` flags inherited: ``dataclasses`` has none). The code objects
persist like ``.pyc`` files: one marshal file in the ``calico`` package's ``__pycache__``, tagged
with the interpreter's bytecode magic and optimisation level, read at :func:`install`, written
(atomically, when new texts were compiled and writing bytecode is allowed) by :func:`flush`,
which runs at exit and which a daemon may call once it has started. A missing, unreadable,
corrupt or foreign file is ignored (everything is compiled, as without it).
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import importlib.util
import marshal
import os
import sys
from types import CodeType
from typing import Any

_HEADER = importlib.util.MAGIC_NUMBER + b"dc1" + bytes([sys.flags.optimize])
# Entries kept across runs: past this, a write keeps only the texts this process used (code
# that changed leaves texts nobody asks for any more).
MAX_ENTRIES = 20_000

_codes: dict[str, CodeType] = {}
_used: set[str] = set()
_new = 0
_path: str | None = None


def default_path() -> str:
    """The cache file beside ``calico``'s own ``.pyc`` files (``sys.pycache_prefix`` honoured)."""
    probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_dataclass_code.py")
    return os.path.join(
        os.path.dirname(importlib.util.cache_from_source(probe)),
        f"dataclass-code.{sys.implementation.cache_tag}.bin",
    )


def compile_text(text: str) -> CodeType:
    """The code ``exec(text)`` runs when called from a module without ``__future__`` imports."""
    return compile(text, "<string>", "exec", dont_inherit=True)


def cached_exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """``exec`` with the compile step of a text memoised (anything but a ``str`` goes to the
    builtin unchanged)."""
    global _new
    if type(source) is str:
        code = _codes.get(source)
        if code is None:
            code = _codes[source] = compile_text(source)
            _new += 1
        _used.add(source)
        source = code
    builtins.exec(source, globals, locals)


def load(path: str) -> dict[str, CodeType]:
    """The entries of a cache file; empty for a missing, unreadable or foreign one."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    if not data.startswith(_HEADER):
        return {}
    try:
        entries = marshal.loads(data[len(_HEADER) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if type(k) is str and type(v) is CodeType}


def install(path: str | None = None) -> None:
    """Route ``dataclasses``' ``exec`` through the cache and load the cache file (``path``, else
    :func:`default_path`). Idempotent; classes created before it are unaffected."""
    global _path
    if getattr(dataclasses, "exec", None) is cached_exec:
        return
    _path = path or default_path()
    loaded = load(_path)
    loaded.update(_codes)  # texts compiled in this process so far win
    _codes.clear()
    _codes.update(loaded)
    dataclasses.exec = cached_exec  # type: ignore[attr-defined]
    atexit.register(flush)


def uninstall() -> None:
    """Give ``dataclasses`` the builtin ``exec`` back (tests)."""
    if getattr(dataclasses, "exec", None) is cached_exec:
        del dataclasses.exec  # type: ignore[attr-defined]
    atexit.unregister(flush)


def flush() -> bool:
    """Write the cache file if this process compiled texts it lacked (and bytecode may be
    written); True if it wrote. Failures (read-only install, full disk) are silent: the cache
    is an optimisation, as ``.pyc`` files are."""
    global _new
    if not _new or _path is None or sys.dont_write_bytecode:
        return False
    entries = _codes if len(_codes) <= MAX_ENTRIES else {t: _codes[t] for t in _used}
    directory = os.path.dirname(_path)
    try:
        import tempfile

        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".dataclass-code.")
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
