"""The environment a node hands its children: the caller's, minus what only the node decides.

``calico node run`` passes its environment on (upstream variables such as
``CALICO_IPV4POOL_CIDR`` or ``FELIX_LOGSEVERITYSCREEN`` are meant to reach startup and the
services), but not the variables that choose a datastore or name per-node files: the datastore
loader prefers ``CALICO_<NAME>`` over ``<NAME>``, so a stray ``CALICO_DATASTORE_TYPE`` in the
caller's shell would otherwise override ``--datastore`` for every child, and a stray
``CALICO_CNI_DAEMON_SOCKET`` would send this node's CNI calls to another node's helper. The node
sets each of these itself, from its flags.

The Kubernetes client variables (``KUBECONFIG``, ``K8S_*``, bare or ``CALICO_``-prefixed) do
pass: the node's datastores are etcd and SQLite, chosen by ``DATASTORE_TYPE``, so these never
select one, and confd needs them as in upstream's calico-node pod (whose environment reaches
every process) to read BGP password Secrets (design/node-run.md "run").
"""

from __future__ import annotations

from collections.abc import Mapping

# Datastore selection (calico.datastore.config reads each bare and with a CALICO_ prefix).
_DATASTORE_NAMES = (
    "DATASTORE_TYPE",
    "DATASTORE_PATH",
    "ETCD_ENDPOINTS",
    "ETCD_AUTHORITY",
    "ETCD_SCHEME",
    "ETCD_KEY_FILE",
    "ETCD_CERT_FILE",
    "ETCD_CA_CERT_FILE",
    "ETCD_DISCOVERY_SRV",
    "ETCD_USERNAME",
    "ETCD_PASSWORD",
    "USE_POD_CIDR",
    "API_GROUP",
)
# Felix's own spellings of the same, and the per-node paths and identity the node sets.
_NODE_OWNED = (
    "FELIX_DATASTORETYPE",
    "FELIX_CALICODATASTOREPATH",
    "FELIX_FELIXHOSTNAME",
    "FELIX_ENDPOINTSTATUSPATHPREFIX",
    "FELIX_MTUFILEPATH",
    "FELIX_HEALTHHOST",
    "FELIX_HEALTHPORT",
    "CALICO_NODENAME_FILE",
    "CALICO_NETWORKING_BACKEND",
    "CALICO_CNI_DAEMON_SOCKET",
    "CALICO_LOG_DIR",
)
_FELIX_ETCD_PREFIX = "FELIX_ETCD"

OWNED_NAMES: frozenset[str] = frozenset(
    (*_DATASTORE_NAMES, *(f"CALICO_{n}" for n in _DATASTORE_NAMES), *_NODE_OWNED)
)


def is_node_owned(name: str) -> bool:
    """True for a variable only the node's flags may set (case-insensitive, as loaders are)."""
    upper = name.upper()
    return upper in OWNED_NAMES or upper.startswith(_FELIX_ETCD_PREFIX)


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the node-owned variables."""
    return {k: v for k, v in environ.items() if not is_node_owned(k)}
