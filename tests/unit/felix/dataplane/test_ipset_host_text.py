"""``host_text``'s inet_pton fast path answers exactly as the ``ipaddress`` reference
(``net_text(parse_net(addr))``), errors included (design/performance.md "Full-Felix scale:
the snapshot path")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.dataplane.managers.ipsets import host_text, member_element
from calico.felix.dataplane.managers.overlap import net_text, parse_net
from calico.felix.messages import IPSetType

octets = st.one_of(
    st.integers(0, 255).map(str),
    st.integers(256, 999).map(str),
    st.integers(0, 99).map(lambda n: f"0{n}"),  # leading zeros: ipaddress refuses them
    st.sampled_from(["", "-1", "1a", " 1", "٣"]),
)
quads = st.lists(octets, min_size=3, max_size=5).map(".".join)
suffixes = st.sampled_from(["", "/32", "/24", "/0", "/33", " ", "\n"])
texts = st.one_of(
    st.tuples(quads, suffixes).map("".join),
    st.sampled_from(["fd00::1", "::ffff:1.2.3.4", "FD00::1", "::", "fd00::1/128", "junk", ""]),
    st.text(max_size=12),
)


def _reference(addr: str) -> tuple[str, str]:
    try:
        return ("ok", net_text(parse_net(addr)))
    except ValueError as exc:
        return ("error", type(exc).__name__)


def _fast(addr: str) -> tuple[str, str]:
    try:
        return ("ok", host_text(addr))
    except ValueError as exc:
        return ("error", type(exc).__name__)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_host_text_matches_ipaddress(addr: str) -> None:
    assert _fast(addr) == _reference(addr)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_every_canonical_dotted_quad_is_its_own_answer(n: int) -> None:
    addr = ".".join(str((n >> s) & 255) for s in (24, 16, 8, 0))
    assert host_text(addr) == addr == net_text(parse_net(addr))


def test_named_port_member_element() -> None:
    assert member_element(IPSetType.IP_AND_PORT, "10.0.0.1,TCP:8080") == ("10.0.0.1", "tcp", 8080)
    assert member_element(IPSetType.IP_AND_PORT, "fd00:0::1,udp:53") == ("fd00::1", "udp", 53)
