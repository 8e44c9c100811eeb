"""``Dataset.add_endpoint_kvs`` (the read's bulk loop) keeps exactly the endpoints that
``_split_path`` + ``add_endpoint_text`` keep, under the same ids and texts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from calico.datastore.backend import KVPair
from calico.policyeval.dataset import Dataset, _split_path

PREFIX = "/calico/resources/v3/projectcalico.org/workloadendpoints/"
segment = st.sampled_from(["", "ns1", "a", "a/b", "/", "//", "x/", "/y", "n-s.1"])
path = st.one_of(
    st.builds(lambda a, b: PREFIX + a + b, segment, segment),
    st.builds(lambda a: PREFIX[:-1] + a, segment),  # the prefix without its slash
    st.builds(lambda a: "/calico/resources/v3/projectcalico.org/hostendpoints/" + a, segment),
)


def _slow(kvs: list[KVPair], namespaced: bool) -> Dataset:
    data = Dataset()
    for kv in kvs:
        namespace, name = _split_path(PREFIX, kv.key, namespaced)
        if name:
            data.add_endpoint_text("WorkloadEndpoint", namespace, name, kv.value)
    return data


def _view(data: Dataset) -> dict[tuple[str, str, str], tuple[str, str, str, str]]:
    entries = {k: data._entry(k) for k in data._endpoints}  # the lazily made records
    return {k: (e.kind, e.namespace, e.name, e.text) for k, e in entries.items()}


@given(st.lists(path, max_size=8), st.booleans())
def test_bulk_matches_per_key(paths: list[str], namespaced: bool) -> None:
    kvs = [KVPair(p, f'{{"i": {i}}}', i + 1) for i, p in enumerate(paths)]
    fast = Dataset()
    fast.add_endpoint_kvs("WorkloadEndpoint", PREFIX, namespaced, kvs)
    assert list(_view(fast).items()) == list(_view(_slow(kvs, namespaced)).items())  # order too


def test_boundaries() -> None:
    kvs = [
        KVPair(PREFIX + "ns1/wep-a", "A", 1),
        KVPair(PREFIX + "ns1/", "empty name", 2),
        KVPair(PREFIX + "/wep-b", "empty namespace", 3),
        KVPair(PREFIX + "ns1/a/b", "nested", 4),
        KVPair(PREFIX + "wep-c", "no namespace", 5),
        KVPair("/calico/other/ns1/wep-d", "other prefix", 6),
    ]
    data = Dataset()
    data.add_endpoint_kvs("WorkloadEndpoint", PREFIX, True, kvs)
    assert list(_view(data)) == [("WorkloadEndpoint", "ns1", "wep-a")]
    flat = Dataset()
    flat.add_endpoint_kvs("HostEndpoint", PREFIX, False, kvs)
    assert sorted(k[2] for k in _view(flat)) == ["wep-c"]


def test_a_re_added_endpoint_replaces_the_record_made_for_the_old_text() -> None:
    """Records are made lazily and kept; adding the id again must drop the old one (and the
    address indexes), by text or in bulk."""
    old = '{"spec": {"ipNetworks": ["10.0.0.1/32"]}}'
    new = '{"spec": {"ipNetworks": ["10.0.0.2/32"]}}'
    data = Dataset()
    data.add_endpoint_text("WorkloadEndpoint", "ns1", "a", old)
    assert data._entry(("WorkloadEndpoint", "ns1", "a")).raw["spec"]["ipNetworks"] == [
        "10.0.0.1/32"
    ]
    import ipaddress

    assert len(data._candidates_at(ipaddress.ip_address("10.0.0.1"))) == 1
    data.add_endpoint_text("WorkloadEndpoint", "ns1", "a", new)
    assert data._entry(("WorkloadEndpoint", "ns1", "a")).text == new
    assert data._candidates_at(ipaddress.ip_address("10.0.0.1")) == []
    assert len(data._candidates_at(ipaddress.ip_address("10.0.0.2"))) == 1
    data.add_endpoint_kvs("WorkloadEndpoint", PREFIX, True, [KVPair(PREFIX + "ns1/a", old, 9)])
    assert data._entry(("WorkloadEndpoint", "ns1", "a")).text == old
    assert len(data._candidates_at(ipaddress.ip_address("10.0.0.1"))) == 1


_piece = st.sampled_from(
    [
        '"10.0.0.1/32"',
        '"10.0.0.1"',
        '"10.0.0.10/32"',
        '"10.0.0.1',
        "10.0.0.1/",
        'x"10.0.0.1x',
        ",",
        "",
    ]
)


@given(st.lists(st.lists(_piece, max_size=4).map("".join), max_size=6))
def test_ipv4_candidates_are_the_texts_quoting_the_address(texts: list[str]) -> None:
    """The one-scan search keeps exactly the texts holding ``"a/`` or ``"a"`` (a superset of
    the holders, which the caller checks), at any position, in order."""
    import ipaddress

    data = Dataset()
    for i, text in enumerate(texts):
        data.add_endpoint_text("WorkloadEndpoint", "ns", f"e{i}", text)
    got = [e.name for e in data._candidates_at(ipaddress.ip_address("10.0.0.1"))]
    want = [f"e{i}" for i, t in enumerate(texts) if '"10.0.0.1/' in t or '"10.0.0.1"' in t]
    assert got == want
