"""N ``calico node run`` nodes as network namespaces on one bridge, one datastore.

The wiring, etcd, the cluster's calicoctl.cfg and IP pools come from the product
(:mod:`calico.node.cluster`, the code behind ``make cluster``); each node is a
:class:`node_harness.Node` started with the product's ``calico node run`` command line for that
node, so tests get the single-node harness's helpers (readiness, diagnostics, CNI workloads made
by the installed plugin inside the node's namespace, teardown) on every node. Later issues
(Typha, the Kubernetes datastore) reuse :class:`Cluster` with other backends/datastores; BGP
uses ``backend="bird"`` with a no-encap pool (``vxlan_mode="Never"``), :meth:`Cluster.bgp_status`
and :meth:`Cluster.bird_routes`; ``kube_api=True`` adds a fake Kubernetes API server
(:attr:`Cluster.kube`, ``tests/k8s_fake_apiserver.py``) in the lan namespace, next to etcd, and
hands the nodes a ``KUBECONFIG`` for it (confd reads BGP password Secrets there, as upstream's
calico-node does with an etcd datastore).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from k8s_fake_apiserver import ApiError, FakeAPIServer
from netns_support import NetnsWorker, ip, py_server, unique_name
from node_harness import PY, Node, Workload, in_ns, require_root

from calico.node.cluster import ctl, fabric, lifecycle, procs
from calico.node.cluster import nodes as cluster_nodes
from calico.node.cluster import spec as cluster_spec

# Fast enough to observe a repair in a test; the product default stays upstream's.
ROUTE_REFRESH_SECONDS = 5


class Cluster:
    """One cluster under ``root``; ``up()`` brings it up, ``down()`` removes all of it."""

    def __init__(
        self,
        root: Path,
        count: int = 3,
        datastore: str = "etcdv3",
        second_subnet: tuple[int, ...] = (),
        backend: str = "vxlan",
        extra_env: dict[str, str] | None = None,
        kube_api: bool = False,
    ) -> None:
        self.spec = cluster_spec.build(unique_name("clt", 6), root, count, datastore, second_subnet)
        self.kube_api = kube_api
        self.kube: FakeAPIServer | None = None
        env = procs.child_env(
            self.spec.root,
            {
                "NO_DEFAULT_POOLS": "true",
                "FELIX_ROUTEREFRESHINTERVAL": str(ROUTE_REFRESH_SECONDS),
                **(extra_env or {}),
            },
        )
        self.nodes = {
            n.name: Node(
                n.netns,
                Path(n.root),
                n.name,
                run_args=cluster_nodes.run_argv(self.spec, n, backend),
                env=env,
            )
            for n in self.spec.nodes
        }

    def up(self, vxlan_mode: str = "Always") -> None:
        lifecycle.prepare(self.spec, lambda _m: None, vxlan_mode)
        if self.kube_api:
            self._start_kube_api()
        first, *rest = self.nodes.values()
        for batch in ([first], rest):
            for node in batch:
                node.start()
            for node in batch:
                node.wait_ready(timeout=120)

    def _start_kube_api(self) -> None:
        """The fake API server, listening on the lan namespace's router address (its socket is
        bound on a thread inside that namespace; serving runs on the server's own thread)."""
        worker = NetnsWorker(self.spec.lan_netns)
        try:
            self.kube = worker.call(
                lambda: FakeAPIServer(host=self.spec.router_ip, bookmark_interval=60.0)
            ).start()
        finally:
            worker.close()
        kubeconfig = Path(self.spec.root) / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f'clusters: [{{name: fake, cluster: {{server: "{self.kube.url}"}}}}]\n'
            "users: [{name: calico-node, user: {}}]\n"
            "contexts: [{name: fake, context: {cluster: fake, user: calico-node}}]\n"
            "current-context: fake\n"
        )
        for node in self.nodes.values():
            node.run_env = {**(node.run_env or {}), "KUBECONFIG": str(kubeconfig)}

    def down(self) -> None:
        for node in self.nodes.values():
            with contextlib.suppress(Exception):
                node.teardown()
        if self.kube is not None:
            with contextlib.suppress(Exception):
                self.kube.stop()
        lifecycle.down(self.spec.root, self.spec.name, lambda _m: None)

    def put_secret(self, name: str, data: dict[str, str], namespace: str = "kube-system") -> None:
        """Create or replace a Secret on the fake API server (``kube_api=True``)."""
        assert self.kube is not None, "the cluster has no Kubernetes API (kube_api=False)"
        obj = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": dict(data),
        }
        try:
            self.kube.get_object("v1", "secrets", name, namespace)
        except ApiError:
            self.kube.put_object("v1", "secrets", obj)
        else:
            self.kube.update_object("v1", "secrets", obj)

    # -- helpers --------------------------------------------------------------------------------

    def node(self, index: int) -> Node:
        return self.nodes[f"node{index}"]

    def node_spec(self, index: int) -> cluster_spec.NodeSpec:
        return self.spec.node(index)

    def calicoctl(self, *args: str, stdin: str | None = None, check: bool = True) -> Any:
        return ctl.calicoctl(self.spec, *args, stdin=stdin, check=check)

    def set_vxlan_mode(self, mode: str) -> None:
        self.calicoctl("apply", "-f", "-", stdin=ctl.pools_yaml(self.spec, mode))

    def add_workload(self, index: int, namespace: str, pod: str) -> Workload:
        return self.node(index).add_workload(namespace, pod)

    def bgp_status(self, index: int) -> str:
        """``calicoctl node status`` in node ``index``'s namespace, against its own BIRD."""
        res = ctl.node_status(self.spec, self.node_spec(index))
        return res.stdout + res.stderr

    def bird_routes(self, index: int, family: str = "-4") -> dict[str, str]:
        """The routes BIRD programmed on node ``index`` (``proto bird``): dst -> gateway."""
        ns = self.node_spec(index).netns
        found = ip_json(ns, family, "route", "show", "proto", "bird")
        return {str(r["dst"]): str(r.get("gateway", r.get("type", ""))) for r in found}

    def calicoctl_items(self, kind: str) -> list[dict[str, Any]]:
        doc = ctl.get_json(self.spec, kind)
        return list(doc.get("items", [doc]))

    def node_json(self, index: int) -> dict[str, Any]:
        return ctl.get_json(self.spec, "node", self.node(index).name)

    def diagnostics(self) -> str:
        return "\n".join(f"=== {n.name} ===\n{n.diagnostics()}" for n in self.nodes.values())


def addr6(w: Workload) -> str:
    """The workload's global IPv6 address (dual-stack pods get one from the IPv6 pool)."""
    for entry in json.loads(ip("-j", "addr", "show", "eth0", ns=w.netns)):
        for a in entry.get("addr_info", []):
            if a.get("family") == "inet6" and a.get("scope") == "global":
                return str(a["local"])
    raise AssertionError(f"{w.pod} has no global IPv6 address")


def ip_json(ns: str, *args: str) -> list[dict[str, Any]]:
    out = ip("-j", *args, ns=ns)
    return list(json.loads(out or "[]"))


def routes_via(ns: str, dev: str, family: str = "-4") -> list[dict[str, Any]]:
    return [r for r in ip_json(ns, family, "route", "show") if r.get("dev") == dev]


def block_of(address: str, prefix: int) -> str:
    return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False))


def poll(check: Any, timeout: float, interval: float = 0.1) -> tuple[bool, float]:
    """Call ``check()`` until truthy or ``timeout``; returns (ok, seconds waited)."""
    start = time.monotonic()
    while True:
        if check():
            return True, time.monotonic() - start
        if time.monotonic() - start >= timeout:
            return False, time.monotonic() - start
        time.sleep(interval)


# One ICMP (v4) or ICMPv6 echo request over a raw socket (no ping binary on these machines):
# "ok" when the matching echo reply from ``dst`` arrives.
ECHO_PROBE = """
import ipaddress, os, socket, struct, sys, time
dst, timeout = sys.argv[1], float(sys.argv[2])
v6 = ipaddress.ip_address(dst).version == 6
ident = os.getpid() & 0xFFFF
if v6:
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    req, want = struct.pack("!BBHHH", 128, 0, 0, ident, 1) + b"probe!", 129
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    body = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + b"probe!"  # even length: 16-bit words
    total = sum(struct.unpack("!7H", body))
    total = (total >> 16) + (total & 0xFFFF); total += total >> 16
    req, want = struct.pack("!BBHHH", 8, 0, ~total & 0xFFFF, ident, 1) + b"probe!", 0
s.settimeout(timeout)
s.sendto(req, (dst, 0))
end = time.time() + timeout
try:
    while time.time() < end:
        data, addr = s.recvfrom(2048)
        icmp = data if v6 else data[(data[0] & 0x0F) * 4:]
        if addr[0] == dst and icmp[0] == want and struct.unpack("!H", icmp[4:6])[0] == ident:
            print("ok"); break
    else:
        print("timeout")
except socket.timeout:
    print("timeout")
"""


def ping(src: Workload, dst: str, tries: int = 3) -> bool:
    """ICMP echo from ``src`` to ``dst`` (either family); True on a reply within ``tries``."""
    for _ in range(tries):
        res = in_ns(src.netns, PY, "-c", ECHO_PROBE, dst, "1.0", check=False)
        if res.stdout.strip() == "ok":
            return True
    return False


@contextlib.contextmanager
def cluster_up(root: Path, **kw: Any) -> Iterator[Cluster]:
    """A cluster that is up for the block and completely gone afterwards, whatever happens."""
    require_root()
    mode = kw.pop("vxlan_mode", "Always")
    cluster = Cluster(root, **kw)
    try:
        cluster.up(mode)
        yield cluster
    finally:
        cluster.down()
        assert not fabric.cluster_netns(cluster.spec.name), "namespaces left behind"


# --- traffic (dual stack) ---------------------------------------------------------------------

# Echo on [::] (IPv4 too: V6ONLY off); "whoami" answers with the peer's address instead.
DUAL_SERVER = """
import socket, sys, threading
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(sys.argv[1]))); s.listen(16)
print("ready", flush=True)
def serve(c, peer):
    with c:
        while True:
            d = c.recv(100)
            if not d:
                return
            if d == b"whoami":
                host = peer[0].removeprefix("::ffff:")
                c.sendall(host.encode()); return
            c.sendall(d)
while True:
    c, peer = s.accept()
    threading.Thread(target=serve, args=(c, peer), daemon=True).start()
"""

CLIENT = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    c.sendall(sys.argv[4].encode()); print("ok", c.recv(100).decode())
except OSError as e:
    print("fail", e)
"""


def tcp_send(src: Workload, dst: str, port: int, payload: str = "hi", timeout: float = 1.0) -> str:
    """Connect from ``src`` to ``dst:port`` and send ``payload``; "ok <reply>" or "fail ..."."""
    res = in_ns(src.netns, PY, "-c", CLIENT, dst, str(port), str(timeout), payload, check=False)
    return res.stdout.strip()


def tcp_ok(src: Workload, dst: str, port: int, timeout: float = 1.0) -> bool:
    return tcp_send(src, dst, port, "hi", timeout) == "ok hi"


@contextlib.contextmanager
def dual_server(netns: str, port: int) -> Iterator[Any]:
    with py_server(netns, DUAL_SERVER, str(port), start_new_session=True) as proc:
        yield proc
