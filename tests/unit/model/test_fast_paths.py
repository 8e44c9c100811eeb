"""Fast paths taken on every resource at a Felix start, each against its reference:
``split_dashed`` vs the character scan, ``net_str`` vs ``ipaddress``, and the memoised label
validators vs their uncached checks (same answers, same error messages, also when the memo
already holds the value)."""

from __future__ import annotations

import ipaddress

from hypothesis import example, given
from hypothesis import strategies as st

from calico.api import validators as v
from calico.model.names import split_dashed, split_dashed_scan
from calico.model.processors.common import net_str


@given(st.text("ab-", max_size=16))
@example("a---b")
@example("--")
@example("-a-")
def test_split_dashed_matches_the_scan(name: str) -> None:
    assert split_dashed(name) == split_dashed_scan(name)


octet = st.one_of(st.integers(0, 300).map(str), st.text("0123456789", min_size=1, max_size=4))
hosts = st.builds(
    lambda parts, plen: ".".join(parts) + plen,
    st.lists(octet, min_size=3, max_size=5),
    st.sampled_from(["/32", "/31", "/24", "", "/032", "/255.255.255.255"]),
)


def reference_net_str(text: str) -> str | type[ValueError]:
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        return ValueError


@given(st.one_of(hosts, st.ip_addresses(v=4).map(lambda a: f"{a}/32")))
@example("10.0.0.1/32")
@example("010.0.0.1/32")
def test_net_str_matches_ipaddress(text: str) -> None:
    want = reference_net_str(text)
    try:
        got: str | type[ValueError] = net_str(text)
    except ValueError:
        got = ValueError
    assert got == want


label_text = st.text("abcAZ09-_./\u00e9 ", max_size=70)


def outcome(fn, value: str) -> str | None:  # type: ignore[no-untyped-def]
    try:
        fn(value)
    except ValueError as exc:
        return str(exc)
    return None


@given(label_text)
@example("app")
@example("example.com/app")
@example("-bad")
@example("a" * 64)
def test_label_checks_match_their_references(text: str) -> None:
    for fast, ref in ((v.label_key, v.label_key_uncached), (v.label_value, v.label_value_uncached)):
        want = outcome(ref, text)
        assert outcome(fast, text) == want
        assert outcome(fast, text) == want  # second call: answered from the memo


def test_memoised_label_checks_return_their_argument() -> None:
    assert v.label_key("projectcalico.org/namespace") == "projectcalico.org/namespace"
    assert v.label_value("ns1") == "ns1"
    assert v.label_map({"a": "b"}) == {"a": "b"}
