"""``is_ipv4_host_cidr`` (the fast path of a WorkloadEndpoint's ipNetworks check) against
``ipaddress``: it may only accept what the exact path accepts as a one-address network."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from calico.api.endpoints import WorkloadEndpointSpec
from calico.api.validators import is_ipv4_host_cidr


def exact(value: str) -> bool:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError:
        return False
    return net.version == 4 and net.num_addresses == 1 and "/" in value


octet = st.one_of(st.integers(0, 300).map(str), st.text("0123456789", min_size=1, max_size=4))
dotted = st.lists(octet, min_size=3, max_size=5).map(".".join)
plen = st.one_of(st.sampled_from(["32", "032", "31", "0", "", "32 ", "+32", "255.255.255.255"]))
texts = st.one_of(
    st.builds(lambda a, p: f"{a}/{p}", dotted, plen),
    st.text("0123456789./: x\u0663", max_size=20),
)


@given(texts)
@example("1.2.3.4/32")
@example("01.2.3.4/32")
@example("1.2.3.4/255.255.255.255")
@example("1.2.3.4")
@example("1.2.3.256/32")
@example("\u0661.2.3.4/32")  # a non-ASCII digit
@example("1.2.3.4/32/32")
def test_fast_path_accepts_only_what_ipaddress_accepts(value: str) -> None:
    if is_ipv4_host_cidr(value):
        assert exact(value)


@given(st.integers(0, 2**32 - 1))
def test_fast_path_accepts_every_canonical_host(n: int) -> None:
    assert is_ipv4_host_cidr(f"{ipaddress.IPv4Address(n)}/32")


def spec(nets: list[str]) -> dict[str, object]:
    return {"node": "n", "interfaceName": "cali1", "ipNetworks": nets}


@pytest.mark.parametrize(
    ("nets", "message"),
    [
        (["10.0.0.0/24"], r"only /32 \(IPv4\) or /128 \(IPv6\) networks are supported"),
        (["10.0.0.1/24"], "has host bits set"),
        (["01.0.0.1/32"], "is not a valid CIDR"),
    ],
)
def test_rejections_keep_their_messages(nets: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WorkloadEndpointSpec.model_validate(spec(nets))


def test_accepted_forms() -> None:
    for nets in (["10.0.0.1/32"], ["10.0.0.1"], ["fd00::1/128"], ["10.0.0.1/255.255.255.255"]):
        assert WorkloadEndpointSpec.model_validate(spec(nets)).ip_networks == nets


def test_nat_check_still_sees_the_networks() -> None:
    ok = {**spec(["10.0.0.1/32"]), "ipNATs": [{"internalIP": "10.0.0.1", "externalIP": "1.1.1.1"}]}
    assert WorkloadEndpointSpec.model_validate(ok).ip_nats
    bad = {**ok, "ipNATs": [{"internalIP": "10.0.0.2", "externalIP": "1.1.1.1"}]}
    with pytest.raises(ValueError, match="is not one of the endpoint's ipNetworks"):
        WorkloadEndpointSpec.model_validate(bad)
