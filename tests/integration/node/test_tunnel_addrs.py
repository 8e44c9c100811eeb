"""``allocate-tunnel-addrs`` against the embedded datastore and a real etcd: one-shot passes,
the daemon reacting to pool changes through the tunnel-IP-allocation syncer, and the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from calico.api.cluster import Node
from calico.api.ipam import IPPool, IPPoolSpec
from calico.datastore.client import Client
from calico.datastore.errors import ResourceDoesNotExistError
from calico.ipam import IPAMClient
from calico.model.vtep import default_vtep_mac
from calico.node.errors import NodeError
from calico.node.tunnel_addrs import reconcile, run_daemon

NODE = "tnode1"


@pytest.fixture(scope="module")
def etcd() -> Iterator[object]:
    from calico.datastore.etcd.server import ETCD_BINARY, EtcdServer

    if shutil.which(ETCD_BINARY) is None:
        pytest.skip("no etcd binary")
    server = EtcdServer()  # our own: these tests write real /calico keys
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(params=["local", "etcdv3"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Datastore environment, as node-services gets it."""
    if request.param == "local":
        return {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "c.db")}
    server = request.getfixturevalue("etcd")
    env = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": server.endpoints}  # type: ignore
    with open_client(env) as client:  # fresh keyspace per test
        for kv in client.backend.list("/calico/").kvs:
            client.backend.delete(kv.key)
    return env


class open_client:  # a context manager used like open()
    def __init__(self, env: dict[str, str]) -> None:
        from calico.datastore.config import from_env
        from calico.datastore.factory import open_backend

        self.client = Client(open_backend(from_env(env)))

    def __enter__(self) -> Client:
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.backend.close()


@pytest.fixture
def client(env: dict[str, str]) -> Iterator[Client]:
    with open_client(env) as c:
        node = Node()
        node.metadata.name = NODE
        node.metadata.labels = {"zone": "a"}
        c.create(node)
        yield c


def add_pool(client: Client, name: str, cidr: str, **spec: object) -> None:
    pool = IPPool(
        spec=IPPoolSpec.model_validate(
            {"cidr": cidr, "blockSize": 122 if ":" in cidr else 26, **spec}
        )
    )
    pool.metadata.name = name
    client.create(pool)


def set_pool(client: Client, name: str, **spec: object) -> None:
    pool = client.get(IPPool, name)
    data = pool.spec.model_dump(by_alias=True)
    data.update(spec)
    pool.spec = IPPoolSpec.model_validate(data)
    client.update(pool)


def node(client: Client) -> Node:
    return client.get(Node, NODE)  # type: ignore[return-value]


def test_vxlan_pools_give_v4_and_v6_addresses_with_upstream_handles(client):
    add_pool(client, "v4", "10.244.0.0/16", vxlanMode="Always")
    add_pool(client, "v6", "fd10::/48", vxlanMode="CrossSubnet")
    add_pool(client, "plain", "10.50.0.0/16")
    n = reconcile(client, NODE)
    v4, v6 = n.spec.ipv4_vxlan_tunnel_addr, n.spec.ipv6_vxlan_tunnel_addr
    assert v4 is not None and v4.startswith("10.244.")
    assert v6 is not None and v6.startswith("fd10:")
    assert n.spec.vxlan_tunnel_mac_addr == default_vtep_mac(NODE, 4)
    assert n.spec.vxlan_tunnel_mac_addr_v6 == default_vtep_mac(NODE, 6)
    assert n.spec.bgp is None  # no IPIP pool: no IPIP address
    ipam = IPAMClient(client)
    assert ipam.get_assignment_attributes(v4) == (
        f"vxlan-tunnel-addr-{NODE}",
        {"node": NODE, "type": "vxlanTunnelAddress"},
    )
    assert ipam.get_assignment_attributes(v6) == (
        f"vxlan-v6-tunnel-addr-{NODE}",
        {"node": NODE, "type": "vxlanV6TunnelAddress"},
    )
    assert node(client).spec.ipv4_vxlan_tunnel_addr == v4  # written to the datastore
    again = reconcile(client, NODE)
    assert again.spec.ipv4_vxlan_tunnel_addr == v4  # stable
    assert again.metadata.resource_version == node(client).metadata.resource_version


def test_ipip_pool_gives_an_ipip_address(client):
    add_pool(client, "ipip", "10.66.0.0/16", ipipMode="Always")
    n = reconcile(client, NODE)
    assert n.spec.bgp is not None and n.spec.bgp.ipv4_ipip_tunnel_addr.startswith("10.66.")
    assert n.spec.ipv4_vxlan_tunnel_addr is None
    set_pool(client, "ipip", ipipMode="Never")
    assert reconcile(client, NODE).spec.bgp is None  # emptied spec.bgp is removed


def test_pool_going_away_releases_address_and_mac(client):
    add_pool(client, "v4", "10.244.0.0/16", vxlanMode="Always")
    addr = reconcile(client, NODE).spec.ipv4_vxlan_tunnel_addr
    set_pool(client, "v4", vxlanMode="Never")
    n = reconcile(client, NODE)
    assert n.spec.ipv4_vxlan_tunnel_addr is None
    assert n.spec.vxlan_tunnel_mac_addr is None
    ipam = IPAMClient(client)
    assert ipam.release_by_handle(f"vxlan-tunnel-addr-{NODE}") == []
    with pytest.raises(ResourceDoesNotExistError):
        ipam.get_assignment_attributes(addr)


def test_user_set_mac_is_kept(client):
    n = node(client)
    n.spec.vxlan_tunnel_mac_addr = "66:aa:bb:cc:dd:ee"
    client.update(n)
    add_pool(client, "v4", "10.244.0.0/16", vxlanMode="Always")
    assert reconcile(client, NODE).spec.vxlan_tunnel_mac_addr == "66:aa:bb:cc:dd:ee"
    set_pool(client, "v4", vxlanMode="Never")
    assert reconcile(client, NODE).spec.vxlan_tunnel_mac_addr == "66:aa:bb:cc:dd:ee"


def test_ineligible_pools_are_skipped(client):
    add_pool(client, "other-zone", "10.1.0.0/16", vxlanMode="Always", nodeSelector="zone == 'b'")
    add_pool(client, "off", "10.2.0.0/16", vxlanMode="Always", disabled=True)
    add_pool(client, "wl-only", "10.3.0.0/16", vxlanMode="Always", allowedUses=["Workload"])
    assert reconcile(client, NODE).spec.ipv4_vxlan_tunnel_addr is None
    add_pool(client, "mine", "10.4.0.0/16", vxlanMode="Always", nodeSelector="zone == 'a'")
    assert reconcile(client, NODE).spec.ipv4_vxlan_tunnel_addr.startswith("10.4.")


def test_address_outside_eligible_pools_is_replaced(client):
    add_pool(client, "old", "10.1.0.0/16", vxlanMode="Always")
    first = reconcile(client, NODE).spec.ipv4_vxlan_tunnel_addr
    add_pool(client, "new", "10.2.0.0/16", vxlanMode="Always")
    set_pool(client, "old", vxlanMode="Never")
    second = reconcile(client, NODE).spec.ipv4_vxlan_tunnel_addr
    assert first.startswith("10.1.") and second.startswith("10.2.")
    assert IPAMClient(client).ips_by_handle(f"vxlan-tunnel-addr-{NODE}") == [second]


def test_legacy_address_is_reclaimed_with_handle_and_workload_address_is_not_taken(client):
    add_pool(client, "v4", "10.244.0.0/16", vxlanMode="Always")
    ipam = IPAMClient(client)
    ipam.assign_ip("10.244.0.9", None, None, NODE)  # legacy: no handle, no attributes
    n = node(client)
    n.spec.ipv4_vxlan_tunnel_addr = "10.244.0.9"
    client.update(n)
    assert reconcile(client, NODE).spec.ipv4_vxlan_tunnel_addr == "10.244.0.9"
    assert ipam.get_assignment_attributes("10.244.0.9")[0] == f"vxlan-tunnel-addr-{NODE}"
    ipam.assign_ip("10.244.0.20", "k8s-pod-x", {}, NODE)  # a workload's address
    n = node(client)
    n.spec.ipv4_vxlan_tunnel_addr = "10.244.0.20"
    client.update(n)
    replaced = reconcile(client, NODE).spec.ipv4_vxlan_tunnel_addr
    assert replaced != "10.244.0.20"
    assert ipam.get_assignment_attributes("10.244.0.20")[0] == "k8s-pod-x"


def test_missing_node_is_a_clear_error(env):
    with open_client(env) as c, pytest.raises(NodeError, match="node ghost does not exist"):
        reconcile(c, "ghost")


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_daemon_follows_pool_changes(client, env):
    stop = threading.Event()
    errors: list[BaseException] = []

    def daemon() -> None:
        with open_client(env) as own:
            try:
                run_daemon(own, NODE, stop)
            except BaseException as e:  # surfaced by the assertion below
                errors.append(e)

    thread = threading.Thread(target=daemon, daemon=True)
    thread.start()
    try:
        add_pool(client, "v4", "10.244.0.0/16", vxlanMode="Always")
        wait_for(lambda: node(client).spec.ipv4_vxlan_tunnel_addr is not None)
        client.delete(IPPool, "v4")
        wait_for(lambda: node(client).spec.ipv4_vxlan_tunnel_addr is None)
        assert not errors
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_cli_run_once_and_bad_node(client, env, calico_bin):
    add_pool(client, "v4", "10.244.0.0/16", vxlanMode="Always")
    base = {**os.environ, **env, "NODENAME": NODE}
    for key in ("CALICO_NODENAME_FILE",):
        base.pop(key, None)
    proc = subprocess.run(
        [calico_bin, "component", "node", "allocate-tunnel-addrs", "--run-once"],
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert node(client).spec.ipv4_vxlan_tunnel_addr.startswith("10.244.")
    proc = subprocess.run(
        [calico_bin, "component", "node", "allocate-tunnel-addrs", "--run-once"],
        env={**base, "NODENAME": f"ghost-{uuid.uuid4().hex[:6]}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "Error: node ghost-" in proc.stderr and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_node_services_runs_the_allocator_as_a_daemon(client, env, calico_bin):
    """``calico component node node-services`` (what runit runs) allocates and releases."""
    base = {**os.environ, **env, "NODENAME": NODE, "CALICO_NETWORKING_BACKEND": "none"}
    base.pop("CALICO_NODENAME_FILE", None)
    proc = subprocess.Popen(
        [calico_bin, "component", "node", "node-services"],
        env=base,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        add_pool(client, "v6", "fd10::/48", vxlanMode="Always")
        wait_for(lambda: node(client).spec.ipv6_vxlan_tunnel_addr is not None, timeout=20)
        assert node(client).spec.vxlan_tunnel_mac_addr_v6 == default_vtep_mac(NODE, 6)
        client.delete(IPPool, "v6")
        wait_for(lambda: node(client).spec.ipv6_vxlan_tunnel_addr is None, timeout=20)
        assert proc.poll() is None
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "Traceback" not in out
