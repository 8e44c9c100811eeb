"""What one cluster is made of: names, addresses and directories, saved as ``cluster.json``.

Everything a cluster creates is named from its ``name`` (network namespaces ``<name>-lan``,
``<name>-world``, ``<name>-node<i>``, pod sandboxes ``<name>-<pod>``) and lives under its
``root`` directory (etcd's data, each node's state/log/CNI dirs), so ``down`` can find and
remove all of it from the saved spec alone, even after the ``up`` process is gone. Addresses
are private to the cluster's namespaces, so two clusters never collide on them.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from calico.node.errors import NodeError

# Node i's eth0 lives on subnet SUBNETS[k]: .1 / ::1 is the lan namespace's router address.
SUBNETS = (("172.30.0", "fd30:0:0:0"), ("172.30.1", "fd30:0:0:1"))
HOST_OFFSET = 10  # node i gets .<10+i>
ETCD_PORT = 2379  # in the lan namespace only, so no other process on the machine competes
WORLD_NET = "198.51.100"  # TEST-NET-2: the "internet" namespace, outside every pool
IPV4_POOL = "10.244.0.0/16"
IPV6_POOL = "fd00:244::/48"
DATASTORES = ("etcdv3", "local")
SPEC_FILE = "cluster.json"
MAX_NODES = 50
MAX_NAME = 20  # namespace names are free-form, but interface-style names stay readable


@dataclass(frozen=True)
class NodeSpec:
    """One node: its namespace, uplink addresses and per-node directories."""

    index: int
    name: str
    netns: str
    ip: str  # CIDR on eth0
    ip6: str
    gateway: str
    gateway6: str
    root: str

    @property
    def address(self) -> str:
        return self.ip.split("/")[0]

    @property
    def address6(self) -> str:
        return self.ip6.split("/")[0]

    @property
    def lan_ifname(self) -> str:
        """The bridge port for this node, inside the lan namespace."""
        return f"n{self.index}"

    @property
    def state_dir(self) -> Path:
        return Path(self.root) / "state"

    @property
    def log_dir(self) -> Path:
        return Path(self.root) / "log"

    @property
    def cni_conf_dir(self) -> Path:
        return Path(self.root) / "net.d"

    @property
    def cni_bin_dir(self) -> Path:
        return Path(self.root) / "cni-bin"

    @property
    def output_file(self) -> Path:
        """What ``calico node run`` prints."""
        return Path(self.root) / "node-run.out"


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    root: str
    datastore: str
    nodes: tuple[NodeSpec, ...]
    ipv4_pool: str = IPV4_POOL
    ipv6_pool: str = IPV6_POOL
    pods: tuple[str, ...] = field(default=())  # sandbox netns names made by pods.add_pod
    typha: bool = False  # nodes sync through one Typha in the lan namespace (cluster.typha)

    @property
    def lan_netns(self) -> str:
        return f"{self.name}-lan"

    @property
    def world_netns(self) -> str:
        return f"{self.name}-world"

    @property
    def router_ip(self) -> str:
        return f"{SUBNETS[0][0]}.1"

    @property
    def world_ip(self) -> str:
        return f"{WORLD_NET}.1"

    @property
    def world_router_ip(self) -> str:
        return f"{WORLD_NET}.254"

    @property
    def etcd_endpoint(self) -> str:
        return f"http://{self.router_ip}:{ETCD_PORT}"

    @property
    def etcd_dir(self) -> Path:
        return Path(self.root) / "etcd"

    @property
    def local_datastore(self) -> Path:
        return Path(self.root) / "calico.db"

    @property
    def calicoctl_config(self) -> Path:
        return Path(self.root) / "calicoctl.cfg"

    @property
    def spec_file(self) -> Path:
        return Path(self.root) / SPEC_FILE

    def node(self, name_or_index: str | int) -> NodeSpec:
        for n in self.nodes:
            if name_or_index in (n.name, n.index):
                return n
        raise NodeError(f"cluster {self.name} has no node {name_or_index!r}")

    def datastore_args(self) -> list[str]:
        """``calico node run``'s datastore flags for this cluster."""
        if self.datastore == "etcdv3":
            return ["--datastore", "etcdv3", "--etcd-endpoints", self.etcd_endpoint]
        return ["--datastore", "local", "--datastore-path", str(self.local_datastore)]

    def sandbox(self, pod: str) -> str:
        return f"{self.name}-{pod}"

    def with_pod(self, netns: str) -> ClusterSpec:
        if netns in self.pods:
            return self
        return ClusterSpec(**{**self._fields(), "pods": (*self.pods, netns)})

    def _fields(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def build(
    name: str,
    root: str | Path,
    count: int = 3,
    datastore: str = "etcdv3",
    second_subnet: tuple[int, ...] = (),
    typha: bool = False,
) -> ClusterSpec:
    """A cluster of ``count`` nodes; those in ``second_subnet`` (1-based) sit on another
    subnet of the same bridge, reached through the router (so CrossSubnet pools encapsulate
    to them and route directly between the others)."""
    if not name or len(name) > MAX_NAME or not all(c.isalnum() or c == "-" for c in name):
        raise NodeError(
            f"invalid cluster name {name!r}: 1-{MAX_NAME} letters, digits or '-' characters"
        )
    if not 1 <= count <= MAX_NODES:
        raise NodeError(f"a cluster has 1 to {MAX_NODES} nodes, not {count}")
    if datastore not in DATASTORES:
        raise NodeError(f"unknown datastore {datastore!r}: expected etcdv3 or local")
    bad = [i for i in second_subnet if not 1 <= i <= count]
    if bad:
        raise NodeError(f"no node {bad[0]} in a {count}-node cluster")
    root = Path(root).absolute()
    nodes = []
    for i in range(1, count + 1):
        v4, v6 = SUBNETS[1 if i in second_subnet else 0]
        host = HOST_OFFSET + i
        nodes.append(
            NodeSpec(
                index=i,
                name=f"node{i}",
                netns=f"{name}-node{i}",
                ip=f"{v4}.{host}/24",
                ip6=f"{v6}::{host}/64",
                gateway=f"{v4}.1",
                gateway6=f"{v6}::1",
                root=str(root / f"node{i}"),
            )
        )
    return ClusterSpec(
        name=name, root=str(root), datastore=datastore, nodes=tuple(nodes), typha=typha
    )


def save(spec: ClusterSpec) -> None:
    Path(spec.root).mkdir(parents=True, exist_ok=True)
    doc = asdict(spec)
    tmp = spec.spec_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(spec.spec_file)


def load(root: str | Path) -> ClusterSpec | None:
    """The spec saved under ``root`` (None: no cluster there)."""
    path = Path(root) / SPEC_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        nodes = tuple(NodeSpec(**n) for n in doc.pop("nodes"))
        doc["pods"] = tuple(doc.get("pods") or ())
        return ClusterSpec(**doc, nodes=nodes)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise NodeError(f"cannot read the cluster spec {path}: {exc}") from None


def same_subnet(a: NodeSpec, b: NodeSpec) -> bool:
    return ipaddress.ip_interface(a.ip).network == ipaddress.ip_interface(b.ip).network
