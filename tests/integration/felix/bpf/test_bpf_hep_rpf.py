"""BPFEnforceRPF with real packets: a host namespace with two data interfaces, ``eth0``
(10.69.0.0/24) and ``eth1`` (10.69.1.0/24), and no default route. A neighbour behind eth1
sends UDP from its own address (legit), from an eth0-subnet address (spoofed: the route back
leaves through eth0) and from an address the host has no route to. Strict drops the last
two, Loose only the unroutable one, Disabled none; each drop is counted (``dropped_rpf``),
each pass reaches the host's socket (the kernel's own rp_filter is off)."""

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
from calico.felix.bpf.mode import RPF_MODES
from calico.felix.config import PARAMS

pytestmark = pytest.mark.root

UDP_SINK = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[2])))
print("ready", flush=True)
with open(sys.argv[1], "a") as out:
    while True:
        data, (src, _) = s.recvfrom(100)
        out.write(f"{src} {data.decode()}\\n"); out.flush()
"""

SEND = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
s.sendto(sys.argv[4].encode(), (sys.argv[2], int(sys.argv[3])))
print("ok")
"""

HOST0, HOST1, EXT_A, EXT_B = "10.69.0.1", "10.69.1.1", "10.69.0.2", "10.69.1.2"
SPOOFED, UNROUTABLE = "10.69.0.9", "198.51.100.7"
PORT = 5353


def link_index(netns: str, name: str) -> int:
    return int(json.loads(ns.ip("-j", "link", "show", name, ns=netns))[0]["ifindex"])


@dataclass
class Topo:
    host: str
    ext_b: str
    mgr: BPFEndpointManager
    sink: Path
    mode: str


@pytest.fixture(scope="module", params=["Strict", "Loose", "Disabled"])
def topo(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Topo]:
    need_bpf()
    tmp = tmp_path_factory.mktemp("bpfrpf")
    with contextlib.ExitStack() as stack:
        host = stack.enter_context(ns.netns("calrpfh"))
        ext_a = stack.enter_context(ns.netns("calrpfa"))
        ext_b = stack.enter_context(ns.netns("calrpfb"))
        for key in ("all", "default"):
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0")
        ns.in_ns(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")  # a FIB lookup needs it
        for i, (hip, peer, ext) in enumerate(((HOST0, EXT_A, ext_a), (HOST1, EXT_B, ext_b))):
            ns.add_veth(f"eth{i}", "eth0", ns=host, peer_ns=ext)
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.eth{i}.rp_filter=0")
            ns.in_ns(host, "ip", "addr", "add", f"{hip}/24", "dev", f"eth{i}")
            ns.in_ns(host, "ip", "link", "set", f"eth{i}", "up")
            ns.in_ns(ext, "ip", "addr", "add", f"{peer}/24", "dev", "eth0")
            ns.in_ns(ext, "ip", "link", "set", "eth0", "up")
        for extra in (SPOOFED, UNROUTABLE):
            ns.in_ns(ext_b, "ip", "addr", "add", f"{extra}/32", "dev", "eth0")
        sink = tmp / "received"
        sink.touch()
        stack.enter_context(ns.py_server(host, UDP_SINK, str(sink), str(PORT)))
        defines = {"CALI_RPF": RPF_MODES[request.param]}
        dp = stack.enter_context(dataplane(str(tmp), host, defines=defines))
        pattern = PARAMS["BPFDataIfacePattern"].default
        assert isinstance(pattern, re.Pattern)
        mgr = BPFEndpointManager(dp, ("cali",), data_ifaces=pattern)
        for name in ("eth0", "eth1"):
            mgr.on_iface_state(name, "up", link_index(host, name))
        mgr.complete_deferred_work()
        assert mgr.apply() == []
        yield Topo(host, ext_b, mgr, sink, request.param)


def rpf_drops(topo: Topo) -> int:
    idx = topo.mgr.dp.ifindex("eth1")
    assert idx is not None
    ctrs = topo.mgr.dp.maps.read_counters(idx)
    assert ctrs is not None
    return ctrs["ingress"]["dropped_rpf"]


def send(topo: Topo, src: str, tag: str) -> None:
    assert ns.probe(topo.ext_b, SEND, src, HOST1, PORT, tag) == "ok"


def received(topo: Topo) -> set[str]:
    return set(topo.sink.read_text().splitlines())


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def verdict(topo: Topo, src: str, n: int) -> str:
    """Send from ``src``, then a legit marker behind it: "pass" or "drop" (counted)."""
    drops = rpf_drops(topo)
    send(topo, src, f"probe{n}")
    send(topo, EXT_B, f"marker{n}")
    wait_for(lambda: f"{EXT_B} marker{n}" in received(topo), f"marker {n}")
    passed = f"{src} probe{n}" in received(topo)
    dropped = rpf_drops(topo) - drops
    assert dropped == (0 if passed else 1), (src, passed, dropped)  # each drop counted once
    return "pass" if passed else "drop"


EXPECTED = {
    "Strict": {EXT_B: "pass", SPOOFED: "drop", UNROUTABLE: "drop"},
    "Loose": {EXT_B: "pass", SPOOFED: "pass", UNROUTABLE: "drop"},
    "Disabled": {EXT_B: "pass", SPOOFED: "pass", UNROUTABLE: "pass"},
}


def test_rpf_verdicts_per_source(topo: Topo) -> None:
    got = {src: verdict(topo, src, n) for n, src in enumerate((EXT_B, SPOOFED, UNROUTABLE))}
    assert got == EXPECTED[topo.mode]
    # No host endpoint: nothing is tracked, so a second spoofed datagram is a new flow again
    # and gets the same verdict (established flows: test_bpf_hep_ct_rpf.py).
    assert verdict(topo, SPOOFED, 9) == EXPECTED[topo.mode][SPOOFED]
