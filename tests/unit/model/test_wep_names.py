"""WorkloadEndpoint v3 name <-> parts conversion."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.model import (
    WepNameError,
    WorkloadEndpointKey,
    parse_wep_name,
    wep_key_from_v3,
    wep_name,
    wep_v3_from_key,
)

EXAMPLES = [
    (("node1", "k8s", "nginx-abc", "eth0"), "node1-k8s-nginx--abc-eth0"),
    (("my-node", "k8s", "web-7d9f-x2", "eth0"), "my--node-k8s-web--7d9f--x2-eth0"),
    (("n", "cni", "c", "e"), "n-cni-c-e"),
    (("n-", "o", "w-", "e-"), "n---o-w---e--"),  # trailing dashes survive
    (("-n", "o", "w", "e"), "--n-o-w-e"),  # a leading dash on the first part survives
]


@pytest.mark.parametrize(("parts", "name"), EXAMPLES)
def test_examples(parts: tuple[str, str, str, str], name: str) -> None:
    assert wep_name(*parts) == name
    assert parse_wep_name(name) == parts


@pytest.mark.parametrize(
    "name",
    ["", "a-b-c", "a-b-c-d-e", "a--b-c-d", "a-b--c--d", "a-b-c-", "-a-b-c", "a--b--c--d"],
)
def test_names_that_do_not_split_into_four(name: str) -> None:
    with pytest.raises(WepNameError):
        parse_wep_name(name)


@pytest.mark.parametrize(
    "parts",
    [("", "k8s", "p", "e"), ("n", "k8s", "", "e"), ("n", "-k8s", "p", "e"), ("n", "k", "p", "-e")],
)
def test_ambiguous_parts_are_refused(parts: tuple[str, str, str, str]) -> None:
    with pytest.raises(WepNameError):
        wep_name(*parts)


def test_key_from_v3() -> None:
    key = wep_key_from_v3("default", "node1-k8s-nginx--abc-eth0")
    assert key == WorkloadEndpointKey("node1", "k8s", "default/nginx-abc", "eth0")
    assert (
        key.default_path() == "/calico/v1/host/node1/workload/k8s/default%2fnginx-abc/endpoint/eth0"
    )
    assert wep_v3_from_key(key) == ("default", "node1-k8s-nginx--abc-eth0")
    with pytest.raises(WepNameError):
        wep_key_from_v3("", "node1-k8s-nginx-eth0")
    with pytest.raises(WepNameError):
        wep_key_from_v3("default", "node1-k8s-nginx")
    with pytest.raises(WepNameError):
        wep_v3_from_key(WorkloadEndpointKey("n", "k8s", "no-namespace", "e"))


# Parts as Kubernetes produces them (never empty, never starting with '-'), plus unicode.
_part_chars = st.sampled_from(list("ab-.9é"))
first_part = st.text(_part_chars, min_size=1, max_size=10)
later_part = first_part.filter(lambda s: not s.startswith("-"))


@given(first_part, later_part, later_part, later_part)
def test_round_trip(node: str, orch: str, workload: str, endpoint: str) -> None:
    name = wep_name(node, orch, workload, endpoint)
    assert parse_wep_name(name) == (node, orch, workload, endpoint)
    key = wep_key_from_v3("ns", name)
    assert key.workload_id == f"ns/{workload}"
    assert wep_v3_from_key(key) == ("ns", name)
