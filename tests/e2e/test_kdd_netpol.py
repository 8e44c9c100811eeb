"""Kubernetes NetworkPolicy semantics end to end on the Kubernetes datastore.

A fake API server (bound inside the node's netns) is the cluster; Felix runs there with
``DatastoreType=kubernetes``; pods in namespaces x, y, z (a, b, c in each, serving TCP 80/81
and UDP 80) get their network namespaces from the real CNI plugin in Kubernetes mode. Each step
creates, updates or deletes networking.k8s.io/v1 NetworkPolicies (or relabels a pod) through
the API, and the whole reachability matrix is checked with real traffic against a small
independent model of Kubernetes NetworkPolicy semantics (as upstream's e2e netpol tests do).
"""

from __future__ import annotations

import concurrent.futures
import copy
import importlib.util
import ipaddress
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from k8s_fake_apiserver import FakeAPIServer  # noqa: E402
from netns_support import (  # noqa: E402
    PY,
    NetnsWorker,
    add_netns,
    delete_netns,
    ip,
    py_server,
    unique_name,
)

from calico.cni.install import InstallOptions, install  # noqa: E402
from calico.datastore.kubernetes import crd  # noqa: E402

pytestmark = pytest.mark.root

V1 = "crd.projectcalico.org/v1"
NP = "networking.k8s.io/v1"
NODE = "kddnode"
POOL = "10.68.0.0/16"
NAMESPACES = ("x", "y", "z")
PODS = ("a", "b", "c")
PORTS = (("TCP", 80), ("TCP", 81), ("UDP", 80))
PORT_NAMES = {("TCP", 80): "serve-80-tcp", ("TCP", 81): "serve-81-tcp", ("UDP", 80): "serve-80-udp"}


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


fh = _load("kdd_felix_harness", TESTS / "integration" / "felix" / "dataplane" / "harness.py")

PROBE = """
import json, socket, sys, concurrent.futures
def one(t):
    dst, port, proto = t
    try:
        if proto == "TCP":
            c = socket.create_connection((dst, port), timeout=1.0)
            ok = c.recv(2) == b"hi"; c.close(); return ok
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.0)
        s.sendto(b"ping", (dst, port)); return s.recvfrom(100)[0] == b"ping"
    except OSError:
        return False
targets = json.loads(sys.argv[1])
with concurrent.futures.ThreadPoolExecutor(len(targets)) as pool:
    print(json.dumps(list(pool.map(one, targets))))
"""


@dataclass
class Pod:
    ns: str
    name: str
    netns: str
    ip: str = ""

    @property
    def key(self) -> str:
        return f"{self.ns}/{self.name}"


@dataclass
class Cluster:
    api: FakeAPIServer
    pods: dict[str, Pod]
    labels: dict[str, dict[str, str]]  # pod key -> labels (the model's copy)


def _cr(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    ck = crd.crd_kind(kind, crd.V1)
    assert ck is not None
    return crd.to_cr(ck, crd.V1, name, "", {"metadata": {"name": name}, "spec": spec}, None)


def _pod_object(ns: str, name: str) -> dict[str, Any]:
    ports = [
        {"name": PORT_NAMES[(proto, port)], "containerPort": port, "protocol": proto}
        for proto, port in PORTS
    ]
    return {
        "metadata": {"name": name, "namespace": ns, "labels": {"pod": name}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "ports": ports}]},
    }


def _cni(bin_dir: Path, host: str, command: str, pod: Pod, url: str, tmp: Path) -> dict:
    conf = {
        "cniVersion": "1.0.0",
        "name": "k8s-pod-network",
        "type": "calico",
        "nodename": NODE,
        "datastore_type": "kubernetes",
        "ipam_lock_file": str(tmp / "ipam.lock"),
        "policy": {"type": "k8s"},
        "ipam": {"type": "calico-ipam"},
    }
    cid = f"cid{pod.ns}{pod.name}".ljust(16, "0")
    env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": cid,
        "CNI_NETNS": f"/run/netns/{pod.netns}",
        "CNI_IFNAME": "eth0",
        "CNI_PATH": str(bin_dir),
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={pod.ns};K8S_POD_NAME={pod.name}",
        "K8S_API_ENDPOINT": url,
    }
    res = subprocess.run(
        ["ip", "netns", "exec", host, str(bin_dir / "calico")],
        input=json.dumps(conf).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
    return json.loads(res.stdout) if res.stdout.strip() else {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs root, iproute2 and nft")
    tmp = tmp_path_factory.mktemp("kdd")
    bin_dir = tmp / "bin"
    install(
        InstallOptions(
            conf_dir=str(tmp / "net.d"), bin_dir=str(bin_dir), python=sys.executable, nodename=NODE
        )
    )
    with _Netns("kddhost") as host:
        ip("link", "set", "lo", "up", ns=host)
        ip("route", "add", "default", "dev", "lo", ns=host)
        worker = NetnsWorker(host)
        api = worker.call(lambda: FakeAPIServer(bookmark_interval=5.0).start())
        api.put_object(
            V1,
            "clusterinformations",
            _cr(
                "ClusterInformation", "default", {"datastoreReady": True, "clusterGUID": "kdd-e2e"}
            ),
        )
        api.put_object(
            V1,
            "ippools",
            _cr(
                "IPPool",
                "pool",
                {
                    "cidr": POOL,
                    "blockSize": 26,
                    "ipipMode": "Never",
                    "vxlanMode": "Never",
                    "nodeSelector": "all()",
                    "natOutgoing": False,
                },
            ),
        )
        api.put_object("v1", "nodes", {"metadata": {"name": NODE}})
        for ns in NAMESPACES:
            api.put_object("v1", "namespaces", {"metadata": {"name": ns, "labels": {"ns": ns}}})
        felix = fh.Felix(
            host,
            tmp,
            env={
                "FELIX_DATASTORETYPE": "kubernetes",
                "FELIX_FELIXHOSTNAME": NODE,
                "FELIX_REPORTINGINTERVALSECS": "0",
                "K8S_API_ENDPOINT": api.url,
            },
        )
        pods: dict[str, Pod] = {}
        servers: list[Any] = []
        try:
            felix.start()
            felix.wait_ready(60)
            for ns in NAMESPACES:
                for name in PODS:
                    pod = Pod(ns, name, unique_name(f"kddp{ns}{name}", 10))
                    add_netns(pod.netns)
                    pods[pod.key] = pod
                    api.put_object("v1", "pods", _pod_object(ns, name))
                    result = _cni(bin_dir, host, "ADD", pod, api.url, tmp)
                    pod.ip = result["ips"][0]["address"].split("/")[0]
                    server = py_server(pod.netns, fh.SERVER, "tcp:80", "tcp:81", "udp:80")
                    server.__enter__()
                    servers.append(server)
            labels = {k: {"pod": p.name} for k, p in pods.items()}
            yield Cluster(api, pods, labels)
        finally:
            for server in servers:
                server.__exit__(None, None, None)
            felix.kill()
            for pod in pods.values():
                delete_netns(pod.netns)
            api.stop()
            worker.close()


class _Netns:
    def __init__(self, prefix: str) -> None:
        self.name = unique_name(prefix, 10)

    def __enter__(self) -> str:
        add_netns(self.name)
        return self.name

    def __exit__(self, *exc: object) -> None:
        delete_netns(self.name)


# -- the model --------------------------------------------------------------------------


def _sel_match(sel: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if sel is None:
        return True
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        has, val = e["key"] in labels, labels.get(e["key"])
        op = e["operator"]
        if (op == "In" and val not in e["values"]) or (op == "NotIn" and val in e["values"]):
            return False
        if (op == "Exists" and not has) or (op == "DoesNotExist" and has):
            return False
    return True


def _peer_match(peer: dict[str, Any], policy_ns: str, other: Pod, labels: dict) -> bool:
    if "ipBlock" in peer:
        addr = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        return addr in ipaddress.ip_network(block["cidr"]) and not any(
            addr in ipaddress.ip_network(e) for e in block.get("except") or []
        )
    ns_sel = peer.get("namespaceSelector")
    if ns_sel is None and other.ns != policy_ns:
        return False
    if ns_sel is not None and not _sel_match(
        ns_sel, {"ns": other.ns, "kubernetes.io/metadata.name": other.ns}
    ):
        return False
    return _sel_match(peer.get("podSelector") or {}, labels[other.key])


def _port_match(ports: list[dict[str, Any]] | None, proto: str, port: int, dst: bool) -> bool:
    if not ports:
        return True
    for p in ports:
        if (p.get("protocol") or "TCP") != proto:
            continue
        want = p.get("port")
        if want is None:
            return True
        if isinstance(want, str):
            # Named ports resolve against the destination pod's container ports.
            if PORT_NAMES.get((proto, port)) == want:
                return True
            continue
        if want <= port <= p.get("endPort", want):
            return True
    return False


def _allowed(policies: list[dict], c: Cluster, src: Pod, dst: Pod, proto: str, port: int) -> bool:
    def direction(pod: Pod, other: Pod, kind: str, key: str) -> bool:
        selecting = [
            np
            for np in policies
            if np["metadata"]["namespace"] == pod.ns
            and _sel_match(np["spec"].get("podSelector") or {}, c.labels[pod.key])
            and kind in (np["spec"].get("policyTypes") or ["Ingress"])
        ]
        if not selecting:
            return True
        for np in selecting:
            for rule in np["spec"].get(key) or []:
                peers = rule.get("from" if key == "ingress" else "to")
                if (
                    not peers or any(_peer_match(p, pod.ns, other, c.labels) for p in peers)
                ) and _port_match(rule.get("ports"), proto, port, True):
                    return True
        return False

    return direction(dst, src, "Ingress", "ingress") and direction(src, dst, "Egress", "egress")


def _measure(c: Cluster) -> dict[tuple[str, str, str, int], bool]:
    pods = list(c.pods.values())

    def from_src(src: Pod) -> list[tuple[tuple[str, str, str, int], bool]]:
        targets = [(d, proto, port) for d in pods if d is not src for proto, port in PORTS]
        arg = json.dumps([[d.ip, port, proto] for d, proto, port in targets])
        out = subprocess.run(
            ["ip", "netns", "exec", src.netns, PY, "-c", PROBE, arg],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return [
            ((src.key, d.key, proto, port), ok)
            for (d, proto, port), ok in zip(targets, json.loads(out), strict=True)
        ]

    with concurrent.futures.ThreadPoolExecutor(len(pods)) as pool:
        return dict(kv for result in pool.map(from_src, pods) for kv in result)


def _expect(c: Cluster, policies: list[dict]) -> dict[tuple[str, str, str, int], bool]:
    return {
        (s.key, d.key, proto, port): _allowed(policies, c, s, d, proto, port)
        for s in c.pods.values()
        for d in c.pods.values()
        if d is not s
        for proto, port in PORTS
    }


def _converge(c: Cluster, policies: list[dict], timeout: float = 20.0) -> None:
    want = _expect(c, policies)
    deadline = time.monotonic() + timeout
    while True:
        got = _measure(c)
        if got == want:
            return
        if time.monotonic() > deadline:
            diff = sorted(k for k in want if want[k] != got[k])
            pytest.fail(
                f"{len(diff)} of {len(want)} probes differ, e.g. "
                f"{[(k, 'want', want[k]) for k in diff[:8]]}"
            )
        time.sleep(0.5)


class Policies:
    """The NetworkPolicies in the API (and the model's copy)."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.items: dict[tuple[str, str], dict] = {}
        self.matrices: list[frozenset] = []  # the allowed probes after each step

    def put(self, ns: str, name: str, spec: dict[str, Any]) -> None:
        obj = {"metadata": {"name": name, "namespace": ns}, "spec": spec}
        if (ns, name) in self.items:
            current = self.c.api.get_object(NP, "networkpolicies", name, ns)
            current["spec"] = spec
            self.c.api.update_object(NP, "networkpolicies", current)
        else:
            self.c.api.put_object(NP, "networkpolicies", obj)
        self.items[(ns, name)] = copy.deepcopy(obj)

    def delete(self, ns: str, name: str) -> None:
        self.c.api.delete_object(NP, "networkpolicies", name, ns)
        del self.items[(ns, name)]

    def clear(self) -> None:
        for ns, name in list(self.items):
            self.delete(ns, name)

    def converge(self) -> None:
        policies = list(self.items.values())
        _converge(self.c, policies)
        self.matrices.append(frozenset(k for k, ok in _expect(self.c, policies).items() if ok))


def _relabel(c: Cluster, key: str, labels: dict[str, str]) -> None:
    ns, name = key.split("/")
    pod = c.api.get_object("v1", "pods", name, ns)
    pod["metadata"]["labels"] = labels
    c.api.update_object("v1", "pods", pod)
    c.labels[key] = dict(labels)


def test_network_policy_matrix(cluster: Cluster) -> None:
    c = cluster
    p = Policies(c)
    p.converge()  # no policy: everything reaches everything

    p.put("x", "deny-all", {"podSelector": {}, "policyTypes": ["Ingress"]})
    p.converge()

    p.put(
        "x",
        "allow-from-b",
        {
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}],
        },
    )
    p.converge()

    p.put(
        "x",
        "allow-from-y",
        {
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}],
        },
    )
    p.converge()

    p.delete("x", "allow-from-y")
    p.put(
        "x",
        "allow-from-b",
        {  # both selectors in one peer: pod b in namespace z only
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {"ns": "z"}},
                            "podSelector": {"matchLabels": {"pod": "b"}},
                        }
                    ]
                }
            ],
        },
    )
    p.converge()

    zc = c.pods["z/c"].ip
    p.clear()
    p.put(
        "x",
        "ipblock",
        {
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"ipBlock": {"cidr": POOL, "except": [f"{zc}/32"]}}]}],
        },
    )
    p.converge()

    p.clear()
    p.put(
        "y",
        "named-port",
        {
            "podSelector": {},
            "ingress": [
                {"ports": [{"port": "serve-81-tcp"}, {"protocol": "UDP", "port": "serve-80-udp"}]}
            ],
        },
    )
    p.converge()

    p.clear()
    p.put(
        "z",
        "end-port",
        {
            "podSelector": {},
            "ingress": [{"ports": [{"protocol": "TCP", "port": 81, "endPort": 90}]}],
        },
    )
    p.converge()

    p.clear()
    p.put(
        "x",
        "egress-dns-only",
        {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
            ],
        },
    )
    p.converge()

    # Policy updates and label changes take effect.
    p.put(
        "x",
        "egress-dns-only",
        {
            "podSelector": {"matchLabels": {"pod": "a"}},
            "policyTypes": ["Egress"],
            "egress": [{"ports": [{"protocol": "UDP", "port": 53}]}],
        },
    )
    p.converge()
    _relabel(c, "x/b", {"pod": "a"})
    p.converge()
    _relabel(c, "x/b", {"pod": "b"})
    p.clear()
    p.converge()
    # Every step changed what is reachable (none of them was a no-op the test could not see),
    # and the last one is back to "everything reaches everything".
    steps = p.matrices
    assert all(a != b for a, b in itertools.pairwise(steps))
    assert steps[-1] == steps[0] and len(steps[0]) == 9 * 8 * len(PORTS)


def _converge_to(c: Cluster, want: dict[tuple[str, str, str, int], bool]) -> None:
    deadline = time.monotonic() + 20.0
    while True:
        got = _measure(c)
        if got == want:
            return
        if time.monotonic() > deadline:
            diff = sorted(k for k in want if want[k] != got[k])
            pytest.fail(f"{len(diff)} probes differ, e.g. {[(k, want[k]) for k in diff[:8]]}")
        time.sleep(0.5)


def test_service_rules_follow_the_endpoint_slices(cluster: Cluster) -> None:
    """Calico rules with ``services:`` over Kubernetes Services: egress from x only to the
    endpoints (+ports) of service y/web, ingress to z only from its endpoints' addresses;
    the EndpointSlice changing moves the allowed set (Felix's ServiceIndex, ``svc:`` and
    ``svcnoport:`` IP sets), with real traffic."""
    c = cluster
    pods = list(c.pods.values())
    api = c.api
    api.put_object(
        "v1",
        "services",
        {"metadata": {"name": "web", "namespace": "y"}, "spec": {"ports": [{"port": 80}]}},
    )
    slice_ = {
        "metadata": {
            "name": "web-1",
            "namespace": "y",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [c.pods["y/a"].ip]}],
        "ports": [{"port": 80, "protocol": "TCP"}],
    }
    api.put_object("discovery.k8s.io/v1", "endpointslices", slice_)
    to_web = {
        "selector": "projectcalico.org/namespace == 'x'",
        "types": ["Egress"],
        "egress": [
            {"action": "Allow", "destination": {"services": {"name": "web", "namespace": "y"}}}
        ],
    }
    from_web = {
        "selector": "projectcalico.org/namespace == 'z'",
        "types": ["Ingress"],
        "ingress": [{"action": "Allow", "source": {"services": {"name": "web", "namespace": "y"}}}],
    }
    api.put_object(V1, "globalnetworkpolicies", _cr("GlobalNetworkPolicy", "to-web", to_web))
    api.put_object(V1, "globalnetworkpolicies", _cr("GlobalNetworkPolicy", "from-web", from_web))

    def want(endpoints: set[str]) -> dict[tuple[str, str, str, int], bool]:
        out = {}
        for s in pods:
            for d in pods:
                if d is s:
                    continue
                for proto, port in PORTS:
                    ok = True
                    if s.ns == "x":  # egress: only the service's endpoint addresses, TCP 80
                        ok = d.key in endpoints and (proto, port) == ("TCP", 80)
                    if ok and d.ns == "z":  # ingress: only from the endpoint addresses
                        ok = s.key in endpoints
                    out[(s.key, d.key, proto, port)] = ok
        return out

    try:
        _converge_to(c, want({"y/a"}))
        current = api.get_object("discovery.k8s.io/v1", "endpointslices", "web-1", "y")
        current["endpoints"] = [
            {"addresses": [c.pods["y/b"].ip]},
            {"addresses": [c.pods["z/c"].ip]},
        ]
        api.update_object("discovery.k8s.io/v1", "endpointslices", current)
        _converge_to(c, want({"y/b", "z/c"}))
        api.delete_object("discovery.k8s.io/v1", "endpointslices", "web-1", "y")
        _converge_to(c, want(set()))
    finally:
        for name in ("to-web", "from-web"):
            api.delete_object(V1, "globalnetworkpolicies", name)
        api.delete_object("v1", "services", "web", "y")
    _converge_to(c, _expect(c, []))  # back to everything reaching everything
