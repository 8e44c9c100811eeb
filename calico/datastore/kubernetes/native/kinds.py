"""The native kinds' read (and, for Nodes, write) paths behind KubernetesBackend.

Each kind says which collections hold it, how one object becomes zero or more (key, v3 value)
pairs, how to GET one name, and refuses the writes upstream refuses with its wording
("operation Create is not supported on WorkloadEndpoint(ns/name)").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from calico.datastore.backend import KVPair
from calico.datastore.errors import (
    DatastoreError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
)
from calico.datastore.kubernetes.errors import KubeAPIError, translate
from calico.datastore.kubernetes.native import nodes, pods, profiles
from calico.datastore.kubernetes.native.clusternetworkpolicy import (
    cluster_network_policy_to_calico,
)
from calico.datastore.kubernetes.native.networkpolicy import k8s_network_policy_to_calico
from calico.datastore.kubernetes.rest import STRATEGIC_MERGE, Rest
from calico.model.resources import RESOURCE_PREFIX


class OperationNotSupportedError(DatastoreError):
    def __init__(self, op: str, what: str) -> None:
        super().__init__(f"operation {op} is not supported on {what}")


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def _rv(obj: dict[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("resourceVersion") or 0)


Convert = Callable[[dict[str, Any]], list[KVPair]]


@dataclass
class Collection:
    path: str  # list/watch path (all namespaces or one)
    convert: Convert


class NativeKind:
    kind = ""
    plural = ""
    namespaced = False

    def __init__(self, rest: Rest) -> None:
        self.rest = rest

    def key(self, name: str, namespace: str = "") -> str:
        ns = f"{namespace}/" if self.namespaced else ""
        return f"{RESOURCE_PREFIX}{self.plural}/{ns}{name}"

    def describe(self, namespace: str, name: str) -> str:
        return f"{self.kind}({namespace + '/' if namespace else ''}{name})"

    def _get(self, key: str, path: str) -> dict[str, Any]:
        try:
            return self.rest.request("GET", path)
        except KubeAPIError as exc:
            raise translate(exc, key) from None

    def collections(self, namespace: str) -> list[Collection]:
        raise NotImplementedError

    def extra(self) -> list[KVPair]:
        """Synthetic items every full list includes (the default-allow profile)."""
        return []

    def get(self, namespace: str, name: str) -> KVPair:
        raise NotImplementedError

    def create(self, namespace: str, name: str, value: dict[str, Any]) -> KVPair:
        raise OperationNotSupportedError("Create", self.describe(namespace, name))

    def update(self, namespace: str, name: str, value: dict[str, Any], revision: int) -> KVPair:
        raise OperationNotSupportedError("Update", self.describe(namespace, name))

    def delete(self, namespace: str, name: str, revision: int | None) -> KVPair:
        raise OperationNotSupportedError("Delete", self.describe(namespace, name))


class NodeKind(NativeKind):
    kind, plural = "Node", "nodes"

    def __init__(self, rest: Rest, use_pod_cidr: bool = False) -> None:
        super().__init__(rest)
        self.use_pod_cidr = use_pod_cidr  # host-local IPAM: tunnel addresses from the podCIDR

    def _kv(self, node: dict[str, Any]) -> list[KVPair]:
        value = nodes.k8s_node_to_calico(node, self.use_pod_cidr)
        return [KVPair(self.key(value["metadata"]["name"]), _dump(value), _rv(node))]

    def collections(self, namespace: str) -> list[Collection]:
        return [Collection("/api/v1/nodes", self._kv)]

    def get(self, namespace: str, name: str) -> KVPair:
        return self._kv(self._get(self.key(name), f"/api/v1/nodes/{name}"))[0]

    def create(self, namespace: str, name: str, value: dict[str, Any]) -> KVPair:
        """Nodes come from Kubernetes: "already exists" when it does (so apply updates it),
        "does not exist" when it does not (a non-Kubernetes node cannot be stored)."""
        key = self.key(name)
        self._get(key, f"/api/v1/nodes/{name}")
        raise ResourceAlreadyExistsError(key)

    def update(self, namespace: str, name: str, value: dict[str, Any], revision: int) -> KVPair:
        """GET + merge + PUT ``nodes/<n>/status``: the fresh RV, no CAS on the caller's."""
        key = self.key(name)
        current = self._get(key, f"/api/v1/nodes/{name}")
        merged = nodes.merge_calico_into_k8s(current, value)
        try:
            out = self.rest.request("PUT", f"/api/v1/nodes/{name}/status", body=merged)
        except KubeAPIError as exc:
            raise translate(exc, key) from None
        return self._kv(out)[0]


class WorkloadEndpointKind(NativeKind):
    """Read-only, except in the CNI plugin's patch mode (``cni_patch_mode``): create/update
    patch the pod's ``cni.projectcalico.org/*`` annotations, delete blanks its IPs (keeping
    the containerID) with the pod's resourceVersion and uid as preconditions."""

    kind, plural, namespaced = "WorkloadEndpoint", "workloadendpoints", True

    def __init__(self, rest: Rest, cni_patch_mode: bool = False) -> None:
        super().__init__(rest)
        self.cni_patch_mode = cni_patch_mode

    def _patch(self, key: str, namespace: str, pod: str, patch: dict[str, Any]) -> KVPair:
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/status"
        try:
            out = self.rest.request("PATCH", path, body=patch, content_type=STRATEGIC_MERGE)
        except KubeAPIError as exc:
            raise translate(exc, key) from None
        kvs = self._kv(out)
        if not kvs:
            raise ResourceDoesNotExistError(key)
        return kvs[0]

    def _pod_name(self, key: str, name: str) -> str:
        parsed = pods.parse_wep_name(name)
        if parsed is None:
            raise ResourceDoesNotExistError(key)
        return parsed[1]

    def create(self, namespace: str, name: str, value: dict[str, Any]) -> KVPair:
        if not self.cni_patch_mode:
            return super().create(namespace, name, value)
        key = self.key(name, namespace)
        spec = value.get("spec") or {}
        nets = list(spec.get("ipNetworks") or [])
        annotations: dict[str, str] = {}
        if nets:
            annotations[pods.POD_IP] = nets[0]
            annotations[pods.POD_IPS] = ",".join(nets)
        if spec.get("containerID"):
            annotations[pods.CONTAINER_ID] = spec["containerID"]
        patch: dict[str, Any] = {"metadata": {"annotations": annotations} if annotations else {}}
        return self._patch(key, namespace, self._pod_name(key, name), patch)

    def update(self, namespace: str, name: str, value: dict[str, Any], revision: int) -> KVPair:
        if not self.cni_patch_mode:
            return super().update(namespace, name, value, revision)
        return self.create(namespace, name, value)

    def delete(self, namespace: str, name: str, revision: int | None) -> KVPair:
        if not self.cni_patch_mode:
            return super().delete(namespace, name, revision)
        key = self.key(name, namespace)
        pod_name = self._pod_name(key, name)
        pod = self._get(key, f"/api/v1/namespaces/{namespace}/pods/{pod_name}")
        current = [kv for kv in self._kv(pod) if kv.key == key]
        if not current:
            raise ResourceDoesNotExistError(key)
        meta = pod.get("metadata") or {}
        rv = str(revision) if revision is not None else meta.get("resourceVersion", "")
        patch = {
            "metadata": {
                "annotations": {pods.POD_IP: "", pods.POD_IPS: ""},
                "resourceVersion": rv,
                "uid": meta.get("uid", ""),
            }
        }
        self._patch(key, namespace, pod_name, patch)
        return current[0]

    def _kv(self, pod: dict[str, Any]) -> list[KVPair]:
        value = pods.pod_to_wep(pod)
        if value is None:
            return []
        meta = value["metadata"]
        return [KVPair(self.key(meta["name"], meta["namespace"]), _dump(value), _rv(pod))]

    def collections(self, namespace: str) -> list[Collection]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return [Collection(path, self._kv)]

    def get(self, namespace: str, name: str) -> KVPair:
        key = self.key(name, namespace)
        parsed = pods.parse_wep_name(name)
        if parsed is None:
            raise ResourceDoesNotExistError(key)
        pod = self._get(key, f"/api/v1/namespaces/{namespace}/pods/{parsed[1]}")
        kvs = [kv for kv in self._kv(pod) if kv.key == key]
        if not kvs:
            raise ResourceDoesNotExistError(key)
        return kvs[0]


class ProfileKind(NativeKind):
    kind, plural = "Profile", "profiles"

    def _ns(self, ns: dict[str, Any]) -> list[KVPair]:
        value = profiles.namespace_profile(ns)
        return [KVPair(self.key(value["metadata"]["name"]), _dump(value), _rv(ns))]

    def _sa(self, sa: dict[str, Any]) -> list[KVPair]:
        value = profiles.service_account_profile(sa)
        return [KVPair(self.key(value["metadata"]["name"]), _dump(value), _rv(sa))]

    def collections(self, namespace: str) -> list[Collection]:
        return [
            Collection("/api/v1/namespaces", self._ns),
            Collection("/api/v1/serviceaccounts", self._sa),
        ]

    def extra(self) -> list[KVPair]:
        value = profiles.default_allow_profile()
        return [
            KVPair(self.key(profiles.DEFAULT_ALLOW), _dump(value), profiles.DEFAULT_ALLOW_REVISION)
        ]

    def get(self, namespace: str, name: str) -> KVPair:
        key = self.key(name)
        parsed = profiles.parse_profile_name(name)
        if parsed is None:
            raise ResourceDoesNotExistError(key)
        what, ns, sa = parsed
        if what == "default":
            return self.extra()[0]
        if what == "ns":
            return self._ns(self._get(key, f"/api/v1/namespaces/{ns}"))[0]
        return self._sa(self._get(key, f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}"))[0]


class KubernetesNetworkPolicyKind(NativeKind):
    kind, plural, namespaced = "KubernetesNetworkPolicy", "kubernetesnetworkpolicies", True

    def _kv(self, np: dict[str, Any]) -> list[KVPair]:
        value = k8s_network_policy_to_calico(np)
        meta = value["metadata"]
        return [KVPair(self.key(meta["name"], meta["namespace"]), _dump(value), _rv(np))]

    def collections(self, namespace: str) -> list[Collection]:
        ns = f"namespaces/{namespace}/" if namespace else ""
        return [Collection(f"/apis/networking.k8s.io/v1/{ns}networkpolicies", self._kv)]

    def get(self, namespace: str, name: str) -> KVPair:
        key = self.key(name, namespace)
        path = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/{name}"
        return self._kv(self._get(key, path))[0]


class KubernetesClusterNetworkPolicyKind(NativeKind):
    """A tombstone (unsupported tier or subject) is a KVPair with an empty value: lists skip
    it and watches turn it into a delete, so a policy that became invalid goes away."""

    kind, plural = "KubernetesClusterNetworkPolicy", "kubernetesclusternetworkpolicies"
    PATH = "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies"

    def _kv(self, cnp: dict[str, Any]) -> list[KVPair]:
        value = cluster_network_policy_to_calico(cnp)
        name = (cnp.get("metadata") or {}).get("name", "")
        return [KVPair(self.key(name), "" if value is None else _dump(value), _rv(cnp))]

    def collections(self, namespace: str) -> list[Collection]:
        return [Collection(self.PATH, self._kv)]

    def get(self, namespace: str, name: str) -> KVPair:
        key = self.key(name)
        kv = self._kv(self._get(key, f"{self.PATH}/{name}"))[0]
        if not kv.value:
            raise ResourceDoesNotExistError(key)
        return kv


class RawKind(NativeKind):
    """A native object passed through as the API returns it (Services, EndpointSlices: the
    Felix syncer's service-index input, read-only as upstream)."""

    namespaced = True
    api = ""  # "/api/v1" or "/apis/<group>/<version>"
    resource = ""

    def _kv(self, obj: dict[str, Any]) -> list[KVPair]:
        meta = obj.get("metadata") or {}
        return [
            KVPair(self.key(meta.get("name", ""), meta.get("namespace", "")), _dump(obj), _rv(obj))
        ]

    def collections(self, namespace: str) -> list[Collection]:
        ns = f"namespaces/{namespace}/" if namespace else ""
        return [Collection(f"{self.api}/{ns}{self.resource}", self._kv)]

    def get(self, namespace: str, name: str) -> KVPair:
        key = self.key(name, namespace)
        return self._kv(
            self._get(key, f"{self.api}/namespaces/{namespace}/{self.resource}/{name}")
        )[0]


class KubernetesServiceKind(RawKind):
    kind, plural = "KubernetesService", "kubernetesservices"
    api, resource = "/api/v1", "services"


class KubernetesEndpointSliceKind(RawKind):
    kind, plural = "KubernetesEndpointSlice", "kubernetesendpointslices"
    api, resource = "/apis/discovery.k8s.io/v1", "endpointslices"


def native_kinds(
    rest: Rest, cni_patch_mode: bool = False, use_pod_cidr: bool = False
) -> dict[str, NativeKind]:
    """v3 plural -> handler."""
    kinds: list[NativeKind] = [
        NodeKind(rest, use_pod_cidr),
        WorkloadEndpointKind(rest, cni_patch_mode),
        ProfileKind(rest),
        KubernetesNetworkPolicyKind(rest),
        KubernetesClusterNetworkPolicyKind(rest),
        KubernetesServiceKind(rest),
        KubernetesEndpointSliceKind(rest),
    ]
    return {k.plural: k for k in kinds}
