"""ADD / CHECK / DEL of the calico plugin against real network namespaces."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest
from cni_fixtures import POOL_V6, CNIWorld

pytestmark = pytest.mark.root


def test_add_check_del_cni_orchestrator(world: CNIWorld) -> None:
    ns = world.workload_ns()
    cid = "0123456789abcdef0123"
    res = world.add(cid, ns)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = res.doc
    host_if = "cali" + cid[:11]
    assert doc["cniVersion"] == "1.0.0"
    assert doc["interfaces"][0] == {"name": host_if, "mac": "ee:ee:ee:ee:ee:ee"}
    assert doc["interfaces"][1]["name"] == "eth0"
    assert doc["interfaces"][1]["sandbox"] == f"/run/netns/{ns}"
    [ip] = doc["ips"]
    assert "version" not in ip  # 1.0.0 shape
    assert ip["address"].endswith("/32") and ip["address"].startswith("10.77.0.")
    assert ip["gateway"] == "169.254.1.1" and ip["interface"] == 1
    assert doc["routes"] == [{"dst": "0.0.0.0/0", "gw": "169.254.1.1"}]
    pod_ip = ip["address"].split("/")[0]

    # Container side: /32, scope-link gateway, default route, MAC as reported, forwarding off.
    links = json.loads(world.ns_ip(ns, "-j", "addr", "show", "eth0"))
    assert links[0]["address"] == doc["interfaces"][1]["mac"]
    assert "UP" in links[0]["flags"]
    addrs = [(a["local"], a["prefixlen"]) for a in links[0]["addr_info"] if a["family"] == "inet"]
    assert addrs == [(pod_ip, 32)]
    routes = world.ns_ip(ns, "route", "show")
    assert "default via 169.254.1.1 dev eth0" in routes
    assert "169.254.1.1 dev eth0" in routes and "scope link" in routes
    assert world.in_ns(ns, ["cat", "/proc/sys/net/ipv4/ip_forward"]).strip() == "0"

    # Host side: MAC, up, proxy ARP and friends, /32 route via the veth.
    host = json.loads(world.host_ip("-j", "link", "show", host_if))[0]
    assert host["address"] == "ee:ee:ee:ee:ee:ee" and "UP" in host["flags"]
    for key, want in (
        (f"net/ipv4/conf/{host_if}/proxy_arp", "1"),
        (f"net/ipv4/conf/{host_if}/forwarding", "1"),
        (f"net/ipv4/conf/{host_if}/route_localnet", "1"),
        (f"net/ipv4/neigh/{host_if}/proxy_delay", "0"),
    ):
        assert world.host_sysctl(key) == want, key
    assert f"{pod_ip} dev {host_if} " in world.host_ip("route", "show")

    # WorkloadEndpoint.
    [wep] = world.weps()
    assert wep.metadata.name == f"node1-cni-{cid}-eth0"
    assert wep.metadata.namespace == "default"
    assert wep.metadata.labels["projectcalico.org/orchestrator"] == "cni"
    spec = wep.spec
    assert (spec.orchestrator, spec.node, spec.endpoint) == ("cni", "node1", "eth0")
    assert spec.container_id == cid and spec.workload == cid
    assert spec.ip_networks == [f"{pod_ip}/32"]
    assert spec.interface_name == host_if and spec.mac == doc["interfaces"][1]["mac"]
    assert spec.profiles == ["testnet"]
    assert world.handle_ips(f"testnet.{cid}") == [pod_ip]
    # The network's profile was created: allow from members, label applied.
    profile = world.with_client(lambda c: c.get("Profile", "testnet"))
    assert profile.spec.labels_to_apply == {"testnet": ""}

    check = world.check(cid, ns, world.netconf(prevResult=doc))
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout == ""

    res = world.delete(cid, ns)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == ""
    assert world.weps() == []
    assert world.handle_ips(f"testnet.{cid}") == []
    assert world.host_ip("link", "show", host_if, check=False) == ""
    assert pod_ip not in world.host_ip("route", "show")
    # Idempotent: a second DEL, and a DEL without a netns, both succeed.
    assert world.delete(cid, ns).returncode == 0
    assert world.delete(cid, None).returncode == 0


def test_k8s_identity_naming_and_legacy_result(world: CNIWorld) -> None:
    ns = world.workload_ns()
    args = (
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=my-ns;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=c1"
    )
    conf = world.netconf(cniVersion="0.3.1", policy={"type": "k8s"})
    res = world.add("c1", ns, conf, CNI_ARGS=args)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = res.doc
    assert doc["cniVersion"] == "0.3.1"
    assert doc["ips"][0]["version"] == "4"  # pre-1.0 shape
    host_if = "cali" + hashlib.sha1(b"my-ns.web-1").hexdigest()[:11]
    assert doc["interfaces"][0]["name"] == host_if
    [wep] = world.weps()
    assert wep.metadata.name == "node1-k8s-web--1-eth0"  # dashes inside a part are doubled
    assert wep.metadata.namespace == "my-ns"
    assert wep.spec.pod == "web-1" and wep.spec.orchestrator == "k8s"
    assert wep.spec.profiles == ["kns.my-ns"]
    assert world.with_client(lambda c: len(c.list("Profile").items)) == 0  # k8s policy: none

    # CHECK needs 0.4.0+.
    check = world.check("c1", ns, conf, CNI_ARGS=args)
    assert check.returncode == 1 and check.doc["code"] == 1

    # A DEL for an older sandbox of the same pod keeps the endpoint but frees its own handle.
    old = world.delete("c0", None, conf, CNI_ARGS=args.replace("c1", "c0"))
    assert old.returncode == 0, old.stdout + old.stderr
    assert len(world.weps()) == 1
    assert world.host_ip("link", "show", host_if, check=False) != ""
    assert world.delete("c1", ns, conf, CNI_ARGS=args).returncode == 0
    assert world.weps() == []
    assert world.in_use() == 0


def test_dual_stack(world: CNIWorld) -> None:

    world.add_pool("pool6", POOL_V6)
    ns = world.workload_ns()
    conf = world.netconf(ipam={"type": "calico-ipam", "assign_ipv6": "true"})
    res = world.add("dual1", ns, conf)
    assert res.returncode == 0, res.stdout + res.stderr
    ips = {ip["address"].split("/")[1]: ip for ip in res.doc["ips"]}
    assert set(ips) == {"32", "128"}
    gw6 = ips["128"]["gateway"]
    assert gw6.startswith("fe80:")
    host_ll = world.host_ip("-6", "addr", "show", "calidual1")
    assert gw6 in host_ll
    routes6 = world.ns_ip(ns, "-6", "route", "show")
    assert f"default via {gw6} dev eth0" in routes6
    assert world.host_sysctl("net/ipv6/conf/calidual1/proxy_ndp") == "1"
    [wep] = world.weps()
    assert sorted(n.split("/")[1] for n in wep.spec.ip_networks) == ["128", "32"]
    assert world.check("dual1", ns, conf).returncode == 0
    assert world.delete("dual1", ns, conf).returncode == 0
    assert world.in_use() == 0


def test_two_workloads_reach_each_other(world: CNIWorld) -> None:
    ns_a, ns_b = world.workload_ns(), world.workload_ns()
    a = world.add("wla", ns_a)
    b = world.add("wlb", ns_b)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    ip_b = b.doc["ips"][0]["address"].split("/")[0]
    server = (
        "import socket;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
        "s.bind(('0.0.0.0',9000));s.listen();print('listening',flush=True);s.settimeout(30);"
        "c,_=s.accept();c.sendall(b'hi')"
    )
    client = (
        f"import socket;s=socket.create_connection(('{ip_b}',9000),timeout=5);print(s.recv(10))"
    )
    import subprocess

    srv = subprocess.Popen(
        ["ip", "netns", "exec", ns_b, sys.executable, "-c", server],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Connect only once the server says it listens (a fixed pause loses on a loaded machine).
        assert srv.stdout is not None and srv.stdout.readline().strip() == "listening"
        out = world.in_ns(ns_a, [sys.executable, "-c", client])
        assert "hi" in out
    finally:
        srv.wait(timeout=30)


def test_readd_same_container_reuses_address(world: CNIWorld) -> None:
    ns = world.workload_ns()
    first = world.add("again1", ns)
    assert first.returncode == 0
    world.ns_ip(ns, "link", "del", "eth0")  # the runtime lost the interface; ADD again
    second = world.add("again1", ns)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.doc["ips"] == first.doc["ips"]
    assert world.in_use() == 1
    assert world.delete("again1", ns).returncode == 0


def test_policy_setup_wait_uses_felix_status_file(world: CNIWorld) -> None:
    from calico.cni.identity import Identity
    from calico.cni.status_wait import status_path

    status_dir = world.tmp / "endpoint-status"
    status_dir.mkdir()
    ident = Identity("cni", "default", "waiter1", "waiter1", "eth0", "node1", "testnet")
    path = status_path(str(status_dir), ident)
    assert path.endswith("cni default%2Fwaiter1 eth0")
    conf = world.netconf(policy_setup_timeout_seconds=1, endpoint_status_dir=str(status_dir))
    ns = world.workload_ns()
    # No status file: ADD waits the full timeout, then succeeds anyway (upstream: a warning).
    import time

    start = time.monotonic()
    res = world.add("waiter1", ns, conf)
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - start >= 1.0
    assert "Timed out" in res.stderr
    assert world.delete("waiter1", ns, conf).returncode == 0
    # With the file present (as Felix writes it) ADD does not wait.
    with open(path, "w") as f:
        f.write('{"ifaceName":"caliwaiter1"}')
    res = world.add(
        "waiter1",
        ns,
        world.netconf(policy_setup_timeout_seconds=30, endpoint_status_dir=str(status_dir)),
    )
    assert res.returncode == 0 and "policy programmed" in res.stderr
