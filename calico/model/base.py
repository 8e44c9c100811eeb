"""The Key base class and the field checks every ``default_path`` uses.

Keys are immutable values: frozen, slotted dataclasses compare and hash by type and fields, so
they can index dicts in the calc graph and the syncer's dedupe cache. A key whose path would
parse back differently (empty identifier, a ``/`` in an unescaped field) cannot be built: the
constructor renders the path once and raises :class:`InvalidKeyError`, so every key in flight
has exactly one path, which parses back to it (one key, one path, one key again).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from calico.model.escaping import InvalidKeyError, escape_name

_set = object.__setattr__
K = TypeVar("K", bound=type)


class Key:
    """A parsed v1 model key. Subclasses are frozen dataclasses (``cached_hash``)."""

    # The hash, set by the first ``hash()`` (or a hot constructor); not a dataclass field, so
    # never pickled or copied (a string's hash differs from one process to the next).
    __slots__ = ("_hash",)

    #: Whether ``key_from_default_path`` insists on the leading ``/`` for this type.
    LEADING_SLASH_REQUIRED: ClassVar[bool] = False

    def __post_init__(self) -> None:
        self.default_path()  # refuse a key that has no valid path (raises InvalidKeyError)

    def default_path(self) -> str:
        """The canonical datastore path (always starts with ``/``)."""
        raise NotImplementedError

    def default_delete_path(self) -> str:
        """The path to delete. Equal to ``default_path``: every backend here is a flat keyspace,
        so upstream's etcd-v2 "delete the directory" paths have no meaning."""
        return self.default_path()


def seg(key: Key, field: str, value: str) -> str:
    """An unescaped single segment: must be non-empty and slash-free."""
    if not value:
        raise InvalidKeyError(f"{type(key).__name__}: {field} must not be empty")
    if "/" in value:
        raise InvalidKeyError(f"{type(key).__name__}: {field} {value!r} must not contain '/'")
    return value


def esc(key: Key, field: str, value: str) -> str:
    """An escaped single segment: must be non-empty; any characters allowed."""
    if not value:
        raise InvalidKeyError(f"{type(key).__name__}: {field} must not be empty")
    return escape_name(value)


def tail(key: Key, field: str, value: str) -> str:
    """A trailing multi-segment name (config names): must be non-empty, slashes kept as-is."""
    if not value:
        raise InvalidKeyError(f"{type(key).__name__}: {field} must not be empty")
    return value


def cached_hash(cls: K) -> K:
    """Give a frozen key dataclass a ``__hash__`` that remembers its answer in ``_hash``.

    The answer is the generated one's (the hash of the tuple of the hashed fields), and
    equality stays the generated ``__eq__``; a Felix endpoint update hashes its key ~16
    times (syncer, fan-out, stats, IP-set index), each one a tuple built and hashed
    (design/performance.md "In-sync at 250,000"). ``tests/unit/model/test_key_hash.py``
    checks it against the generated hash, and pickling, copying and ``replace``."""
    names = [f.name for f in dataclasses.fields(cls) if (f.compare if f.hash is None else f.hash)]
    if len(names) >= 2:
        values: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*names)
    elif names:
        one = operator.attrgetter(names[0])

        def values(key: Any) -> tuple[Any, ...]:
            return (one(key),)

    else:

        def values(key: Any) -> tuple[Any, ...]:
            return ()

    def __hash__(self: Any) -> int:
        try:
            return self._hash  # type: ignore[no-any-return]
        except AttributeError:
            answer = hash(values(self))
            _set(self, "_hash", answer)
            return answer

    __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
    cls.__hash__ = __hash__  # type: ignore[assignment,method-assign]
    return cls
