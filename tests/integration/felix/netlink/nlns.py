"""Throwaway network namespaces and veth topologies for the netlink kernel tests.

Each namespace gets a worker thread that ``setns()``-es itself into it (namespaces are per
thread), so code that works on "the current namespace" (sysctls under /proc/sys/net, plain
sockets) can run there while pytest stays in the root namespace. Netlink objects under test are
instead opened with ``netns=<name>`` (pyroute2 creates the socket inside the namespace). The
namespace is always deleted on exit, even when the test body fails; deleting it also removes
every veth end inside it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import netns_support
from netns_support import NetnsWorker, worker_netns
from pyroute2 import IPRoute
from pyroute2 import netns as pr_netns

NUD_PERMANENT = 0x80


class NS(NetnsWorker):
    def __init__(self, name: str) -> None:
        super().__init__(name, timeout=30)
        self._ipr: IPRoute | None = None

    @property
    def ipr(self) -> IPRoute:
        """A fixture-side IPRoute bound to this namespace (the "someone else" actor)."""
        if self._ipr is None:
            self._ipr = IPRoute(netns=self.name, flags=0)
        return self._ipr

    def ip(self, *args: str) -> str:
        """The iproute2 CLI inside the namespace (fixtures only, never the code under test)."""
        return netns_support.ip(*args, ns=self.name)

    def sock(self, family: int, kind: int) -> socket.socket:
        return pr_netns.create_socket(self.name, family, kind, flags=0)

    def index(self, ifname: str) -> int:
        found = self.ipr.link_lookup(ifname=ifname)
        assert found, f"{ifname} not found in {self.name}"
        return found[0]

    def routes(self, family: int = socket.AF_INET) -> list[dict[str, Any]]:
        out = []
        for r in self.ipr.route("dump", family=family, table=254):
            out.append(
                {
                    "dst": f"{r.get('dst')}/{r['dst_len']}",
                    "oif": r.get("oif"),
                    "proto": r["proto"],
                    "scope": r["scope"],
                    "metric": r.get("priority"),
                }
            )
        return out

    def routes_on(self, ifname: str, family: int = socket.AF_INET) -> set[str]:
        idx = self.index(ifname)
        return {r["dst"] for r in self.routes(family) if r["oif"] == idx and r["proto"] != 2}

    def close(self) -> None:
        try:
            if self._ipr is not None:
                self._ipr.close()
        finally:
            super().close()


@contextmanager
def netns(prefix: str = "calnl") -> Iterator[NS]:
    with worker_netns(NS, prefix) as ns:
        yield ns


@dataclass
class Workload:
    ns: NS
    host_if: str
    ip: str
    mac: str


def add_veth(host: NS, host_if: str, peer_ns: NS | None = None, peer_if: str = "eth0") -> None:
    """A veth whose host end ``host_if`` lives in ``host`` (peer in ``peer_ns`` or also host)."""
    peer: dict[str, Any] = {"ifname": peer_if}
    if peer_ns is not None:
        peer["net_ns_fd"] = peer_ns.name
    host.ipr.link("add", ifname=host_if, kind="veth", peer=peer)
    host.ipr.link("set", index=host.index(host_if), state="up")


def add_workload(stack: ExitStack, host: NS, host_if: str, ip: str) -> Workload:
    """A workload namespace wired like the Calico CNI plugin does it (default via 169.254.1.1)."""
    wl = stack.enter_context(netns("calwl"))
    add_veth(host, host_if, wl)
    host.ipr.link("set", index=host.index(host_if), address="ee:ee:ee:ee:ee:ee")
    e0 = wl.index("eth0")
    wl.ipr.link("set", index=e0, state="up")
    wl.ipr.addr("add", index=e0, address=ip, prefixlen=32)
    wl.ipr.route("add", dst="169.254.1.1/32", oif=e0, scope="link")
    wl.ipr.route("add", dst="0.0.0.0/0", gateway="169.254.1.1", oif=e0)
    mac = wl.ipr.get_links(e0)[0].get("address")
    return Workload(ns=wl, host_if=host_if, ip=ip, mac=mac)


def tcp_reachable(client: NS, server: NS, ip: str, port: int, timeout: float = 1.5) -> bool:
    """Accept one connection in ``server``; True if ``client`` can connect and exchange data."""
    srv = server.sock(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((ip, port))
    srv.listen(1)
    srv.settimeout(timeout + 1)

    def serve() -> None:
        try:
            conn, _ = srv.accept()
            with conn:
                conn.sendall(b"hi")
        except OSError:
            pass

    t = threading.Thread(target=serve)
    t.start()
    cli = client.sock(socket.AF_INET, socket.SOCK_STREAM)
    cli.settimeout(timeout)
    try:
        cli.connect((ip, port))
        return cli.recv(2) == b"hi"
    except OSError:
        return False
    finally:
        cli.close()
        srv.close()
        t.join(timeout + 2)


def wait_for(pred: Callable[[], bool], timeout: float = 3.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()
