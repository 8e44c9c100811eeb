"""The cluster's wiring: a lan namespace with a bridge and a router, one namespace per node,
and a "world" namespace standing in for the internet.

Nothing is created in the caller's own network namespace: the bridge, the router addresses and
etcd live in ``<name>-lan``; each node's ``eth0`` is one end of a veth whose other end is a
bridge port there. Each node gets a default route via the router, as a real host would (Felix's
proxy ARP for workloads needs one), and forwarding on. The world namespace hangs off the router
on its own subnet, outside every IP pool, so traffic to it is what NAT-outgoing masquerades.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

from calico.node.cluster.spec import SUBNETS, WORLD_NET, ClusterSpec, NodeSpec
from calico.node.errors import NodeError
from calico.node.run.layout import pid_alive

BRIDGE = "br0"
IP_TIMEOUT = 30.0
FORWARDING = ("net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")


def ip(*args: str, ns: str | None = None, check: bool = True) -> str:
    """iproute2 (inside ``ns`` with ``-n``); a failure is a NodeError naming the command."""
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT, check=False)
    if check and proc.returncode != 0:
        raise NodeError(f"{' '.join(argv)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def in_netns(ns: str, *argv: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, *argv],
        capture_output=True,
        text=True,
        timeout=IP_TIMEOUT,
        check=False,
    )
    if check and proc.returncode != 0:
        raise NodeError(f"{' '.join(argv)} in {ns}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def list_netns() -> list[str]:
    out = ip("-j", "netns", "list", check=False).strip()
    try:
        return [str(entry["name"]) for entry in json.loads(out or "[]")]
    except (ValueError, KeyError, TypeError):
        return []


def cluster_netns(name: str) -> list[str]:
    """Every namespace named for cluster ``name`` (nodes, lan, world, pod sandboxes)."""
    return [ns for ns in list_netns() if ns.startswith(f"{name}-")]


def add_netns(name: str) -> None:
    if name in list_netns():
        raise NodeError(f"network namespace {name} already exists (a cluster is up: 'down' first)")
    ip("netns", "add", name)
    ip("link", "set", "lo", "up", ns=name)


def sysctl(ns: str, *settings: str) -> None:
    in_netns(ns, "sysctl", "-q", "-w", *settings)


def create(spec: ClusterSpec, say: Callable[[str], None] = lambda _m: None) -> None:
    """Namespaces, bridge, router and uplinks for every node of ``spec``."""
    lan = spec.lan_netns
    add_netns(lan)
    ip("link", "add", BRIDGE, "type", "bridge", ns=lan)
    ip("link", "set", BRIDGE, "up", ns=lan)
    for v4, v6 in SUBNETS:
        ip("addr", "add", f"{v4}.1/24", "dev", BRIDGE, ns=lan)
        ip("addr", "add", f"{v6}::1/64", "dev", BRIDGE, "nodad", ns=lan)
    sysctl(lan, *FORWARDING)
    say(f"   {lan}: bridge {BRIDGE}, router {', '.join(f'{v4}.1' for v4, _ in SUBNETS)}")
    for node in spec.nodes:
        add_node(spec, node)
        say(f"   {node.netns}: eth0 {node.ip} {node.ip6}")
    add_world(spec)
    say(f"   {spec.world_netns}: {spec.world_ip} (outside every IP pool)")


def add_node(spec: ClusterSpec, node: NodeSpec) -> None:
    add_netns(node.netns)
    lan = spec.lan_netns
    ip("link", "add", node.lan_ifname, "type", "veth", "peer", "name", "eth0", "netns",
       node.netns, ns=lan)  # fmt: skip
    ip("link", "set", node.lan_ifname, "master", BRIDGE, "up", ns=lan)
    ip("addr", "add", node.ip, "dev", "eth0", ns=node.netns)
    ip("addr", "add", node.ip6, "dev", "eth0", "nodad", ns=node.netns)
    ip("link", "set", "eth0", "up", ns=node.netns)
    ip("route", "add", "default", "via", node.gateway, "dev", "eth0", ns=node.netns)
    ip("-6", "route", "add", "default", "via", node.gateway6, "dev", "eth0", ns=node.netns)
    sysctl(node.netns, *FORWARDING)


def add_world(spec: ClusterSpec) -> None:
    world, lan = spec.world_netns, spec.lan_netns
    add_netns(world)
    ip("link", "add", "world", "type", "veth", "peer", "name", "eth0", "netns", world, ns=lan)
    ip("addr", "add", f"{WORLD_NET}.254/24", "dev", "world", ns=lan)
    ip("link", "set", "world", "up", ns=lan)
    ip("addr", "add", f"{spec.world_ip}/24", "dev", "eth0", ns=world)
    ip("link", "set", "eth0", "up", ns=world)
    ip("route", "add", "default", "via", spec.world_router_ip, ns=world)


def kill_netns_processes(names: Sequence[str], grace: float = 2.0) -> int:
    """TERM then KILL whatever runs inside the namespaces; returns how many there were."""
    pids: set[int] = set()
    for ns in names:
        pids.update(int(p) for p in ip("netns", "pids", ns, check=False).split() if p.isdigit())
    pids.discard(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.1)
    return len(pids)


def delete_all(names: Sequence[str]) -> None:
    for ns in names:
        ip("netns", "del", ns, check=False)
