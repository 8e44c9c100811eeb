"""calico.cni.lean writes exactly what the typed path writes, and declines everything else.

Each equivalence test runs the same steps on two fresh local datastores, one through the lean
JSON path and one through the typed client / typed allocator, and compares every stored value
(server-chosen uids and timestamps aside).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calico.api.ipam import IPPool, IPReservation
from calico.cni import ipam_plugin, lean, wep
from calico.cni.identity import Identity, identify
from calico.cni.netconf import parse, parse_env
from calico.cni.store import Store
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.errors import UpdateConflictError
from calico.datastore.factory import open_backend
from calico.ipam import IPAMClient

NODE = "node-1"
VOLATILE = {"uid", "creationTimestamp", "affinityClaimTime", "clusterGUID", "releasedAt"}


def _client(tmp: Path, name: str, pools: tuple[str, ...] = ("10.9.0.0/24",)) -> Client:
    client = Client(open_backend(DatastoreConfig(local_path=str(tmp / f"{name}.db"))))
    for i, cidr in enumerate(pools):
        client.create(
            IPPool.model_validate({"metadata": {"name": f"p{i}"}, "spec": {"cidr": cidr}})
        )
    return client


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _dump(client: Client) -> dict[str, Any]:
    kvs = client.backend.list("/calico/").kvs
    return {kv.key: _scrub(json.loads(kv.value)) for kv in kvs}


def _conf(**ipam: Any) -> Any:
    doc = {"cniVersion": "1.0.0", "name": "net1", "type": "calico", "nodename": NODE,
           "ipam": {"type": "calico-ipam", **ipam}}  # fmt: skip
    return parse(json.dumps(doc).encode())


def _attrs(n: int) -> dict[str, str]:
    return {"node": NODE, "namespace": "default", "pod": f"pod{n}"}


def _pair(tmp: Path, pools: tuple[str, ...] = ("10.9.0.0/24",)) -> tuple[Client, Client]:
    """Two datastores where NODE already owns its first block(s), claimed the typed way."""
    a, b = _client(tmp, "lean", pools), _client(tmp, "typed", pools)
    for client in (a, b):
        v6 = any(":" in p for p in pools)
        IPAMClient(client).auto_assign(1, 1 if v6 else 0, "net1.first", _attrs(0), NODE)
    return a, b


def test_assignments_store_what_the_typed_allocator_stores(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    conf = _conf()
    for n in range(1, 6):
        handle = f"net1.Container{n}"  # upper case: the handle name is lower-cased
        got = lean.auto_assign(a.backend, conf, handle, _attrs(n), NODE, [4])
        want, _ = IPAMClient(b).auto_assign(1, 0, handle, _attrs(n), NODE)
        assert got == want
    # A release (typed on both), then the freed ordinal comes back through collect().
    for client in (a, b):
        IPAMClient(client).release_by_handle("net1.Container2")
    got = lean.auto_assign(a.backend, conf, "net1.again", _attrs(9), NODE, [4])
    want, _ = IPAMClient(b).auto_assign(1, 0, "net1.again", _attrs(9), NODE)
    assert got == want
    assert _dump(a) == _dump(b)


def test_dual_stack_and_reservations_match_typed(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, ("10.9.0.0/24", "fd09::/120"))
    for client in (a, b):
        first = IPAMClient(client).ips_by_handle("net1.first")
        nxt = [f"{ip[:-1]}{int(ip[-1]) + 1}" for ip in first]  # the next ordinal of each block
        client.create(
            IPReservation.model_validate(
                {"metadata": {"name": "r"}, "spec": {"reservedCIDRs": nxt}}
            )
        )
    conf = _conf(assign_ipv6="true")
    got = lean.auto_assign(a.backend, conf, "net1.ds", _attrs(1), NODE, [4, 6])
    v4, v6 = IPAMClient(b).auto_assign(1, 1, "net1.ds", _attrs(1), NODE)
    assert got == [*v4, *v6]
    assert _dump(a) == _dump(b)


def _revision(client: Client) -> int:
    return client.backend.current_revision()


@pytest.mark.parametrize(
    ("setup", "conf_kwargs", "why"),
    [
        (lambda c: IPAMClient(c).auto_assign(1, 0, "net1.h", _attrs(1), NODE), {}, "handle"),
        (
            lambda c: c.apply(
                IPPool.model_validate(
                    {
                        "metadata": {"name": "p0"},
                        "spec": {"cidr": "10.9.0.0/24", "nodeSelector": "zone == 'a'"},
                    }
                )
            ),
            {},
            "node selector",
        ),
        (lambda c: None, {"ipv4_pools": ["nope"]}, "requested pool"),
        (lambda c: None, {"assign_ipv6": "true"}, "IPv6"),
    ],
)
def test_declines_before_writing(tmp_path: Path, setup: Any, conf_kwargs: dict, why: str) -> None:
    a, _ = _pair(tmp_path)
    setup(a)
    before = _revision(a)
    families = [4, 6] if conf_kwargs.get("assign_ipv6") else [4]
    with pytest.raises(lean.NotLean, match=why):
        lean.auto_assign(a.backend, _conf(**conf_kwargs), "net1.h", _attrs(1), NODE, families)
    assert _revision(a) == before


def test_declines_without_an_owned_block(tmp_path: Path) -> None:
    client = _client(tmp_path, "fresh")
    before = _revision(client)
    with pytest.raises(lean.NotLean, match="no room"):
        lean.auto_assign(client.backend, _conf(), "net1.h", _attrs(1), NODE, [4])
    assert _revision(client) == before


def test_full_block_falls_back_to_a_typed_claim(tmp_path: Path) -> None:
    client = Client(open_backend(DatastoreConfig(local_path=str(tmp_path / "small.db"))))
    pool = {"metadata": {"name": "p0"}, "spec": {"cidr": "10.9.0.0/24", "blockSize": 30}}
    client.create(IPPool.model_validate(pool))
    IPAMClient(client).auto_assign(1, 0, "net1.first", _attrs(0), NODE)
    for n in range(1, 4):  # the rest of the 4-address block
        lean.auto_assign(client.backend, _conf(), f"net1.c{n}", _attrs(n), NODE, [4])
    with pytest.raises(lean.NotLean, match="no room"):
        lean.auto_assign(client.backend, _conf(), "net1.c4", _attrs(4), NODE, [4])
    ident = Identity("cni", "default", "c4", "c4", "eth0", NODE, "net1")
    env = parse_env({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c4", "CNI_NETNS": "/x",
                     "CNI_IFNAME": "eth0", "CNI_PATH": "/opt/cni/bin"})  # fmt: skip
    result = ipam_plugin.add(Store(client.backend), _conf(), env, ident)
    addr = result.ips[0].address
    assert addr.endswith("/30")
    first = IPAMClient(client).ips_by_handle("net1.first")[0]
    assert addr.split("/")[0].rsplit(".", 1)[0] == first.rsplit(".", 1)[0]  # same pool
    assert IPAMClient(client).ips_by_handle("net1.c4") == [addr.split("/")[0]]
    blocks = client.backend.list(lean.V3_PREFIX + "ipamblocks/").kvs
    assert len(blocks) == 2  # the typed allocator claimed a second block


class ConflictOnce:
    """A backend whose first block update loses a race (another host borrowed an address)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.tripped = False

    def update(self, key: str, value: str, revision: int, ttl: float | None = None) -> Any:
        if "/ipamblocks/" in key and not self.tripped:
            self.tripped = True
            raise UpdateConflictError(key, "modified concurrently")
        return self.inner.update(key, value, revision, ttl)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_conflict_after_the_handle_releases_and_redoes_typed(tmp_path: Path) -> None:
    a, _ = _pair(tmp_path)
    flaky = ConflictOnce(a.backend)
    store = Store(flaky)  # type: ignore[arg-type]
    ident = Identity("cni", "default", "c1", "c1", "eth0", NODE, "net1")
    env = parse_env({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/x",
                     "CNI_IFNAME": "eth0", "CNI_PATH": "/opt/cni/bin"})  # fmt: skip
    result = ipam_plugin.add(store, _conf(), env, ident)
    assert flaky.tripped
    addr = result.ips[0].address.split("/")[0]
    assert IPAMClient(a).ips_by_handle("net1.c1") == [addr]
    handle = json.loads(a.backend.get(lean.path("ipamhandles", "net1.c1")).value)
    assert sum(handle["spec"]["block"].values()) == 1  # the lean handle was undone, not doubled


# -- WorkloadEndpoint ----------------------------------------------------------------------


def _ident(cni_args: str, cid: str = "abc123") -> tuple[Identity, Any]:
    conf = _conf()
    env = parse_env({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": cid, "CNI_NETNS": "/x",
                     "CNI_IFNAME": "eth0", "CNI_PATH": "/opt", "CNI_ARGS": cni_args})  # fmt: skip
    return identify(conf, env, "my-node"), conf


@pytest.mark.parametrize(
    "cni_args",
    ["", "K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-5d-x2"],
)
def test_endpoint_matches_the_typed_write(tmp_path: Path, cni_args: str) -> None:
    ident, conf = _ident(cni_args)
    a, b = _client(tmp_path, "lean", ()), _client(tmp_path, "typed", ())
    nets = ["10.9.0.3/32", "fd09::3/128"]
    wep.create_or_update(
        Store(a.backend), ident, conf, nets, "cali12345678901", "aa:bb:cc:dd:ee:0f"
    )
    wep.write(b, wep.build(ident, conf, nets, "cali12345678901", "aa:bb:cc:dd:ee:0f"))
    assert _dump(a) == _dump(b)
    stored = a.get("WorkloadEndpoint", ident.wep_name, ident.namespace)  # the typed read accepts it
    assert stored.spec.container_id == "abc123"  # type: ignore[attr-defined]


def test_existing_endpoint_is_replaced_typed(tmp_path: Path) -> None:
    ident, conf = _ident("")
    a = _client(tmp_path, "lean", ())
    store = Store(a.backend)
    wep.create_or_update(store, ident, conf, ["10.9.0.3/32"], "cali1", "aa:bb:cc:dd:ee:0f")
    wep.create_or_update(store, ident, conf, ["10.9.0.4/32"], "cali1", "aa:bb:cc:dd:ee:0f")
    stored = a.get("WorkloadEndpoint", ident.wep_name, ident.namespace)
    assert stored.spec.ip_networks == ["10.9.0.4/32"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("field", "value"),
    [("mac", "not-a-mac"), ("host_ifname", "bad/name"), ("network", "Upper_Case")],
)
def test_endpoint_fields_the_model_might_refuse_go_typed(field: str, value: str) -> None:
    ident, conf = _ident("")
    mac, host_if = "aa:bb:cc:dd:ee:0f", "cali1"
    if field == "mac":
        mac = value
    elif field == "host_ifname":
        host_if = value
    else:
        conf.name = value
    with pytest.raises(lean.NotLean):
        lean.wep_doc(ident, conf, ["10.9.0.3/32"], host_if, mac)


def test_mesos_labels_go_typed() -> None:
    ident, conf = _ident("")
    conf.mesos_labels = {"app": "x"}
    with pytest.raises(lean.NotLean, match="Mesos"):
        lean.wep_doc(ident, conf, ["10.9.0.3/32"], "cali1", "aa:bb:cc:dd:ee:0f")


# -- DEL -----------------------------------------------------------------------------------


def test_release_by_handle_matches_typed(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, ("10.9.0.0/24", "fd09::/120"))
    for client in (a, b):
        for n in range(1, 4):
            IPAMClient(client).auto_assign(1, 1, f"net1.c{n}", _attrs(n), NODE)
    got = lean.release_by_handle(a.backend, "net1.c2")
    want = IPAMClient(b).release_by_handle("net1.c2")
    assert got is not None and sorted(got) == sorted(want)
    assert _dump(a) == _dump(b)
    assert lean.release_by_handle(a.backend, "net1.c2") is None  # released: the handle is gone
    # The next assignment reuses the same (cooled-down) ordinals on both sides.
    got_ips = lean.auto_assign(a.backend, _conf(assign_ipv6="true"), "net1.c9", _attrs(9), NODE,
                               [4, 6])  # fmt: skip
    v4, v6 = IPAMClient(b).auto_assign(1, 1, "net1.c9", _attrs(9), NODE)
    assert got_ips == [*v4, *v6]
    assert _dump(a) == _dump(b)


def test_release_that_would_delete_a_block_goes_typed(tmp_path: Path) -> None:
    a, _ = _pair(tmp_path)
    blocks = a.backend.list(lean.V3_PREFIX + "ipamblocks/").kvs
    doc = json.loads(blocks[0].value)
    doc["spec"].pop("affinity")  # a borrowed block nobody owns: emptying it deletes it
    a.backend.update(blocks[0].key, lean.encode(doc), blocks[0].revision)
    before = _revision(a)
    with pytest.raises(lean.NotLean, match="deleted"):
        lean.release_by_handle(a.backend, "net1.first")
    assert _revision(a) == before
    store = Store(a.backend)
    ident = Identity("cni", "default", "first", "first", "eth0", NODE, "net1")
    conf = _conf()
    assert len(ipam_plugin.delete(store, conf, ident)) == 1
    assert a.backend.list(lean.V3_PREFIX + "ipamblocks/").kvs == []


def test_endpoint_delete_matches_typed(tmp_path: Path) -> None:
    ident, conf = _ident("K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-0")
    other, _ = _ident("K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-0", cid="newer1")
    a = _client(tmp_path, "lean", ())
    store = Store(a.backend)
    assert wep.remove(store, ident) == "absent"
    wep.create_or_update(store, other, conf, ["10.9.0.3/32"], "cali1", "aa:bb:cc:dd:ee:0f")
    assert wep.remove(store, ident) == "kept"  # a newer sandbox owns it
    assert wep.remove(store, other) == "deleted"
    assert wep.remove(store, other) == "absent"


def test_uuid4_is_a_canonical_random_version_4_uuid() -> None:
    import uuid

    seen = {lean.uuid4() for _ in range(200)}
    assert len(seen) == 200
    for text in seen:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_block_metadata_is_rewritten_as_the_typed_store_does(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    for client in (a, b):  # a label on the block (written raw: the typed store never sets one)
        kv = client.backend.list(lean.V3_PREFIX + "ipamblocks/").kvs[0]
        doc = json.loads(kv.value)
        doc["metadata"]["labels"] = {"x": "y"}
        doc["spec"]["attributes"][0]["alternateOwnerAttrs"] = {"pod": "migrating"}
        client.backend.update(kv.key, lean.encode(doc), kv.revision)
    lean.auto_assign(a.backend, _conf(), "net1.m", _attrs(1), NODE, [4])
    IPAMClient(b).auto_assign(1, 0, "net1.m", _attrs(1), NODE)
    assert _dump(a) == _dump(b)
    lean.release_by_handle(a.backend, "net1.m")
    IPAMClient(b).release_by_handle("net1.m")
    assert _dump(a) == _dump(b)


def test_malformed_stored_values_go_typed_before_writing(tmp_path: Path) -> None:
    a, _ = _pair(tmp_path)
    kv = a.backend.list(lean.V3_PREFIX + "blockaffinities/").kvs[0]
    doc = json.loads(kv.value)
    del doc["spec"]["cidr"]
    a.backend.update(kv.key, lean.encode(doc), kv.revision)
    before = _revision(a)
    with pytest.raises(lean.NotLean, match="unexpected stored value"):
        lean.auto_assign(a.backend, _conf(), "net1.h", _attrs(1), NODE, [4])
    assert _revision(a) == before
    blocks = a.backend.list(lean.V3_PREFIX + "ipamblocks/").kvs
    bdoc = json.loads(blocks[0].value)
    bdoc["spec"]["attributes"] = "garbage"
    a.backend.update(blocks[0].key, lean.encode(bdoc), blocks[0].revision)
    before = _revision(a)
    with pytest.raises(lean.NotLean, match="unexpected stored value"):
        lean.release_by_handle(a.backend, "net1.first")
    assert _revision(a) == before
