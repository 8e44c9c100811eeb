"""Readback parsing: only hook spec, policy, hash comments and canonical members survive."""

from __future__ import annotations

from calico.felix.nftables.readback import parse_listing
from calico.felix.nftables.state import ChainState, HookSpec, full_comment, hash_from_comment

T = {"family": "inet", "table": "calico"}

LISTING = {
    "nftables": [
        {"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
        {"table": {"family": "inet", "name": "calico", "handle": 1}},
        {
            "set": {
                **T,
                "name": "s4",
                "type": "ipv4_addr",
                "flags": ["interval"],
                "elem": [{"prefix": {"addr": "10.0.0.0", "len": 24}}, "10.1.0.0"],
            }
        },
        {"set": {**T, "name": "sc", "type": ["ipv4_addr", "inet_proto", "inet_service"]}},
        {
            "map": {
                **T,
                "name": "m",
                "type": "ifname",
                "map": "verdict",
                "elem": [["cali1", {"goto": {"target": "a"}}]],
            }
        },
        {"map": {**T, "name": "foreign", "type": "ipv4_addr", "map": "mark"}},
        {"chain": {**T, "name": "a", "handle": 2}},
        {
            "chain": {
                **T,
                "name": "fwd",
                "handle": 3,
                "type": "filter",
                "hook": "forward",
                "prio": 0,
                "policy": "drop",
            }
        },
        {"rule": {**T, "chain": "a", "handle": 4, "comment": "cali:AAAA; hi", "expr": []}},
        {"rule": {**T, "chain": "a", "handle": 5, "expr": [{"accept": None}]}},
    ]
}


def test_parse_listing() -> None:
    st = parse_listing(LISTING, "calico")
    assert st.table_exists
    assert st.chains == {
        "a": ChainState(None, None, ("AAAA", "")),
        "fwd": ChainState(HookSpec("filter", "forward", 0), "drop", ()),
    }
    assert st.sets["s4"].interval and st.sets["s4"].elements == {"10.0.0.0/24", "10.1.0.0"}
    assert st.sets["sc"].type == ("ipv4_addr", "inet_proto", "inet_service")
    assert st.sets["sc"].elements == set()
    assert st.maps["m"].elements == {"cali1": ("goto", "a")}
    assert st.maps["foreign"].key_type == ("<unparsed>",)  # never matches a desired map


def test_missing_or_empty_listing() -> None:
    assert not parse_listing("", "calico").table_exists
    assert not parse_listing({"nftables": []}, "calico").table_exists


def test_comment_helpers() -> None:
    assert full_comment("h", "") == "cali:h;"
    assert full_comment("h", "hello") == "cali:h; hello"
    long = full_comment("0123456789abcdef", "é" * 100)
    assert len(long.encode()) <= 128 and long.startswith("cali:0123456789abcdef; é")
    assert hash_from_comment(long) == "0123456789abcdef"
    assert hash_from_comment("someone else's") == ""
    assert hash_from_comment(None) == ""
