"""InheritStore.merged (inlined for the snapshot path) against merged_labels, its reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from calico.felix.labelindex.inherit import InheritStore
from calico.policyeval.rulesem import merged_labels

_labels = st.dictionaries(st.sampled_from("abc"), st.sampled_from(["x", "y", ""]), max_size=3)
_parent_ids = st.lists(st.sampled_from(["p0", "p1", "p2", "p3"]), max_size=4)


@given(
    own=_labels,
    parent_ids=_parent_ids,
    parents=st.dictionaries(st.sampled_from(["p0", "p1", "p2"]), st.none() | _labels),
)
def test_merged_equals_merged_labels(
    own: dict[str, str], parent_ids: list[str], parents: dict[str, dict[str, str] | None]
) -> None:
    store = InheritStore()
    for pid, labels in parents.items():
        store.set_parent(pid, labels)
    store.put_item("e", {}, list(parents))  # referenced parents with no labels stay known
    expected = merged_labels(own, [parents.get(pid) for pid in parent_ids])
    assert store.merged(own, parent_ids) == expected
