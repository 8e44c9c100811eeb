"""Resources named on the command line: ``-f`` (file, directory or ``-``) and namespaces.

Every file is decoded (syntax, kinds, field names and JSON types, as upstream's loader) before
any datastore call, so a document upstream could not decode means nothing is written. A
document that decodes but fails validation is kept as its error: write verbs report it when
they reach it, as upstream's client does; get/delete only need its kind, name and namespace.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from calico.api import APIError, Resource, ResourceValidationError, kind_class
from calico.api.io import Loaded, load_entries
from calico.calicoctl.errors import CtlError

EXTENSIONS = (".yaml", ".yml", ".json")


class FileInvalidError(CtlError):
    """The input could not be read or parsed; reported as ``failed to execute command: ...``."""

    def __init__(self, message: str) -> None:
        super().__init__(f"failed to execute command: {message}")


def _files(path: str, recursive: bool) -> list[str]:
    """Upstream's file iteration: a file as given, a directory's YAML/JSON files in order."""
    if path == "-" or not os.path.isdir(path):
        return [path]
    out: list[str] = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        out.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(EXTENSIONS))
        if not recursive:
            break
    return out


def read_input(path: str) -> bytes:
    """The bytes of ``path``, ``-`` meaning stdin (OSError when unreadable)."""
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as fh:
        return fh.read()


def _read(path: str) -> list[Loaded]:
    try:
        raw = read_input(path)
    except OSError as exc:
        raise FileInvalidError(f"open {path}: {exc.strerror or exc}") from None
    try:
        return load_entries(raw, "<stdin>" if path == "-" else path)
    except APIError as exc:
        raise FileInvalidError(str(exc)) from None


def load_entries_from(path: str, recursive: bool = False, skip_empty: bool = False) -> list[Loaded]:
    """Every document under ``path``, in order, invalid ones as their validation errors;
    empty files are errors unless ``skip_empty``."""
    entries: list[Loaded] = []
    for name in _files(path, recursive):
        loaded = _read(name)
        if not loaded and not skip_empty:
            raise CtlError(f"no resources specified in file {name}")
        entries.extend(loaded)
    if not entries and not skip_empty:
        raise CtlError(f"no resources specified in directory {path}")
    return entries


def entry_kind(entry: Loaded) -> str:
    return entry.kind if isinstance(entry, ResourceValidationError) else entry.KIND


def as_target(entry: Loaded) -> Resource:
    """The resource an entry names (an invalid one becomes its kind/name/namespace)."""
    if not isinstance(entry, ResourceValidationError):
        return entry
    from calico.calicoctl.resources import identity

    cls = kind_class(entry.kind)
    if cls is None:  # the loader only returns errors for known kinds
        raise CtlError(str(entry))
    return identity(cls, entry.name, entry.extra.get("namespace") or None)


def load_inputs(path: str, recursive: bool = False, skip_empty: bool = False) -> list[Resource]:
    """The resources ``path`` names, for verbs that only need their identity (get, delete)."""
    return [as_target(e) for e in load_entries_from(path, recursive, skip_empty)]


@dataclass(frozen=True)
class NamespaceFlags:
    namespace: str | None = None
    all_namespaces: bool = False


def resolve_namespace(
    kind: type[Resource], resource_ns: str | None, flags: NamespaceFlags
) -> str | None:
    """The namespace to act in (None = every namespace), with upstream's rules and messages."""
    cli_ns = flags.namespace or ""
    res_ns = resource_ns or ""
    if kind.NAMESPACED:
        if flags.all_namespaces and cli_ns:
            raise CtlError(
                "cannot use both --namespace and --all-namespaces flags at the same time"
            )
        if flags.all_namespaces:
            return None
        if not res_ns:
            return cli_ns or "default"
        if cli_ns and res_ns != cli_ns:
            raise CtlError(
                f"resource namespace does not match client namespace. {res_ns} != {cli_ns}"
            )
        return res_ns
    if res_ns:
        raise CtlError(
            "namespace should not be specified for a non-namespaced resource. "
            f"{kind.KIND} is not a namespaced resource"
        )
    if flags.all_namespaces or cli_ns:
        raise CtlError(f"{kind.KIND} is not namespaced")
    return None


def with_namespace(resource: Resource, namespace: str | None) -> Resource:
    if not resource.NAMESPACED or resource.metadata.namespace == namespace:
        return resource
    meta = resource.metadata.model_copy(update={"namespace": namespace})
    return resource.model_copy(update={"metadata": meta})


def single_kind(resources: list[Resource] | list[Loaded]) -> str:
    """The kind when all resources share one, else "" (messages then omit the kind)."""
    kinds = {entry_kind(r) for r in resources}
    return kinds.pop() if len(kinds) == 1 else ""
