"""Counters, rule counters, policy listings and the ``calico bpf ...`` debug commands, with
real traffic between two workload namespaces (BPFPolicyDebugEnabled on, as upstream's default)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import netns_support as ns
import pytest
from bpf_support import need_bpf, private_bpffs

from calico.felix.bpf.dataplane import BPFDataplane, listing_path
from calico.felix.bpf.endpoints import BPFEndpointManager
from calico.felix.bpf.maps import RULE_ID
from calico.felix.bpf.polprog import rule_id
from calico.felix.messages import (
    ActivePolicyUpdate,
    ActiveProfileUpdate,
    IPSetType,
    IPSetUpdate,
    Policy,
    PolicyID,
    PortRange,
    Profile,
    ProfileID,
    Rule,
    TierInfo,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)

pytestmark = pytest.mark.root

CALICO = str(Path(sys.executable).parent / "calico")
UDP_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
while True:
    data, addr = s.recvfrom(64); s.sendto(b"hi", addr)
"""
UDP_PROBE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(float(sys.argv[3]))
s.sendto(b"x", (sys.argv[1], int(sys.argv[2])))
try:
    print("ok" if s.recv(2) == b"hi" else "bad")
except socket.timeout:
    print("timeout")
"""
PORTS = (7070, 7071)
ALLOW_OUT = Profile(outbound_rules=(Rule(action="allow"),))


@dataclass
class Topo:
    host: str
    wls: list[str]
    ips: list[str]
    ifaces: list[str]
    dp: BPFDataplane
    mgr: BPFEndpointManager
    pin_dir: str
    listing_dir: str


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topo]:
    need_bpf()
    base = str(tmp_path_factory.mktemp("bpfdebug"))
    with contextlib.ExitStack() as stack:
        host = stack.enter_context(ns.netns("calbdh"))
        wls = [stack.enter_context(ns.netns("calbdw")) for _ in range(2)]
        ips, ifaces = [], []
        for n in (host, *wls):  # no IPv6 chatter (RS, MLD) racing the counter reads
            ns.in_ns(n, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                     "net.ipv6.conf.default.disable_ipv6=1")  # fmt: skip
        for i, wl in enumerate(wls, start=1):
            iface, ip = f"calidbg{i}", f"10.67.0.{i}"
            ns.add_veth(iface, "eth0", ns=host, peer_ns=wl)
            ns.in_ns(wl, "ip", "link", "set", "eth0", "up")
            ns.in_ns(wl, "ip", "addr", "add", f"{ip}/32", "dev", "eth0")
            ns.in_ns(wl, "ip", "route", "add", "10.67.0.0/24", "dev", "eth0")
            ns.in_ns(host, "ip", "link", "set", iface, "up")
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{iface}.proxy_arp=1")
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.neigh.{iface}.proxy_delay=0")
            ns.in_ns(host, "ip", "route", "add", f"{ip}/32", "dev", iface)
            mac = ns.link_mac(wl, "eth0")
            ns.in_ns(host, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", iface,
                     "nud", "permanent")  # fmt: skip
            ips.append(ip)
            ifaces.append(iface)
        ns.in_ns(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for port in PORTS:
            stack.enter_context(ns.py_server(wls[1], UDP_SERVER, str(port)))
        mnt = stack.enter_context(private_bpffs(base))
        listing_dir = os.path.join(base, "listings")
        pin_dir = os.path.join(mnt, "globals")
        dp = BPFDataplane(pin_dir, os.path.join(base, "cache"), netns=host,
                          policy_debug_dir=listing_dir)  # fmt: skip
        try:
            mgr = BPFEndpointManager(dp, ("calidbg",), policy_debug=True)
            yield Topo(host, wls, ips, ifaces, dp, mgr, pin_dir, listing_dir)
        finally:
            for iface in dp.ifaces:
                with contextlib.suppress(Exception):
                    dp.remove_iface(iface)
            dp.close()


def udp(topo: Topo, port: int) -> str:
    return ns.probe(topo.wls[0], UDP_PROBE, topo.ips[1], port, 0.7)


def cli(topo: Topo, *args: str) -> subprocess.CompletedProcess[str]:
    """``calico bpf ...`` in the host netns (where the interfaces are)."""
    return ns.in_ns(topo.host, CALICO, "bpf", *args, check=False, timeout=60)


def cli_json(topo: Topo, *args: str) -> object:
    out = cli(topo, *args, "--pin-dir", topo.pin_dir, "-o", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def counters(topo: Topo, iface: int) -> dict[str, dict[str, int]]:
    found = topo.dp.maps.read_counters(topo.dp.ifindex(topo.ifaces[iface]))
    assert found is not None
    return found


PID = PolicyID("udp-7070", tier="default")
SERVER = WorkloadEndpointID("k8s", "ns/server", "eth0")
CLIENT = WorkloadEndpointID("k8s", "ns/client", "eth0")


def program(topo: Topo, rules: tuple[Rule, ...]) -> None:
    mgr = topo.mgr
    tiers = (TierInfo("default", ingress_policies=(PID,)),)
    for msg in (
        IPSetUpdate("s:clients", (f"{topo.ips[0]}/32",), IPSetType.NET),
        ActivePolicyUpdate(PID, Policy(inbound_rules=rules)),
        ActiveProfileUpdate(ProfileID("out"), ALLOW_OUT),
        WorkloadEndpointUpdate(
            SERVER,
            WorkloadEndpoint(
                "active",
                topo.ifaces[1],
                profile_ids=("out",),
                tiers=tiers,
                ipv4_nets=(f"{topo.ips[1]}/32",),
            ),
        ),
        WorkloadEndpointUpdate(
            CLIENT,
            WorkloadEndpoint(
                "active", topo.ifaces[0], profile_ids=("out",), ipv4_nets=(f"{topo.ips[0]}/32",)
            ),
        ),
    ):
        mgr.on_update(msg)
    for i, iface in enumerate(topo.ifaces):
        mgr.on_iface_state(iface, "up", i)
    mgr.complete_deferred_work()
    assert mgr.apply() == []


RULES = (
    Rule(action="deny", protocol="udp", dst_ports=(PortRange(7071, 7071),), rule_id="denyudp"),
    Rule(action="allow", protocol="udp", src_ip_set_ids=("s:clients",), rule_id="allowset"),
)


def test_counters_and_rule_hits_follow_traffic(topo: Topo) -> None:
    program(topo, RULES)
    srv, cl = topo.ifaces[1], topo.ifaces[0]
    before_srv, before_cl = counters(topo, 1), counters(topo, 0)
    # One allowed datagram: exactly one policy accept on the server's to-WEP hook, and its
    # reply exactly one conntrack hit on the server's from-WEP hook.
    assert udp(topo, 7070) == "ok"
    after = counters(topo, 1)
    assert after["egress"]["accepted_by_policy"] == before_srv["egress"]["accepted_by_policy"] + 1
    assert (
        after["ingress"]["accepted_by_conntrack"]
        == before_srv["ingress"]["accepted_by_conntrack"] + 1
    )
    # the client's egress: its profile allowed the request, conntrack the reply
    cl_after = counters(topo, 0)
    assert (
        cl_after["ingress"]["accepted_by_policy"] == before_cl["ingress"]["accepted_by_policy"] + 1
    )
    assert (
        cl_after["egress"]["accepted_by_conntrack"]
        == before_cl["egress"]["accepted_by_conntrack"] + 1
    )
    # One denied datagram: exactly one policy drop, nothing accepted.
    assert udp(topo, 7071) == "timeout"
    denied = counters(topo, 1)
    assert denied["egress"]["dropped_by_policy"] == after["egress"]["dropped_by_policy"] + 1
    assert denied["egress"]["accepted_by_policy"] == after["egress"]["accepted_by_policy"]
    assert denied["egress"]["total"] >= denied["egress"]["dropped_by_policy"]

    # The listing names the rules in program order; each rule's counter saw its one packet.
    with open(listing_path(topo.listing_dir, srv, "egress")) as f:
        listing = json.load(f)
    assert [(r["owner"], r["index"], r["action"]) for r in listing["rules"]] == [
        ("policy default//udp-7070", 0, "deny"),
        ("policy default//udp-7070", 1, "allow"),
    ]
    dump = cli_json(topo, "policy", "dump", srv, "egress", "--listing-dir", topo.listing_dir)
    assert [r["hits"] for r in dump["egress"]] == [1, 1]
    assert udp(topo, 7070) == "ok"  # a second flow: new conntrack entry, re-policed
    dump = cli_json(topo, "policy", "dump", srv, "all", "--listing-dir", topo.listing_dir)
    assert [r["hits"] for r in dump["egress"]] == [1, 2]
    # The server's egress profile rule is the client's too (one counter per rule, as
    # upstream): the client's three requests hit it; the server's replies were conntrack hits.
    assert [(r["owner"], r["hits"]) for r in dump["ingress"]] == [("profile out", 3)]

    # counters dump: the CLI sums the same per-CPU values
    got = cli_json(topo, "counters", "dump", "--iface", srv)
    quiet = [k for k in got[srv]["egress"] if k not in ("total", "dropped_unsupported")]
    mine = counters(topo, 1)
    assert {h: {k: got[srv][h][k] for k in quiet} for h in got[srv]} == {
        h: {k: mine[h][k] for k in quiet} for h in mine
    }
    assert set(cli_json(topo, "counters", "dump")) == {srv, cl}


def test_dump_commands_show_maps(topo: Topo) -> None:
    program(topo, RULES)
    assert udp(topo, 7070) == "ok"
    rows = cli_json(topo, "ifstate", "dump")
    assert {r["name"]: r["flags"] for r in rows} == {
        topo.ifaces[0]: ["workload", "ready"],
        topo.ifaces[1]: ["workload", "ready"],
    }
    sets = cli_json(topo, "ipsets", "dump")
    sid = topo.mgr.ipsets.ids.get("s:clients")
    assert sets[f"0x{sid:016x}"] == [f"{topo.ips[0]}/32"]
    flows = cli_json(topo, "conntrack", "dump")
    mine = [f for f in flows if f["proto"] == "udp" and f["b"] == f"{topo.ips[1]}:7070"]
    assert mine and all(set(f["flags"]) >= {"A", "B"} for f in mine)
    assert all(f["ifindex_a"] or f["ifindex_b"] for f in mine)  # recorded at TC ingress
    text = cli(topo, "conntrack", "dump", "--pin-dir", topo.pin_dir)
    assert text.returncode == 0 and text.stdout.endswith(f"{len(flows)} entries\n")
    idx = [topo.dp.ifindex(i) for i in topo.ifaces]
    assert cli_json(topo, "routes", "dump") == [
        {"cidr": f"{ip}/32", "flags": ["local", "workload"], "ifindex": i, "iface": name}
        for ip, i, name in zip(topo.ips, idx, topo.ifaces, strict=True)
    ]
    text = cli(topo, "routes", "dump", "--pin-dir", topo.pin_dir)
    assert text.returncode == 0 and text.stdout.endswith("2 routes\n")


def test_maps_found_through_attached_programs_without_pins(topo: Topo) -> None:
    """No --pin-dir, and the pins are not at Felix's default path (as for a Felix under
    ``ip netns exec``, whose bpffs is private): the commands find the same maps by program and
    map id, the policy programs' ones (IP sets, rule counters) included."""
    program(topo, RULES)
    assert udp(topo, 7070) == "ok"
    for args in (
        ("ifstate", "dump"),
        ("ipsets", "dump"),
        ("routes", "dump"),
        ("policy", "dump", topo.ifaces[1], "--listing-dir", topo.listing_dir),
    ):
        found = cli(topo, *args, "-o", "json")
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout) == cli_json(topo, *args)
    sid = topo.mgr.ipsets.ids.get("s:clients")
    assert f"0x{sid:016x}" in json.loads(cli(topo, "ipsets", "dump", "-o", "json").stdout)
    # a netns with none of our programs attached
    with ns.netns("calbde") as empty:
        out = ns.in_ns(empty, CALICO, "bpf", "conntrack", "dump", check=False, timeout=60)
    assert out.returncode == 1
    assert "no calico BPF programs attached to any interface here" in out.stderr


def test_debug_command_errors(topo: Topo) -> None:
    program(topo, RULES)
    out = cli(topo, "counters", "dump", "--iface", "nosuch0", "--pin-dir", topo.pin_dir)
    assert out.returncode == 1
    assert "Error: no interface 'nosuch0' in this network namespace" in out.stderr
    out = cli(topo, "counters", "dump", "--iface", "lo", "--pin-dir", topo.pin_dir)
    assert out.returncode == 1 and "lo has no BPF counters" in out.stderr
    out = cli(topo, "ipsets", "dump", "--pin-dir", "/nonexistent/pins")
    assert out.returncode == 1 and "no BPF maps at /nonexistent/pins" in out.stderr
    out = cli(topo, "policy", "dump", "nosuch0", "--pin-dir", topo.pin_dir,
              "--listing-dir", topo.listing_dir)  # fmt: skip
    assert out.returncode == 1 and "no policy listing" in out.stderr
    assert "Traceback" not in out.stderr


def test_rule_counters_and_listings_are_cleaned_up(topo: Topo) -> None:
    owner = "policy default//udp-7070"
    old_deny, old_allow = (
        rule_id(owner, "inbound", 0, "denyudp"),
        rule_id(owner, "inbound", 1, "allowset"),
    )
    program(topo, RULES)
    assert udp(topo, 7071) == "timeout"
    assert udp(topo, 7070) == "ok"
    hits = topo.dp.maps.rule_hits()
    assert hits[old_deny] >= 1 and hits[old_allow] >= 1
    # The deny rule goes; the allow rule moves to index 0 (a new identity): both old counters go.
    program(topo, RULES[1:2])
    new_allow = rule_id(owner, "inbound", 0, "allowset")
    hits = topo.dp.maps.rule_hits()
    assert old_deny not in hits and old_allow not in hits
    assert udp(topo, 7070) == "ok"
    assert topo.dp.maps.rule_hits()[new_allow] == 1
    # A restarted Felix (new manager): a predecessor's counter for a rule that is gone is
    # pruned once every interface is programmed; live rules keep theirs.
    stale = RULE_ID.pack(0x5EED)
    topo.dp.maps.rule_ctrs.update(stale, bytes(8 * topo.dp.maps.ncpu))
    topo.mgr = BPFEndpointManager(topo.dp, ("calidbg",), policy_debug=True)
    program(topo, RULES[1:2])
    assert topo.dp.maps.rule_ctrs.lookup(stale) is None
    assert topo.dp.maps.rule_hits()[new_allow] == 1
    # WEP removal: its counters entries, its rules' counters and its listings go.
    srv = topo.ifaces[1]
    idx = topo.dp.ifindex(srv)
    topo.mgr.on_update(WorkloadEndpointRemove(SERVER))
    topo.mgr.complete_deferred_work()
    assert topo.dp.maps.read_counters(idx) is None
    assert not os.path.exists(listing_path(topo.listing_dir, srv, "egress"))
    assert new_allow not in topo.dp.maps.rule_hits()


@pytest.mark.parametrize("level", [1, 2])
def test_log_levels_build_load_and_keep_verdicts(tmp_path: Path, level: int) -> None:
    """BPFLogLevel Info/Debug objects (bpf_printk) pass the verifier, are cached apart from
    the Off objects, and decide exactly as they do (allow, policy deny, no-policy drop)."""
    from bpf_support import PolicyState, packet

    from calico.felix.bpf.libbpf import run_once

    need_bpf()
    with private_bpffs(str(tmp_path)) as mnt:
        dp = BPFDataplane(os.path.join(mnt, "g"), os.path.join(tmp_path, "cache"),
                          defines={"CALI_LOG_LEVEL": level})  # fmt: skip
        try:
            assert f"CALI_LOG_LEVEL={level}" in " ".join(dp.compiler.flags())
            dp.register("lo", 1)
            pkt = packet("10.1.0.1", "10.1.0.2", 17, 1000, 53)
            assert run_once(dp.to_fd, pkt) == 2  # no policy yet: TC_ACT_SHOT
            state = PolicyState()
            state.profiles["p"] = Profile(inbound_rules=(Rule(action="allow", protocol="udp"),))
            dp.set_policies("lo", state.sources(profile_ids=("p",)))
            assert run_once(dp.to_fd, pkt) == -1  # TC_ACT_UNSPEC: allowed
            tcp = packet("10.1.0.1", "10.1.0.2", 6, 1000, 80)
            assert run_once(dp.to_fd, tcp) == 2
            got = dp.maps.read_counters(1)
            assert got is not None
            assert (got["egress"]["dropped_no_policy"], got["egress"]["accepted_by_policy"],
                    got["egress"]["dropped_by_policy"]) == (1, 1, 1)  # fmt: skip
        finally:
            dp.close()


@pytest.mark.parametrize("level", [0, 1, 2])
def test_log_rule_continues_and_records_at_info_and_debug(tmp_path: Path, level: int) -> None:
    """A ``log`` rule sets LOG_PACKET and continues (the next rule decides); with BPFLogLevel
    Info or Debug each matching packet leaves one trace-buffer record naming the rule's prefix
    (LogPrefix with %n substituted, as nftables' log statement) and its rule ID, with the
    packet's addresses; a packet the log rule does not match leaves none. Off compiles the
    record out (no format string in the object)."""
    from bpf_support import packet

    from calico.felix.bpf.libbpf import run_once
    from calico.felix.bpf.polprog import EndpointPolicy, Generator

    need_bpf()
    tag = ns.unique_name("lg")
    pid = PolicyID(f"pol-{tag}", tier="default")
    log_rule = Rule(action="log", protocol="udp", dst_ports=(PortRange(53, 53),), rule_id="lg53")
    rules = (log_rule, Rule(action="allow", protocol="udp", rule_id="allowudp"))
    gen = Generator({pid: Policy(inbound_rules=rules)}, {}, lambda s: 1,
                    log_template=f"calico-packet-{tag} %n")  # fmt: skip
    tiers = (TierInfo("default", ingress_policies=(pid,)),)
    src = gen.source(EndpointPolicy(tiers, (), inbound=True))
    want_id = rule_id(f"policy default//{pid.name}", "inbound", 0, "lg53")
    assert f'CALI_LOG_RULE_V4("calico-packet-{tag} pol-{tag}: ", 0x{want_id:016x}ULL)' in src
    with contextlib.ExitStack() as stack:
        trace = stack.enter_context(ns.trace_buffer())
        mnt = stack.enter_context(private_bpffs(str(tmp_path)))
        dp = BPFDataplane(os.path.join(mnt, "g"), os.path.join(tmp_path, "cache"),
                          defines={"CALI_LOG_LEVEL": level})  # fmt: skip
        stack.callback(dp.close)
        dp.register("lo", 1)
        dp.set_policies("lo", {"ingress": src, "egress": src})
        other = packet("10.1.0.1", "10.1.0.2", 17, 1000, 54)  # allowed, not logged
        assert run_once(dp.to_fd, other) == -1
        logged = packet("10.1.0.1", "10.1.0.2", 17, 1000, 53)
        record = f"cali log calico-packet-{tag} pol-{tag}: rule {want_id:x} if 1 hook 1 proto 17"
        if level == 0:
            assert run_once(dp.to_fd, logged) == -1  # log continued: the allow decided
            # (the BTF line info quotes the source line, so look for the format's own text)
            pol = [p for p in Path(tmp_path, "cache").iterdir() if p.name.startswith("pol_")]
            assert pol and not any(b"cali log" in p.read_bytes() for p in pol)
            return

        def recorded() -> list[str]:
            assert run_once(dp.to_fd, logged) == -1
            return [ln for ln in trace().splitlines() if record in ln]

        deadline = time.monotonic() + 20  # others' records share the buffer: poll
        while not (lines := recorded()):
            assert time.monotonic() < deadline, "no log record in the trace buffer"
            time.sleep(0.2)
        assert "src 10.1.0.1:1000 dst 10.1.0.2:53" in lines[0]
        assert not [ln for ln in trace().splitlines() if f"pol-{tag}" in ln and ":54" in ln]
