"""Who a CNI call is for: orchestrator, namespace, workload, node, and the names derived from them.

Kubernetes pods are named by ``K8S_POD_NAMESPACE``/``K8S_POD_NAME`` in CNI_ARGS (orchestrator
``k8s``); anything else is identified by its container ID (orchestrator ``cni``). The host veth
name depends only on the workload, so a pod's restarted sandbox reuses its host interface name.
"""

from __future__ import annotations

import hashlib
import logging
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from calico.cni.errors import INVALID_ENV, INVALID_NETCONF, CNIError
from calico.cni.netconf import CNIEnv, NetConf

log = logging.getLogger(__name__)

K8S = "k8s"
CNI = "cni"
DEFAULT_NAMESPACE = "default"
DEFAULT_VETH_PREFIX = "cali"
_RESOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class Identity:
    orchestrator: str
    namespace: str
    workload: str  # pod name (k8s) or container ID (cni)
    container_id: str
    endpoint: str  # CNI_IFNAME
    node: str
    network: str  # netconf name

    @property
    def wep_name(self) -> str:
        from calico.model.names import wep_name

        return wep_name(self.node, self.orchestrator, self.workload, self.endpoint)

    @property
    def workload_id(self) -> str:
        """Felix's WorkloadEndpointID.workload_id (``<namespace>/<workload>``)."""
        return f"{self.namespace}/{self.workload}"

    @property
    def handle_id(self) -> str:
        return ipam_handle_id(self.network, self.container_id)

    @property
    def workload_handle_id(self) -> str:
        return f"{self.namespace}.{self.workload}"


def ipam_handle_id(network: str, container_id: str) -> str:
    return f"{network}.{container_id}"


def veth_prefix(env: Mapping[str, str]) -> str:
    """First entry of FELIX_INTERFACEPREFIX (as Felix reads it), else ``cali``."""
    value = env.get("FELIX_INTERFACEPREFIX", "")
    first = value.split(",")[0].strip()
    return first or DEFAULT_VETH_PREFIX


def host_veth_name(ident: Identity, prefix: str = DEFAULT_VETH_PREFIX) -> str:
    """``cali`` + 11 hex of SHA-1(``<ns>.<pod>``) for pods; ``cali`` + 11 chars of the ID else."""
    if ident.orchestrator == K8S:
        digest = hashlib.sha1(f"{ident.namespace}.{ident.workload}".encode()).hexdigest()
        return (prefix + digest[:11])[:15]
    return (prefix + ident.container_id[:11])[:15]


def determine_nodename(conf: NetConf) -> str:
    """``nodename``, else the nodename file, else the hostname (upstream's order).

    The nodename file is required (it proves calico/node ran on this host) unless the netconf
    names the node itself or sets ``nodename_file_optional``.
    """
    if conf.nodename:
        return conf.nodename
    try:
        with open(conf.nodename_file, encoding="utf-8") as f:
            name = f.read().strip()
    except FileNotFoundError:
        if not conf.nodename_file_optional:
            raise CNIError(
                INVALID_NETCONF,
                f"stat {conf.nodename_file}: no such file or directory",
                "check that the calico/node container is running and has mounted /var/lib/calico/",
            ) from None
        name = ""
    except OSError as exc:
        raise CNIError(INVALID_NETCONF, f"cannot read {conf.nodename_file}", str(exc)) from None
    return name or socket.gethostname().lower()


def identify(conf: NetConf, env: CNIEnv, node: str) -> Identity:
    ns, pod = env.k8s_namespace, env.k8s_pod
    if ns and pod:
        ident = Identity(K8S, ns, pod, env.container_id, env.ifname, node, conf.name)
    else:
        ident = Identity(
            CNI, DEFAULT_NAMESPACE, env.container_id, env.container_id, env.ifname, node, conf.name
        )
    try:
        name = ident.wep_name
    except ValueError as exc:
        raise CNIError(INVALID_ENV, "cannot name the workload endpoint", str(exc)) from None
    if len(name) > 253 or not _RESOURCE_NAME.match(name):
        # Caught here, before any address is assigned, rather than by the datastore later.
        raise CNIError(
            INVALID_ENV,
            "cannot name the workload endpoint",
            f"{name!r} is not a valid resource name (lower-case DNS-1123 subdomain)",
        )
    return ident


NAMESPACE_LABEL = "projectcalico.org/namespace"
ORCHESTRATOR_LABEL = "projectcalico.org/orchestrator"


def profiles_for(ident: Identity, conf: NetConf) -> list[str]:
    """The endpoint's profiles: k8s policy gives the namespace profile; otherwise one profile
    named after the network."""
    if ident.orchestrator == K8S and conf.policy_type == "k8s":
        return [f"kns.{ident.namespace}"]
    return [conf.name]
