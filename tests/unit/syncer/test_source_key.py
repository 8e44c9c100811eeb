"""``_WatcherCache.source_key`` builds its ResourceKey without the constructor's checks
(``resource_key_checked``); over generated paths it answers exactly as building the key
through the constructor does: an equal key whose path is the stored one, or None."""

from __future__ import annotations

import queue
import threading

from hypothesis import example, given, settings
from hypothesis import strategies as st

from calico.model import InvalidKeyError, ResourceKey
from calico.model.resources import KINDS, resource_prefix
from calico.syncer.watchersyncer import ResourceType, _WatcherCache

_KINDS = ["WorkloadEndpoint", "Tier", "NetworkPolicy", "GlobalNetworkPolicy"]


def reference(kind: str, path: str) -> ResourceKey | None:
    """The path check through the constructor (what source_key did before)."""
    prefix = resource_prefix(kind)
    namespaced = KINDS[kind].namespaced
    rest = path[len(prefix) :] if path.startswith(prefix) else ""
    namespace, sep, name = rest.partition("/") if namespaced else ("", "", rest)
    if name and "/" not in name and (bool(sep) and bool(namespace)) == namespaced:
        try:
            return ResourceKey(kind, name, namespace)
        except InvalidKeyError:
            return None
    return None


_SEGMENT = st.text(st.sampled_from("ab-./%_\\ é\x00"), max_size=4)


@st.composite
def paths(draw: st.DrawFn) -> tuple[str, str]:
    kind = draw(st.sampled_from(_KINDS))
    prefix = draw(st.sampled_from([resource_prefix(kind), resource_prefix("Tier"), "", "/calico/"]))
    segments = draw(st.lists(_SEGMENT, min_size=0, max_size=3))
    return kind, prefix + "/".join(segments)


@settings(max_examples=1500)
@given(paths())
@example(("WorkloadEndpoint", resource_prefix("WorkloadEndpoint") + "ns/a"))
@example(("Tier", resource_prefix("Tier") + "default"))
def test_source_key_answers_as_the_constructor(case: tuple[str, str]) -> None:
    kind, path = case
    cache = _WatcherCache(0, ResourceType(kind), None, queue.Queue(), threading.Event())  # type: ignore[arg-type]
    got, want = cache.source_key(path), reference(kind, path)
    assert got == want
    if got is not None:
        assert type(got) is ResourceKey and hash(got) == hash(want)
        assert (got.kind, got.name, got.namespace) == (want.kind, want.name, want.namespace)
        assert got.default_path() == path
