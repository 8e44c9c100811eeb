"""The all-interfaces (``*``) host endpoint's chains and the dispatch fallback to them (named
endpoints first, workload interfaces never on INPUT/OUTPUT or pre-DNAT, no untracked policy).
The endpoint manager's side: tests/unit/felix/dataplane/test_all_interfaces_hep.py."""

from __future__ import annotations

from calico.felix.hostendpoints import ALL_INTERFACES, all_interfaces_endpoint
from calico.felix.messages import (
    HostEndpoint,
    HostEndpointID,
    PolicyID,
    TierInfo,
)
from calico.felix.nftables.model import Chain
from calico.felix.rules import RenderConfig, RuleRenderer

PRE = PolicyID("pre", "GlobalNetworkPolicy")
UNT = PolicyID("unt", "GlobalNetworkPolicy")
FWD = PolicyID("fwd", "GlobalNetworkPolicy")
NORMAL = PolicyID("normal", "GlobalNetworkPolicy")
ANY = "any-interface-at-all"
HOST_DISPATCH = {
    "filter-cali-from-host-endpoint": ("iifname", "filter-cali-fh-"),
    "filter-cali-to-host-endpoint": ("oifname", "filter-cali-th-"),
    "filter-cali-from-hep-forward": ("iifname", "filter-cali-fhfw-"),
    "filter-cali-to-hep-forward": ("oifname", "filter-cali-thfw-"),
}


def body(chain: Chain) -> list[list[dict]]:
    return [list(r.exprs) for r in chain.rules]


def lookup(key: str, name: str) -> list[dict]:
    return [{"vmap": {"key": {"meta": {"key": key}}, "data": f"@{name}"}}]


def goto(target: str) -> list[dict]:
    return [{"goto": {"target": target}}]


def wl_return(prefix: str) -> list[dict]:
    iif = {"meta": {"key": "iifname"}}
    return [{"match": {"op": "==", "left": iif, "right": f"{prefix}*"}}, {"return": None}]


def by_name(chains: list[Chain]) -> dict[str, Chain]:
    return {c.name: c for c in chains}


def wild(**kw: object) -> HostEndpoint:
    return HostEndpoint("*", **kw)  # type: ignore[arg-type]


def test_all_interfaces_key_cannot_be_an_interface_name() -> None:
    assert ALL_INTERFACES == ANY and len(ANY.encode()) >= 16  # IFNAMSIZ, NUL included


def test_chains_are_named_any_and_never_raw() -> None:
    hep = wild(
        tiers=(TierInfo("default", (NORMAL,), (NORMAL,)),),
        pre_dnat_tiers=(TierInfo("default", (PRE,)),),
        untracked_tiers=(TierInfo("default", (UNT,), (UNT,)),),
        forward_tiers=(TierInfo("default", (FWD,), ()),),
    )
    chains = by_name(RuleRenderer().host_endpoint_chains(ANY, hep))
    assert sorted(chains) == [
        f"filter-cali-fh-{ANY}",
        f"filter-cali-fhfw-{ANY}",
        f"filter-cali-th-{ANY}",
        f"filter-cali-thfw-{ANY}",
        f"mangle-cali-fh-{ANY}",
    ]
    # Failsafe first, then policy, then the default deny (no profile).
    fh = body(chains[f"filter-cali-fh-{ANY}"])
    assert fh[3] == [{"jump": {"target": "filter-cali-failsafe-in"}}]
    assert {"jump": {"target": "filter-cali-pi-gnp/normal"}} in fh[5]
    assert fh[-1] == [{"drop": None}]
    th = body(chains[f"filter-cali-th-{ANY}"])
    assert th[3] == [{"jump": {"target": "filter-cali-failsafe-out"}}]
    assert body(chains[f"mangle-cali-fh-{ANY}"])[1] == [
        {"jump": {"target": "mangle-cali-failsafe-in"}}
    ]
    # The same endpoint on a named interface keeps its untracked chains: only `*` drops them.
    named = by_name(
        RuleRenderer().host_endpoint_chains("eth0", HostEndpoint("eth0", **_tiers(hep)))
    )
    assert {"raw-cali-fh-eth0", "raw-cali-th-eth0"} <= set(named)


def _tiers(hep: HostEndpoint) -> dict:
    return {
        "tiers": hep.tiers,
        "pre_dnat_tiers": hep.pre_dnat_tiers,
        "untracked_tiers": hep.untracked_tiers,
        "forward_tiers": hep.forward_tiers,
    }


def test_dispatch_without_all_interfaces_endpoint_just_returns() -> None:
    r = RuleRenderer()
    static = by_name(r.static_chains())
    host = by_name(r.host_dispatch_chains(None))
    assert sorted(host) == sorted([*HOST_DISPATCH, *_other_host_dispatch()])
    for name, chain in host.items():
        assert body(chain) == body(static[name]) == [lookup(_key(name), name)]


def _other_host_dispatch() -> list[str]:
    return [
        "mangle-cali-from-host-endpoint",
        "raw-cali-from-host-endpoint",
        "raw-cali-to-host-endpoint",
    ]


def _key(name: str) -> str:
    return "oifname" if "-to-" in name else "iifname"


def test_dispatch_falls_back_to_the_all_interfaces_chains_after_the_named_ones() -> None:
    r = RuleRenderer()
    chains = by_name(r.host_dispatch_chains(wild()))
    for name, (key, prefix) in HOST_DISPATCH.items():
        # Map lookup first (a named endpoint's interface goes to its own chain), then `*`.
        assert body(chains[name]) == [lookup(key, name), goto(f"{prefix}{ANY}")]
    # No pre-DNAT or untracked policy: mangle and raw keep returning.
    for name in _other_host_dispatch():
        assert body(chains[name]) == [lookup(_key(name), name)]
    # Workload dispatch is not the host's: never rendered here, unchanged in the static set.
    assert "filter-cali-from-wl-dispatch" not in chains


def test_pre_dnat_fallback_skips_workload_interfaces_and_untracked_is_not_rendered() -> None:
    r = RuleRenderer(RenderConfig(workload_iface_prefixes=("cali", "tap")))
    hep = wild(
        pre_dnat_tiers=(TierInfo("default", (PRE,)),),
        untracked_tiers=(TierInfo("default", (UNT,), (UNT,)),),
    )
    chains = by_name(r.host_dispatch_chains(hep))
    name = "mangle-cali-from-host-endpoint"
    assert body(chains[name]) == [
        lookup("iifname", name),
        wl_return("cali"),
        wl_return("tap"),
        goto(f"mangle-cali-fh-{ANY}"),
    ]
    for name in ("raw-cali-from-host-endpoint", "raw-cali-to-host-endpoint"):
        assert body(chains[name]) == [lookup(_key(name), name)]


def test_dispatch_maps_never_hold_the_all_interfaces_key() -> None:
    heps = {"eth0": HostEndpoint("eth0"), ANY: wild(pre_dnat_tiers=(TierInfo("default", (PRE,)),))}
    maps = {vm.name: vm.elements for vm in RuleRenderer().dispatch_maps([], heps)}
    assert maps["filter-cali-from-host-endpoint"] == {"eth0": ("goto", "filter-cali-fh-eth0")}
    assert maps["mangle-cali-from-host-endpoint"] == {}
    assert all(ANY not in elements for elements in maps.values())


def test_lowest_id_all_interfaces_endpoint_wins() -> None:
    a, b = wild(profile_ids=("a",)), wild(profile_ids=("b",))
    heps = {HostEndpointID("z"): b, HostEndpointID("a"): a, HostEndpointID("m"): HostEndpoint("e")}
    assert all_interfaces_endpoint(heps) is a
    assert all_interfaces_endpoint({HostEndpointID("m"): HostEndpoint("e")}) is None
