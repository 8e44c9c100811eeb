"""Keep what the update processors make of a stored resource, from one process to the next.

Why: an explain converts a few dozen stored policies, tiers, profiles and two endpoints, and
converting means validating through the pydantic v3 models, whose import and schema builds
were most of what kept ``calicoctl explain`` above 300 ms (design/performance.md "Conversion
cache"). The v1 output of ``calico.model.processors.process`` is a pure function of the source
key, the stored text and the converting code, so it can be kept like a ``.pyc``.

An entry is keyed by a digest of the code fingerprint (:func:`fingerprint`: the Python version,
the sources of ``calico.api``, ``calico.model`` and ``calico.selector``, the installed
pydantic), the key's kind, namespace and name, and the exact stored text; its value is the
pickled output. Only successful conversions are stored: a resource the processors reject
always goes through them again, so the validator stays the only validator and its message is
the one logged. The file lives beside ``calico``'s ``.pyc`` files as the code cache's does
(``calico.codecache.default_path``'s directory), is read once, each entry unpickled when asked
for, and written atomically at exit when this process converted something new. A missing,
corrupt or foreign file, or an entry that does not unpickle, is a miss; a location that cannot
be written just keeps the cache from growing.
"""

from __future__ import annotations

import atexit
import marshal
import os
import pickle
import sys
from collections.abc import Callable
from typing import Any

from calico.model.resources import ResourceKey

try:  # hashlib's own import loads OpenSSL (~7 ms of an explain); blake2 is built in
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without the builtin module
    from hashlib import blake2b

_HEADER = b"calico-conversions-1\n"
# Past this, a write keeps only the entries this process used (edited resources and changed
# code leave entries nobody asks for any more). The whole file is read by every explain, so it
# is kept to what explains need again: bulk conversions (every endpoint, for ``explain
# policy``) are not stored (``keep=False``); 10,000 endpoints were a 4.7 MB file, ~20-40 ms
# to read.
MAX_ENTRIES = 20_000
_CODE_DIRS = ("api", "model", "selector", "policyeval")  # policyeval: ``convert`` callers
_CODE_FILES = ("__init__.py", "durations.py")


def default_path() -> str:
    """``conversions.<tag>.bin`` in ``calico``'s ``__pycache__`` (``sys.pycache_prefix``
    honoured), the code cache's directory."""
    from calico.codecache import default_path as code_cache

    directory = os.path.dirname(code_cache())
    return os.path.join(directory, f"conversions.{sys.implementation.cache_tag}.bin")


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pydantic_files() -> list[str]:
    """Files whose change means another pydantic: its version module, pydantic-core's."""
    import importlib.util

    out = []
    for name, files in (("pydantic", ("version.py",)), ("pydantic_core", ("__init__.py",))):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin:
            continue
        directory = os.path.dirname(spec.origin)
        out += [os.path.join(directory, f) for f in files]
        if name == "pydantic_core":
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                names = []
            out += [
                os.path.join(directory, f)
                for f in names
                if f.startswith("_pydantic_core") and f.endswith(".so")
            ]
    return out


def code_files(root: str | None = None) -> list[str]:
    """Every source file whose code a conversion may run, in a fixed order."""
    root = root or _package_root()
    files = [os.path.join(root, f) for f in _CODE_FILES]
    for sub in _CODE_DIRS:
        for directory, dirs, names in os.walk(os.path.join(root, sub)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            files += [os.path.join(directory, n) for n in sorted(names) if n.endswith(".py")]
    return files


def fingerprint(root: str | None = None) -> bytes:
    """A digest of the converting code: any edit to it (or another Python or pydantic) is a
    different fingerprint, so every entry made by the old code misses."""
    h = blake2b(sys.version.encode(), digest_size=16)
    for path in code_files(root):
        h.update(b"\0" + os.path.relpath(path, root or _package_root()).encode() + b"\0")
        try:
            with open(path, "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(b"\xff")  # a file that vanished is a change too
    for path in _pydantic_files():
        try:
            st = os.stat(path)
        except OSError:
            continue
        h.update(f"\0{path}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        if path.endswith(".py"):
            with open(path, "rb") as f:
                h.update(f.read())
    return h.digest()


def _load(path: str) -> dict[bytes, bytes]:
    from calico.codecache import load_marshalled

    return load_marshalled(path, _HEADER, bytes)


def _dumps(value: bytes | dict[Any, Any]) -> bytes | None:
    """An entry's stored form; None for one that cannot be pickled (then it is not kept)."""
    if type(value) is bytes:
        return value
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return None


class ConversionCache:
    """One cache file: :meth:`process` converts through it."""

    def __init__(self, path: str, *, writable: bool = True, code: bytes | None = None) -> None:
        self.path = path
        self.writable = writable
        self._code = code
        # digest -> pickled output (read from the file) or the output itself (new here: pickled
        # only when written, so a location that cannot be written costs no pickling)
        self._entries: dict[bytes, bytes | dict[Any, Any]] | None = None
        self._used: set[bytes] = set()
        self._new = 0
        self.hits = 0
        self.misses = 0

    def _key(self, key: ResourceKey, text: str, tag: str = "") -> bytes:
        if self._code is None:
            self._code = fingerprint()
        h = blake2b(self._code, digest_size=20)
        h.update(f"\0{tag}\0{key.kind}\0{key.namespace}\0{key.name}\0".encode())
        h.update(text.encode("utf-8", "surrogatepass"))
        return h.digest()

    def get(self, key: ResourceKey, text: str, tag: str = "") -> dict[Any, Any] | None:
        """The stored output for this resource and code, or None."""
        if self._entries is None:
            self._entries = _load(self.path)
        digest = self._key(key, text, tag)
        blob = self._entries.get(digest)
        if blob is None:
            return None
        if type(blob) is dict:
            return blob
        try:
            out = pickle.loads(blob)
        except Exception:  # a damaged entry (or one naming code that moved) is a miss
            del self._entries[digest]
            return None
        if not isinstance(out, dict):
            return None
        self._used.add(digest)
        return out

    def put(self, key: ResourceKey, text: str, out: dict[Any, Any], tag: str = "") -> None:
        if not self.writable:
            return
        if self._entries is None:
            self._entries = _load(self.path)
        digest = self._key(key, text, tag)
        self._entries[digest] = out
        self._used.add(digest)
        if not self._new and self is _default:
            atexit.register(self.flush)
        self._new += 1

    def process(
        self, key: ResourceKey, text: str, raw: dict[str, Any], *, keep: bool = True
    ) -> dict[Any, Any]:
        """The v1 part of ``calico.model.processors.process(key, raw)`` for the resource stored
        as ``text`` (``raw`` its decoded JSON): the kept output when there is one, else the
        processors' (whose errors propagate, and are never kept; nor is anything when ``keep``
        is false)."""
        out = self.get(key, text)
        if out is not None:
            self.hits += 1
            return out
        self.misses += 1
        from calico.model import processors

        # v1 keys only: a passthrough entry (ResourceKey -> the validated v3 resource, as the
        # Profile processor adds) is a pydantic model, which a hit must not need.
        out = {k: v for k, v in processors.process(key, raw).items() if type(k) is not ResourceKey}
        if keep:
            self.put(key, text, out)
        return out

    def convert(
        self, tag: str, key: ResourceKey, text: str, fn: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """``fn()``, a pure function of the resource stored as ``text`` and of code under the
        fingerprint (``tag`` names it, e.g. ``module.function``): kept as :meth:`process`
        keeps the processors' output; its exceptions propagate and nothing is kept."""
        out = self.get(key, text, tag)
        if out is not None:
            self.hits += 1
            return out
        self.misses += 1
        out = fn()
        self.put(key, text, out, tag)
        return out

    def flush(self) -> bool:
        """Write the file if this process added entries; True if it wrote. Failures (a
        read-only installation, a full disk) are silent."""
        if not self._new or not self.writable or self._entries is None:
            return False
        directory = os.path.dirname(self.path)
        try:
            import tempfile

            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".conversions.")
            try:
                os.fchmod(fd, 0o644)
                entries = {k: b for k, v in self._entries.items() if (b := _dumps(v))}
                # Keep what other processes wrote meanwhile (as valid as ours).
                merged = {**_load(self.path), **entries}
                if len(merged) > MAX_ENTRIES:
                    merged = {k: v for k, v in entries.items() if k in self._used}
                with os.fdopen(fd, "wb") as f:
                    f.write(_HEADER + marshal.dumps(merged))
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            return False
        self._new = 0
        return True


_default: ConversionCache | None = None


#: A file to use instead of :func:`default_path` (always written): tests, and an installation
#: whose package directory is read-only.
ENV = "CALICO_CONVERSION_CACHE"


def default() -> ConversionCache:
    """The process's cache: ``$CALICO_CONVERSION_CACHE``, else :func:`default_path` (not
    written when bytecode writing is off, as ``.pyc`` files and the code cache are not)."""
    global _default
    if _default is None:
        path = os.environ.get(ENV)
        if path:
            _default = ConversionCache(path)
        else:
            _default = ConversionCache(default_path(), writable=not sys.dont_write_bytecode)
    return _default
