"""Host endpoints in BPF mode, userspace side: which endpoints and interfaces BPF takes, the
nftables shim's rewrite of those endpoints, failsafe key encoding, the HEP program's
sections, and the attach-type choice."""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.felix.bpf import failsafes, tcx
from calico.felix.bpf.maps import FSAFE6_KEY, FSAFE_KEY, FSAFE_OUT, fsafe_key
from calico.felix.bpf.mode import (
    ALLOW_PROFILE,
    NftablesWorkloadsAllow,
    allow_only_hep,
    resolve_attach_type,
)
from calico.felix.bpf.polprog import EndpointPolicy, Generator
from calico.felix.config import PARAMS
from calico.felix.config.netparsers import PortListParser, ProtoPort
from calico.felix.hostendpoints import normalise_addr, resolve_host_endpoints
from calico.felix.messages import (
    HostEndpoint,
    HostEndpointID,
    HostEndpointUpdate,
    Policy,
    PolicyID,
    Rule,
    TierInfo,
)

PATTERN = PARAMS["BPFDataIfacePattern"].default


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("eth0", True),
        ("ens3", True),
        ("enp0s31f6", True),
        ("bond0", True),
        ("wlan0", True),
        ("ib0", False),  # (en|wl|ww|sl|ib) needs one of [Popsx] next
        ("ibp1", True),
        ("enc0", False),
        ("lo", False),
        ("cali1234", False),
        ("uplink0", False),
        ("vxlan.calico", False),
        ("xeth0", False),  # anchored
    ],
)
def test_default_data_iface_pattern(name: str, data: bool) -> None:
    assert isinstance(PATTERN, re.Pattern)
    assert (PATTERN.search(name) is not None) is data


def _resolve(heps: dict[HostEndpointID, HostEndpoint], addrs: dict[str, set[str]]) -> Any:
    out = resolve_host_endpoints(heps, addrs, lambda n: n.startswith("cali"))
    return {iface: hep.profile_ids[0] for iface, hep in out.items()}


def test_resolution_by_name_or_expected_ip_first_id_wins() -> None:
    heps = {
        HostEndpointID("b"): HostEndpoint(
            "", profile_ids=("b",), expected_ipv4_addrs=("10.0.0.1",)
        ),
        HostEndpointID("a"): HostEndpoint("eth1", profile_ids=("a",)),
        HostEndpointID("c"): HostEndpoint("", profile_ids=("c",), expected_ipv6_addrs=("fd00::1",)),
        HostEndpointID("d"): HostEndpoint("*", profile_ids=("d",)),
    }
    addrs = {
        "eth0": {normalise_addr("10.0.0.1/24")},
        "eth1": {"10.0.0.1"},  # named by "a" (lower ID), so "b" takes only eth0
        "cali1": {"10.0.0.1"},  # workload interfaces never host endpoints
        "eth2": {normalise_addr("fd00:0::1/64")},
        "eth3": {"10.0.0.9"},
    }
    assert _resolve(heps, addrs) == {"eth0": "b", "eth1": "a", "eth2": "c"}
    assert _resolve(heps, {}) == {"eth1": "a"}  # no addresses: only the named one
    # An expected-IP endpoint with the lowest ID claims an interface before a named one.
    heps[HostEndpointID("0")] = HostEndpoint(
        "", profile_ids=("z",), expected_ipv4_addrs=("10.0.0.9",)
    )
    heps[HostEndpointID("e")] = HostEndpoint("eth3", profile_ids=("e",))
    assert _resolve(heps, addrs)["eth3"] == "z"


class _Recorder:
    def __init__(self) -> None:
        self.msgs: list[Any] = []

    def on_update(self, msg: Any) -> None:
        self.msgs.append(msg)

    def complete_deferred_work(self) -> None:
        pass


def test_shim_rewrites_workloads_only_and_allow_only_hep_keeps_untracked() -> None:
    endpoints, policies = _Recorder(), _Recorder()
    shim = NftablesWorkloadsAllow(endpoints, policies)
    t = (TierInfo("default", ingress_policies=(PolicyID("p", tier="default"),)),)
    full = HostEndpoint("eth0", profile_ids=("x",), tiers=t, untracked_tiers=t,
                        pre_dnat_tiers=t, forward_tiers=t)  # fmt: skip
    shim.on_update(HostEndpointUpdate(HostEndpointID("a"), full))
    assert endpoints.msgs[0].endpoint == full  # per interface: the manager's hep_view decides
    assert policies.msgs[0].id.name == ALLOW_PROFILE
    got = allow_only_hep(full)
    assert got.tiers == () and got.pre_dnat_tiers == () and got.forward_tiers == ()
    assert got.profile_ids == (ALLOW_PROFILE,)
    assert got.untracked_tiers == t  # raw chains keep NOTRACKing untracked flows


def test_failsafe_key_layout() -> None:
    key = fsafe_key("tcp", 22, "10.1.0.0/16", outbound=False)
    assert key == struct.pack("<IHBB4s", 32 + 16, 22, 6, 0, bytes([10, 1, 0, 0]))
    key6 = fsafe_key("udp", 53, "fd00::/8", outbound=True)
    assert len(key6) == FSAFE6_KEY.size == 24
    assert FSAFE6_KEY.unpack(key6)[:4] == (32 + 8, 53, 17, FSAFE_OUT)
    assert FSAFE_KEY.size == 12


def test_failsafe_keys_without_net_cover_both_families() -> None:
    keys = failsafes.failsafe_keys(PortListParser().parse("tcp:22,udp:[fd00::/64]:68"), ())
    assert {(len(k), FSAFE_KEY.unpack(k)[1] if len(k) == 12 else 0) for k in keys} == {
        (12, 22),
        (24, 0),
    }
    assert len(keys) == 3  # tcp:22 v4 + v6, udp:68 v6 only


@given(
    st.sampled_from(["tcp", "udp"]),
    st.integers(0, 65535),
    st.ip_addresses(v=4),
    st.integers(0, 32),
    st.booleans(),
)
def test_failsafe_key_roundtrip(proto: str, port: int, addr: Any, plen: int, out: bool) -> None:
    net = f"{addr}/{plen}"
    prefixlen, p, pr, flags, raw = FSAFE_KEY.unpack(fsafe_key(proto, port, net, out))
    assert (prefixlen, p, pr, flags) == (32 + plen, port, 6 if proto == "tcp" else 17, int(out))
    import ipaddress

    assert raw == ipaddress.ip_network(net, strict=False).network_address.packed


def test_failsafe_keys_reject_unknown_protocol() -> None:
    with pytest.raises(KeyError):
        failsafes.failsafe_keys((ProtoPort("icmp", 1, ""),), ())


def test_host_program_sections() -> None:
    """Untracked first (its own allow exit), pre-DNAT on ingress only, then the host split;
    forwarded traffic allowed when no applyOnForward policy exists, else denied at the end."""
    pid = PolicyID("p", tier="t")
    pols = {
        pid: Policy(inbound_rules=(Rule(action="allow"),), outbound_rules=(Rule(action="allow"),))
    }
    t = (TierInfo("t", ingress_policies=(pid,), egress_policies=(pid,)),)
    gen = Generator(pols, {}, lambda _: 1)

    def src(inbound: bool, **kw: Any) -> str:
        return gen.source(EndpointPolicy((), (), inbound, host=True, **kw))

    plain = src(True)
    assert "goto v4_forward;" in plain and "goto v4_allow; /* no forward policy */" in plain
    nt = src(True, untracked_tiers=t)
    assert "goto v4_allow_nt;" in nt and nt.index("allow_nt;") < nt.index("if (!st->host_flags)")
    assert "pre-DNAT" in src(True, pre_dnat_tiers=t)
    assert "pre-DNAT" not in src(False, pre_dnat_tiers=t)
    fwd = src(True, forward_tiers=t)
    assert "goto v4_deny; /* no forward policy allowed */" in fwd
    wep = gen.source(EndpointPolicy((), (), True))
    assert "host_flags" not in wep and "allow_nt" not in wep


def test_wildcard_sections_on_workload_programs() -> None:
    """The ``*`` endpoint's tiers on a workload program, in the host endpoint's direction:
    pre-DNAT only on the pod's egress hook (from-WEP), forward tiers of the matching direction
    with the host-bound skip on from-WEP only, all ahead of the workload's own walk; nothing
    without a policy for the direction."""
    ing, egr = PolicyID("in", tier="t"), PolicyID("out", tier="t")
    allow = (Rule(action="allow"),)
    pols = {ing: Policy(inbound_rules=allow), egr: Policy(outbound_rules=allow)}
    only_in = (TierInfo("t", ingress_policies=(ing,)),)
    only_out = (TierInfo("t", egress_policies=(egr,)),)
    gen = Generator(pols, {}, lambda _: 1)

    def src(pod_inbound: bool, **kw: Any) -> str:
        return gen.source(EndpointPolicy((), ("prof",), pod_inbound, **kw))

    plain = src(False)
    assert "all-interfaces" not in plain and "cali_to_host" not in plain
    from_wep = src(False, wild_pre_dnat_tiers=only_in, wild_forward_tiers=only_in)
    assert from_wep.index("pre-DNAT") < from_wep.index("cali_to_host(st)")
    assert from_wep.index("cali_to_host(st)") < from_wep.index("applyOnForward")
    assert from_wep.index("applyOnForward") < from_wep.index("v4_wep:") < from_wep.index("prof")
    assert "policy t//in" in from_wep and "goto v4_wep;" in from_wep
    to_wep = src(True, wild_pre_dnat_tiers=only_in, wild_forward_tiers=only_out)
    assert "pre-DNAT" not in to_wep and "cali_to_host" not in to_wep
    assert "policy t//out" in to_wep and "no forward policy allowed" in to_wep
    # forward tiers with no policy for the hook's direction: no forward section at all
    assert "applyOnForward" not in src(True, wild_forward_tiers=only_in)
    assert "applyOnForward" not in src(False, wild_forward_tiers=only_out)


def test_attach_type_choice() -> None:
    assert resolve_attach_type("TC", True) == "tc"
    assert resolve_attach_type("TCX", False) == "tc"
    want = "tcx" if tcx.supported() else "tc"
    assert resolve_attach_type("Netkit", True) == want
    assert resolve_attach_type("TCX", True) == want


def test_tcx_pin_name_drops_dots() -> None:
    assert tcx.pin_path("/x", "vxlan.calico", "ingress") == "/x/vxlancalico_ingress"
