"""Table tests for host endpoints in the offline evaluator, as the nftables dataplane treats
them (``calico.felix.rules.endpoints.host_endpoint_chains``): failsafe ports first (exact port
boundaries, protocol, direction, nets, FelixConfiguration overrides), then untracked, then
pre-DNAT (ingress only), then normal policy; the ``*`` endpoint has no untracked layer; a named
or expected-IP endpoint wins over ``*``; host <-> its own workloads."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.model import ResourceKey
from calico.policyeval.dataset import Dataset
from calico.policyeval.evaluate import Packet, failsafe_match
from calico.policyeval.hostconfig import Failsafe, FelixConfigs, parse_failsafes
from calico.policyeval.hostendpoints import endpoint_holding
from calico.policyeval.report import enforcing_endpoint, explain_connection

TCP, UDP = 6, 17
HOST_IP, EXT_IP, WL_IP = "192.168.0.1", "203.0.113.9", "10.0.0.5"


def hep(name: str, iface: str, ips: list[str], labels: dict[str, str], node: str = "node1"):
    spec: dict[str, Any] = {"node": node, "interfaceName": iface, "expectedIPs": ips}
    if not iface:
        del spec["interfaceName"]
    return {"kind": "HostEndpoint", "metadata": {"name": name, "labels": labels}, "spec": spec}


def wep(name: str, ip: str, node: str = "node1") -> dict[str, Any]:
    return {
        "kind": "WorkloadEndpoint",
        "metadata": {
            "name": f"{node}-k8s-{name}-eth0",
            "namespace": "ns1",
            "labels": {"app": name},
        },
        "spec": {
            "node": node,
            "orchestrator": "k8s",
            "pod": name,
            "endpoint": "eth0",
            "interfaceName": f"cali{name}",
            "ipNetworks": [f"{ip}/32"],
            "profiles": ["kns.ns1"],
        },
    }


def gnp(name: str, selector: str, direction: str, rules: list[Any], **spec: Any):
    body = {"selector": selector, "types": [direction.capitalize()], direction: rules, **spec}
    return {"kind": "GlobalNetworkPolicy", "metadata": {"name": name}, "spec": body}


def allow(port: int, proto: str = "TCP") -> dict[str, Any]:
    return {"action": "Allow", "protocol": proto, "destination": {"ports": [port]}}


def deny(port: int, proto: str = "TCP") -> dict[str, Any]:
    return {"action": "Deny", "protocol": proto, "destination": {"ports": [port]}}


PROFILE = {
    "kind": "Profile",
    "metadata": {"name": "kns.ns1"},
    "spec": {"ingress": [{"action": "Allow"}], "egress": [{"action": "Allow"}]},
}


def dataset(*docs: dict[str, Any]) -> Dataset:
    data = Dataset()
    for doc in [PROFILE, *docs]:
        meta = doc["metadata"]
        doc = {"apiVersion": "projectcalico.org/v3", **doc}
        ns = meta.get("namespace", "")
        if doc["kind"] in ("WorkloadEndpoint", "HostEndpoint"):
            data.add_endpoint_text(doc["kind"], ns, meta["name"], json.dumps(doc))
        else:
            data.add_resource(ResourceKey(doc["kind"], meta["name"], ns), doc)
    return data.finish()


def configs(**by_name: dict[str, Any]) -> FelixConfigs:
    out = FelixConfigs()
    for name, spec in by_name.items():
        name = name.replace("_", ".")
        out.raw[name] = {
            "apiVersion": "projectcalico.org/v3",
            "kind": "FelixConfiguration",
            "metadata": {"name": name},
            "spec": spec,
        }
    return out


def explain(
    data: Dataset,
    src: str,
    dst: str,
    proto: int = TCP,
    dport: int = 8080,
    sport: int = 40000,
    cfg: FelixConfigs | None = None,
) -> dict[str, Any]:
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    src_ep = (enforcing_endpoint(data.endpoints_at(s), s) or [None])[0]
    dst_ep = (enforcing_endpoint(data.endpoints_at(d), d) or [None])[0]
    return explain_connection(data, src_ep, dst_ep, Packet(proto, s, d, sport, dport), "X", cfg)


def steps(side: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(s["step"], s.get("layer"), s.get("policy"), s["action"]) for s in side["chain"]]


DENY_ALL_HEP = dataset(hep("h1", "eth0", [HOST_IP], {"role": "host"}))  # no policy: deny all


# -- failsafe ports -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("proto", "port", "verdict"),
    [
        (TCP, 22, "Allow"),
        (TCP, 21, "Deny"),
        (TCP, 23, "Deny"),  # tcp:22, +-1
        (UDP, 22, "Deny"),  # protocol matters
        (UDP, 68, "Allow"),
        (UDP, 67, "Deny"),
        (UDP, 69, "Deny"),
        (TCP, 68, "Deny"),
        (TCP, 6667, "Allow"),
        (TCP, 6668, "Deny"),
        (UDP, 53, "Deny"),  # an outbound failsafe, not an inbound one
    ],
)
def test_inbound_failsafe_defaults(proto: int, port: int, verdict: str) -> None:
    report = explain(DENY_ALL_HEP, EXT_IP, HOST_IP, proto, port)
    assert report["ingress"]["verdict"] == verdict
    first = report["ingress"]["chain"][0]
    if verdict == "Allow":
        name = "tcp" if proto == TCP else "udp"
        assert first == {
            "step": "failsafe",
            "action": "Allow",
            "note": f"failsafe port {name}:{port} (FailsafeInboundHostPorts)",
        }
    else:
        assert first["step"] == "default"  # no policy, no profile: the HEP denies


@pytest.mark.parametrize(
    ("proto", "port", "verdict"),
    [
        (UDP, 53, "Allow"),
        (UDP, 52, "Deny"),
        (UDP, 54, "Deny"),
        (TCP, 53, "Deny"),
        (UDP, 67, "Allow"),
        (TCP, 22, "Deny"),
        (TCP, 179, "Allow"),
    ],
)
def test_outbound_failsafe_defaults(proto: int, port: int, verdict: str) -> None:
    report = explain(DENY_ALL_HEP, HOST_IP, EXT_IP, proto, port)
    assert report["egress"]["verdict"] == verdict
    assert report["result"]["verdict"] == verdict  # the external side has no policy
    if verdict == "Allow":
        assert "(FailsafeOutboundHostPorts)" in report["egress"]["chain"][0]["note"]


def test_failsafe_from_felix_configuration_global_then_node_override() -> None:
    cfg = configs(default={"failsafeInboundHostPorts": [{"protocol": "TCP", "port": 2222}]})
    assert explain(DENY_ALL_HEP, EXT_IP, HOST_IP, TCP, 2222, cfg=cfg)["result"]["verdict"] == (
        "Allow"
    )
    assert explain(DENY_ALL_HEP, EXT_IP, HOST_IP, TCP, 22, cfg=cfg)["result"]["verdict"] == "Deny"
    cfg = configs(
        default={"failsafeInboundHostPorts": [{"protocol": "TCP", "port": 2222}]},
        node_node1={"failsafeInboundHostPorts": []},  # none on node1
    )
    assert explain(DENY_ALL_HEP, EXT_IP, HOST_IP, TCP, 2222, cfg=cfg)["result"]["verdict"] == (
        "Deny"
    )
    other = configs(node_node2={"failsafeInboundHostPorts": []})  # another node's: no effect
    assert explain(DENY_ALL_HEP, EXT_IP, HOST_IP, TCP, 22, cfg=other)["result"]["verdict"] == (
        "Allow"
    )


def test_failsafe_net_restricts_the_peer() -> None:
    cfg = configs(
        default={
            "failsafeInboundHostPorts": [{"protocol": "TCP", "port": 22, "net": "10.1.0.0/16"}]
        }
    )
    assert explain(DENY_ALL_HEP, "10.1.255.255", HOST_IP, cfg=cfg, dport=22)["result"] == {
        "verdict": "Allow"
    }
    assert explain(DENY_ALL_HEP, "10.2.0.0", HOST_IP, cfg=cfg, dport=22)["result"]["verdict"] == (
        "Deny"
    )


def test_parse_failsafes_forms() -> None:
    got = parse_failsafes("tcp:22, udp:68,tcp:10.0.0.0/8:179,tcp:[fd00::/8]:22,53")
    assert [str(f) for f in got] == [
        "tcp:22",
        "udp:68",
        "tcp:10.0.0.0/8:179",
        "tcp:[fd00::/8]:22",
        "tcp:53",
    ]
    assert parse_failsafes("none") == () == parse_failsafes("")
    with pytest.raises(ValueError, match="not of the form"):
        parse_failsafes("tcp:1:2:3")


# -- layer order --------------------------------------------------------------------------------

UNTRACKED_DENY = gnp(
    "u-deny", "role == 'host'", "ingress", [deny(8080)], doNotTrack=True, applyOnForward=True
)
UNTRACKED_ALLOW = gnp(
    "u-allow", "role == 'host'", "ingress", [allow(8080)], doNotTrack=True, applyOnForward=True
)
PREDNAT_DENY = gnp(
    "p-deny", "role == 'host'", "ingress", [deny(8080)], preDNAT=True, applyOnForward=True
)
PREDNAT_ALLOW = gnp(
    "p-allow", "role == 'host'", "ingress", [allow(8080)], preDNAT=True, applyOnForward=True
)
NORMAL_ALLOW = gnp("n-allow", "role == 'host'", "ingress", [allow(8080)])
NORMAL_DENY = gnp("n-deny", "role == 'host'", "ingress", [deny(8080)])
HEP = hep("h1", "eth0", [HOST_IP], {"role": "host"})


def test_untracked_before_pre_dnat_before_normal() -> None:
    report = explain(dataset(HEP, UNTRACKED_DENY, PREDNAT_ALLOW, NORMAL_ALLOW), EXT_IP, HOST_IP)
    assert steps(report["ingress"]) == [("rule", "untracked", "GlobalNetworkPolicy u-deny", "Deny")]
    report = explain(dataset(HEP, UNTRACKED_ALLOW, PREDNAT_DENY, NORMAL_DENY), EXT_IP, HOST_IP)
    assert steps(report["ingress"]) == [
        ("rule", "untracked", "GlobalNetworkPolicy u-allow", "Allow")
    ]
    report = explain(dataset(HEP, PREDNAT_DENY, NORMAL_ALLOW), EXT_IP, HOST_IP)
    assert steps(report["ingress"]) == [("rule", "preDNAT", "GlobalNetworkPolicy p-deny", "Deny")]
    report = explain(dataset(HEP, PREDNAT_ALLOW, NORMAL_DENY), EXT_IP, HOST_IP)
    assert report["result"] == {"verdict": "Allow"}


def test_undecided_layers_fall_through_to_normal_policy() -> None:
    """No end-of-tier deny and no default deny in the untracked and pre-DNAT layers."""
    data = dataset(HEP, UNTRACKED_DENY, PREDNAT_DENY, NORMAL_ALLOW)
    report = explain(data, EXT_IP, HOST_IP, dport=8081)  # neither layer's rule matches
    assert steps(report["ingress"]) == [
        ("no-match", "untracked", "GlobalNetworkPolicy u-deny", None),
        ("layer-end", "untracked", None, None),
        ("no-match", "preDNAT", "GlobalNetworkPolicy p-deny", None),
        ("layer-end", "preDNAT", None, None),
        ("no-match", None, "GlobalNetworkPolicy n-allow", None),
        ("end-of-tier", None, None, "Deny"),
    ]


def test_failsafe_before_every_layer() -> None:
    data = dataset(
        HEP,
        gnp(
            "u-deny-all",
            "role == 'host'",
            "ingress",
            [{"action": "Deny"}],
            doNotTrack=True,
            applyOnForward=True,
        ),
    )
    report = explain(data, EXT_IP, HOST_IP, dport=22)
    assert steps(report["ingress"]) == [("failsafe", None, None, "Allow")]


def test_untracked_layer_skipped_for_replies_of_outbound_failsafes() -> None:
    """Raw failsafe-in also accepts udp from port 53 (a reply to the outbound DNS failsafe):
    the untracked deny is skipped, normal policy still decides."""
    data = dataset(
        HEP,
        gnp(
            "u-deny-all",
            "role == 'host'",
            "ingress",
            [{"action": "Deny"}],
            doNotTrack=True,
            applyOnForward=True,
        ),
        gnp("n-allow-udp", "role == 'host'", "ingress", [allow(40000, "UDP")]),
    )
    report = explain(data, EXT_IP, HOST_IP, UDP, dport=40000, sport=53)
    assert steps(report["ingress"])[0] == ("failsafe-reply", "untracked", None, None)
    assert report["result"] == {"verdict": "Allow"}
    report = explain(data, EXT_IP, HOST_IP, UDP, dport=40000, sport=54)
    assert steps(report["ingress"]) == [
        ("rule", "untracked", "GlobalNetworkPolicy u-deny-all", "Deny")
    ]


def test_pre_dnat_is_ingress_only_and_untracked_both_ways() -> None:
    egress_pre = gnp(
        "p-eg", "role == 'host'", "egress", [{"action": "Deny"}], preDNAT=True, applyOnForward=True
    )
    egress_untracked = gnp(
        "u-eg", "role == 'host'", "egress", [deny(8080)], doNotTrack=True, applyOnForward=True
    )
    allow_out = gnp("n-out", "role == 'host'", "egress", [{"action": "Allow"}])
    report = explain(dataset(HEP, allow_out), HOST_IP, EXT_IP)
    assert report["result"] == {"verdict": "Allow"}
    report = explain(dataset(HEP, egress_untracked, allow_out), HOST_IP, EXT_IP)
    assert steps(report["egress"]) == [("rule", "untracked", "GlobalNetworkPolicy u-eg", "Deny")]
    # A pre-DNAT policy never polices egress (mangle PREROUTING sees arriving packets only).
    report = explain(dataset(HEP, egress_pre, allow_out), HOST_IP, EXT_IP)
    assert steps(report["egress"]) == [("rule", None, "GlobalNetworkPolicy n-out", "Allow")]


# -- which endpoint ------------------------------------------------------------------------------

WILD = hep("auto-node1", "*", [HOST_IP, "192.168.1.1"], {"role": "wild"})
NAMED = hep("node1-eth0", "eth0", [HOST_IP], {"role": "named"})
WILD_DENY_UNTRACKED = gnp(
    "w-u", "role == 'wild'", "ingress", [{"action": "Deny"}], doNotTrack=True, applyOnForward=True
)
WILD_ALLOW = gnp("w-allow", "role == 'wild'", "ingress", [{"action": "Allow"}])


def test_named_endpoint_wins_over_all_interfaces() -> None:
    data = dataset(WILD, NAMED, WILD_ALLOW)
    report = explain(data, EXT_IP, HOST_IP)
    assert report["ingress"]["endpoint"] == "hostendpoint node1-eth0"
    assert report["result"]["verdict"] == "Deny"  # the named one has no policy
    report = explain(data, EXT_IP, "192.168.1.1")  # an address only the * endpoint lists
    assert report["ingress"]["endpoint"] == "hostendpoint auto-node1"
    assert report["result"] == {"verdict": "Allow"}


def test_expected_ip_endpoint_wins_over_all_interfaces_and_lowest_id_first() -> None:
    by_ip = hep("a-by-ip", "", [HOST_IP], {"role": "byip"})
    by_ip2 = hep("b-by-ip", "", [HOST_IP], {"role": "byip2"})
    data = dataset(WILD, by_ip2, by_ip)
    assert explain(data, EXT_IP, HOST_IP)["ingress"]["endpoint"] == "hostendpoint a-by-ip"
    # Endpoints of two nodes claiming one address stay ambiguous (no single Felix decides).
    other = hep("n2", "eth0", [HOST_IP], {"role": "x"}, node="node2")
    data = dataset(WILD, other)
    found = data.endpoints_at(ipaddress.ip_address(HOST_IP))
    assert len(enforcing_endpoint(found, ipaddress.ip_address(HOST_IP))) == 2


def test_endpoint_holding_named_claims_its_expected_ips_first() -> None:
    class H:
        def __init__(self, name: str, ips: tuple[str, ...]) -> None:
            self.name, self.expected_ipv4_addrs, self.expected_ipv6_addrs = name, ips, ()

    named, wild, byip = H("eth0", ("10.0.0.1",)), H("*", ("10.0.0.1",)), H("", ("10.0.0.1",))
    assert endpoint_holding({"b": named, "a": wild}, "10.0.0.1") is named
    assert endpoint_holding({"b": named, "a": byip}, "10.0.0.1") is byip  # lower ID, same iface
    assert endpoint_holding({"a": wild}, "10.0.0.1/24") is wild
    assert endpoint_holding({"a": named}, "10.0.0.2") is None


def test_all_interfaces_endpoint_has_no_untracked_layer() -> None:
    data = dataset(WILD, WILD_DENY_UNTRACKED, WILD_ALLOW)
    report = explain(data, EXT_IP, "192.168.1.1")
    assert steps(report["ingress"]) == [("rule", None, "GlobalNetworkPolicy w-allow", "Allow")]


# -- the host and its own workloads --------------------------------------------------------------


def test_host_to_own_workload_not_policed() -> None:
    deny_wl = {
        "kind": "NetworkPolicy",
        "metadata": {"name": "d", "namespace": "ns1"},
        "spec": {"selector": "all()", "types": ["Ingress"], "ingress": [{"action": "Deny"}]},
    }
    data = dataset(HEP, wep("w", WL_IP), deny_wl)
    report = explain(data, HOST_IP, WL_IP)
    assert report["result"] == {"verdict": "Allow"}
    assert [s["step"] for s in report["egress"]["chain"]] == ["host-to-workload"]
    data = dataset(
        hep("h2", "eth0", ["192.168.0.2"], {"role": "host"}, node="node2"), wep("w", WL_IP), deny_wl
    )
    report = explain(data, "192.168.0.2", WL_IP)  # another node's host: policed both sides
    assert report["result"]["deniedAt"] == "egress"  # its HEP has no egress policy


@pytest.mark.parametrize(
    ("action", "verdict"),
    [(None, "Deny"), ("Drop", "Deny"), ("Accept", "Allow"), ("Return", "Allow")],
)
def test_workload_to_own_host_endpoint_to_host_action(action: str | None, verdict: str) -> None:
    data = dataset(HEP, wep("w", WL_IP), NORMAL_ALLOW)  # the HEP's ingress policy is not used
    cfg = configs(default={"defaultEndpointToHostAction": action} if action else {})
    report = explain(data, WL_IP, HOST_IP, cfg=cfg)
    assert report["egress"]["verdict"] == "Allow"  # the workload's egress (profile) first
    assert [(s["step"], s["action"]) for s in report["ingress"]["chain"]] == [
        ("workload-to-host", verdict)
    ]
    assert report["result"]["verdict"] == verdict


def test_staged_view_covers_host_layers() -> None:
    staged = {
        "kind": "StagedGlobalNetworkPolicy",
        "metadata": {"name": "u-deny"},
        "spec": {
            "selector": "role == 'host'",
            "types": ["Ingress"],
            "doNotTrack": True,
            "applyOnForward": True,
            "ingress": [{"action": "Allow"}],
        },
    }
    report = explain(dataset(HEP, UNTRACKED_DENY, staged), EXT_IP, HOST_IP)
    assert report["result"]["verdict"] == "Deny"
    assert report["staged"]["result"] == {"verdict": "Allow"}
    assert steps(report["staged"]["ingress"]) == [
        ("rule", "untracked", "StagedGlobalNetworkPolicy u-deny", "Allow")
    ]


_NETS = st.one_of(
    st.none(),
    st.builds(
        lambda a, n: ipaddress.ip_network(f"{ipaddress.IPv4Address(a)}/{n}", strict=False),
        st.integers(0, 2**32 - 1),
        st.integers(0, 32),
    ),
    st.builds(
        lambda a, n: ipaddress.ip_network(f"{ipaddress.IPv6Address(a)}/{n}", strict=False),
        st.integers(0, 2**128 - 1),
        st.integers(0, 128),
    ),
)
_FAILSAFES = st.lists(
    st.builds(Failsafe, st.sampled_from(["tcp", "udp"]), st.integers(0, 65535), _NETS),
    max_size=6,
)


@given(_FAILSAFES)
def test_failsafe_text_round_trips(entries: list[Failsafe]) -> None:
    """Felix's v1 text (what the config processor writes, and str() renders) parses back."""
    text = ",".join(str(f) for f in entries) or "none"
    assert parse_failsafes(text) == tuple(entries)


@given(_FAILSAFES, st.integers(0, 65535), st.sampled_from([TCP, UDP]))
def test_failsafe_match_is_protocol_port_and_net(
    entries: list[Failsafe], port: int, proto: int
) -> None:
    peer = ipaddress.ip_address("10.1.2.3")
    pkt = Packet(proto, peer, ipaddress.ip_address(HOST_IP), 40000, port)
    hit = failsafe_match(entries, pkt, True, "dport")
    wanted = [
        f
        for f in entries
        if f.port == port
        and (TCP if f.protocol == "tcp" else UDP) == proto
        and (f.net is None or (f.net.version == 4 and peer in f.net))
    ]
    assert hit == (wanted[0] if wanted else None)
