"""A workload whose route and sysctls are in but whose endpoint chains and dispatch entries
are not gets no traffic through: the property that lets the dataplane loop write a new
workload's routes while its nftables transaction commits (design/felix-dataplane.md, "The
dataplane loop"; upstream keeps it the same way).

The shared topology already gives w3 (calit3) its host route, proxy ARP and a permanent
neighbour entry, as Felix's host side would; the table knows only w1 and w2 (the window in
which the route table has finished and the transaction adding w3 has not). Real connects in
every direction a workload's policy governs, then the same with w3's entry committed, so a
broken rig cannot pass.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rules_netns import (
    Topology,
    icmp_probe,
    in_ns,
    program,
    ruleset_commands,
    servers,
    tcp_connect,
)

from calico.felix.messages import Profile, Rule, WorkloadEndpoint
from calico.felix.rules import RenderConfig, RuleRenderer

pytestmark = pytest.mark.root

HOST_IP = "10.65.0.254"  # the host's own address, reachable from the workloads' /24 route
HOST_PORT = "7070"
W3_PORT = "8080"
ALLOW_ALL = Profile(inbound_rules=(Rule("allow"),), outbound_rules=(Rule("allow"),))


@pytest.fixture(scope="module")
def rig(topology: Topology) -> Iterator[Topology]:
    in_ns(topology.host, "ip", "addr", "add", f"{HOST_IP}/32", "dev", "lo")
    with servers(topology.host, HOST_PORT), servers(topology.workloads[2], W3_PORT):
        yield topology


def _program(topo: Topology, known: int) -> None:
    """The full ruleset with endpoint chains and dispatch entries for the first ``known``
    workloads only; workloads may reach the host (so only the dispatch can stop w3)."""
    r = RuleRenderer(RenderConfig(ipv6_enabled=False, endpoint_to_host_action="accept"))
    chains = r.static_chains() + r.profile_chains("allow-all", ALLOW_ALL)
    ep = WorkloadEndpoint("active", "", profile_ids=("allow-all",))
    eps = {iface: ep for iface in topo.ifaces[:known]}
    for iface, endpoint in eps.items():
        chains += r.workload_endpoint_chains(iface, endpoint)
    program(topo.host, ruleset_commands(chains, r.static_sets(), r.dispatch_maps(eps)))


def test_routed_workload_without_dispatch_entry_gets_no_traffic(rig: Topology) -> None:
    w1, _w2, w3 = rig.workloads
    ip2, ip3 = rig.ips[1], rig.ips[2]
    route = in_ns(rig.host, "ip", "route", "show", f"{ip3}/32").stdout
    assert "calit3" in route  # w3 is routed: only the ruleset stands between it and traffic

    _program(rig, known=2)
    assert tcp_connect(w1, ip2, 8080) == "ok"  # the known workloads talk
    assert tcp_connect(w1, HOST_IP, int(HOST_PORT)) == "ok"  # and reach the host
    assert tcp_connect(w3, ip2, 8080) == "timeout"  # from the unknown one (forward)
    assert icmp_probe(w3, ip2, 8) == "timeout"
    assert tcp_connect(w1, ip3, int(W3_PORT)) == "timeout"  # to it (forward)
    assert icmp_probe(w1, ip3, 8) == "timeout"
    assert tcp_connect(w3, HOST_IP, int(HOST_PORT)) == "timeout"  # from it to the host

    _program(rig, known=3)  # its entry commits: everything flows
    assert tcp_connect(w3, ip2, 8080) == "ok"
    assert tcp_connect(w1, ip3, int(W3_PORT)) == "ok"
    assert tcp_connect(w3, HOST_IP, int(HOST_PORT)) == "ok"
    assert icmp_probe(w1, ip3, 8) == "ok"
