"""BPFEnforceRPF on established flows: a conntrack hit at from-HEP arriving on another data
interface than the flow's source side was recorded on is reverse-path checked again.

A host with ``eth0`` (10.73.0.0/24, neighbour A) and ``eth1`` (10.73.1.0/24, neighbour B), an
all-interfaces host endpoint allowing everything (so from-HEP approves the source's leg and
the flow is established), and a source S = 10.73.7.7 that both neighbours hold. The host's
route to S starts on eth0. One UDP flow S:4000 -> 10.73.0.1 is opened by A, then continued by
B (eth1), then by B once S's route moved to eth1, then by A once the route is gone:

* Strict: pass, drop (route says eth0), pass (route agrees; the entry now records eth1),
  drop (no route);
* Loose: pass, pass (some route), pass, drop (no route at all);
* Disabled: always pass.

Each drop is counted once as ``dropped_rpf``; the kernel's own rp_filter is off.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import netns_support as ns
import pytest
from bpf_support import dataplane, need_bpf

from calico.felix.bpf.endpoints import BPFEndpointManager
from calico.felix.bpf.maps import ct_key, decode_ct
from calico.felix.bpf.mode import RPF_MODES
from calico.felix.config import PARAMS
from calico.felix.messages import (
    ActiveProfileUpdate,
    HostEndpoint,
    HostEndpointID,
    HostEndpointUpdate,
    Profile,
    ProfileID,
    Rule,
)

pytestmark = pytest.mark.root

UDP_SINK = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[2])))
print("ready", flush=True)
with open(sys.argv[1], "a") as out:
    while True:
        data, (src, sport) = s.recvfrom(100)
        out.write(f"{src} {sport} {data.decode()}\\n"); out.flush()
"""

SEND = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.sendto(sys.argv[5].encode(), (sys.argv[3], int(sys.argv[4])))
print("ok")
"""

HOST = ("10.73.0.1", "10.73.1.1")
PEER = ("10.73.0.2", "10.73.1.2")
S, SPORT, PORT = "10.73.7.7", 4000, 5301

EXPECTED = {
    "Strict": ["pass", "drop", "pass", "drop"],
    "Loose": ["pass", "pass", "pass", "drop"],
    "Disabled": ["pass", "pass", "pass", "pass"],
}


@dataclass
class Topo:
    host: str
    ext: tuple[str, str]
    mgr: BPFEndpointManager
    sink: Path
    mode: str
    sent: int = 0


def link(netns: str, name: str) -> dict[str, object]:
    return json.loads(ns.ip("-j", "link", "show", name, ns=netns))[0]


@pytest.fixture(scope="module", params=["Strict", "Loose", "Disabled"])
def topo(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Topo]:
    need_bpf()
    tmp = tmp_path_factory.mktemp("bpfctrpf")
    with contextlib.ExitStack() as stack:
        host = stack.enter_context(ns.netns("calctrh"))
        ext = (stack.enter_context(ns.netns("calctra")), stack.enter_context(ns.netns("calctrb")))
        for key in ("all", "default"):
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0")
        ns.in_ns(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")  # a FIB lookup needs it
        for i in (0, 1):
            ns.add_veth(f"eth{i}", "eth0", ns=host, peer_ns=ext[i])
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.eth{i}.rp_filter=0")
            ns.in_ns(host, "ip", "addr", "add", f"{HOST[i]}/24", "dev", f"eth{i}")
            ns.in_ns(host, "ip", "link", "set", f"eth{i}", "up")
            ns.in_ns(ext[i], "ip", "addr", "add", f"{PEER[i]}/24", "dev", "eth0")
            ns.in_ns(ext[i], "ip", "addr", "add", f"{S}/32", "dev", "eth0")
            ns.in_ns(ext[i], "ip", "link", "set", "eth0", "up")
            mac = str(link(host, f"eth{i}")["address"])
            ns.in_ns(ext[i], "ip", "route", "replace", f"{HOST[0]}/32", "dev", "eth0")
            ns.in_ns(ext[i], "ip", "neigh", "replace", HOST[0], "lladdr", mac, "dev", "eth0",
                     "nud", "permanent")  # fmt: skip
            ns.in_ns(ext[i], "ip", "neigh", "replace", HOST[i], "lladdr", mac, "dev", "eth0",
                     "nud", "permanent")  # fmt: skip
        ns.in_ns(host, "ip", "route", "add", f"{S}/32", "dev", "eth0")
        sink = tmp / "received"
        sink.touch()
        stack.enter_context(ns.py_server(host, UDP_SINK, str(sink), str(PORT)))
        dp = stack.enter_context(
            dataplane(str(tmp), host, defines={"CALI_RPF": RPF_MODES[request.param]})
        )
        pattern = PARAMS["BPFDataIfacePattern"].default
        assert isinstance(pattern, re.Pattern)
        mgr = BPFEndpointManager(dp, ("cali",), data_ifaces=pattern)
        both = (Rule(action="allow"),)
        allow = Profile(inbound_rules=both, outbound_rules=both)
        mgr.on_update(ActiveProfileUpdate(ProfileID("allow"), allow))
        mgr.on_update(
            HostEndpointUpdate(HostEndpointID("all"), HostEndpoint("*", profile_ids=("allow",)))
        )
        for i in (0, 1):
            mgr.on_iface_state(f"eth{i}", "up", int(str(link(host, f"eth{i}")["ifindex"])))
            mgr.on_iface_addrs(f"eth{i}", {f"{HOST[i]}/24"})
        mgr.complete_deferred_work()
        assert mgr.apply() == []
        assert mgr.is_programmed("eth0") and mgr.is_programmed("eth1")
        yield Topo(host, ext, mgr, sink, request.param)


def rpf_drops(topo: Topo, i: int) -> int:
    idx = topo.mgr.dp.ifindex(f"eth{i}")
    assert idx is not None
    got = topo.mgr.dp.maps.read_counters(idx)
    assert got is not None
    return got["ingress"]["dropped_rpf"]


def received(topo: Topo) -> set[str]:
    return set(topo.sink.read_text().splitlines())


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def flow_verdict(topo: Topo, i: int) -> str:
    """Neighbour ``i`` sends the flow's next datagram, then a legit marker from its own
    address: "pass" (delivered, nothing counted) or "drop" (counted once, not delivered)."""
    topo.sent += 1
    tag, marker = f"flow{topo.sent}", f"marker{topo.sent}"
    before = rpf_drops(topo, i)
    assert ns.probe(topo.ext[i], SEND, S, SPORT, HOST[0], PORT, tag) == "ok"
    assert ns.probe(topo.ext[i], SEND, PEER[i], 0, HOST[i], PORT, marker) == "ok"
    probe_line = f"{S} {SPORT} {tag}"

    def settled() -> bool:
        rx = received(topo)
        marker_in = any(line.endswith(f" {marker}") for line in rx)
        return marker_in and (probe_line in rx or rpf_drops(topo, i) > before)

    wait_for(settled, f"{tag} via eth{i}")
    passed = probe_line in received(topo)
    dropped = rpf_drops(topo, i) - before
    assert dropped == (0 if passed else 1), (i, passed, dropped)
    return "pass" if passed else "drop"


def test_established_flow_on_another_interface_is_rechecked(topo: Topo) -> None:
    dp = topo.mgr.dp
    idx = [dp.ifindex("eth0"), dp.ifindex("eth1")]
    key = ct_key(17, S, HOST[0], SPORT, PORT)
    want = EXPECTED[topo.mode]
    try:
        assert flow_verdict(topo, 0) == want[0]  # A opens the flow on eth0
        raw = dp.maps.ct.lookup(key)
        assert raw is not None  # established: from-HEP's policy approved S's leg
        entry = decode_ct(key, raw)
        assert idx[0] in (entry.ifindex_a, entry.ifindex_b)
        assert flow_verdict(topo, 1) == want[1]  # B continues it on eth1; S's route: eth0
        ns.in_ns(topo.host, "ip", "route", "replace", f"{S}/32", "dev", "eth1")
        assert flow_verdict(topo, 1) == want[2]  # the route agrees now
        raw = dp.maps.ct.lookup(key)
        assert raw is not None
        entry = decode_ct(key, raw)
        assert idx[1] in (entry.ifindex_a, entry.ifindex_b)  # re-recorded on eth1
        ns.in_ns(topo.host, "ip", "route", "del", f"{S}/32")
        assert flow_verdict(topo, 0) == want[3]  # A again, with no route to S at all
    finally:
        ns.in_ns(topo.host, "ip", "route", "replace", f"{S}/32", "dev", "eth0")
