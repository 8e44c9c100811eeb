"""The Key base class and the field checks every ``default_path`` uses.

Keys are immutable values: frozen, slotted dataclasses compare and hash by type and fields, so
they can index dicts in the calc graph and the syncer's dedupe cache. A key whose path would
parse back differently (empty identifier, a ``/`` in an unescaped field) cannot be built: the
constructor renders the path once and raises :class:`InvalidKeyError`, so every key in flight
has exactly one path, which parses back to it (one key, one path, one key again).
"""

from __future__ import annotations

from typing import ClassVar

from calico.model.escaping import InvalidKeyError, escape_name


class Key:
    """A parsed v1 model key. Subclasses are frozen dataclasses."""

    __slots__ = ()

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
