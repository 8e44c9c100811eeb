"""Kubernetes-mode IPAM choices from pod and namespace annotations (upstream's CNI plugin).

``cni.projectcalico.org/ipv4pools`` / ``ipv6pools`` (JSON lists) and ``ipFamilies``
(``["IPv4","IPv6"]``): the namespace's value is the default and a non-empty pod value
overrides it; they replace the netconf's ``ipam.ipv4_pools``/``ipv6_pools``/``assign_ipv4``/
``assign_ipv6``. ``cni.projectcalico.org/ipAddrs`` (JSON list, at most one address per family)
asks for exact addresses, as CNI_ARGS ``IP=`` does. ``ipAddrsNoIpam`` needs upstream's
``feature_control.ip_addrs_no_ipam``, which this plugin does not implement: refused.
``floatingIPs`` needs ``feature_control.floating_ips`` (else refused, as upstream, with
calico-ipam and host-local alike: ``check_features``); the WorkloadEndpoint's ``ipNATs``
come from it through the datastore's pod conversion.
Only on the Kubernetes datastore (the backend exposes the raw objects).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from typing import TYPE_CHECKING, Any

from calico.cni.errors import INVALID_NETCONF, CNIError
from calico.cni.identity import K8S

if TYPE_CHECKING:
    from calico.cni.identity import Identity
    from calico.cni.netconf import CNIEnv, NetConf
    from calico.datastore.backend import Backend

A = "cni.projectcalico.org/"
FLOATING_IPS = A + "floatingIPs"
POOL_KEYS = {"ipv4_pools": A + "ipv4pools", "ipv6_pools": A + "ipv6pools"}


def _json_list(ann: dict[str, str], key: str, where: str) -> list[str] | None:
    text = ann.get(key, "")
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CNIError(INVALID_NETCONF, f"failed to parse {where} annotation {key}", text)
    return value


def _annotations(ident: Identity, backend: Backend) -> tuple[dict[str, str], dict[str, str]] | None:
    """(namespace, pod) annotations; None outside the Kubernetes datastore or orchestrator."""
    getter: Any = getattr(backend, "kube_object", None)
    if getter is None or ident.orchestrator != K8S:
        return None
    from calico.datastore.errors import ResourceDoesNotExistError

    ns, pod = ident.namespace, ident.workload
    try:
        ns_ann = (getter("namespaces", ns).get("metadata") or {}).get("annotations") or {}
        pod_ann = (getter("pods", pod, ns).get("metadata") or {}).get("annotations") or {}
    except ResourceDoesNotExistError as exc:
        raise CNIError(INVALID_NETCONF, "pod or namespace not found", str(exc)) from None
    return ns_ann, pod_ann


def _check_floating_ips(conf: NetConf, pod_ann: dict[str, str]) -> None:
    if pod_ann.get(FLOATING_IPS) and not conf.floating_ips:
        raise CNIError(INVALID_NETCONF, "requested feature is not enabled: floating_ips")


def check_features(conf: NetConf, ident: Identity, backend: Backend) -> None:
    """The feature gates upstream applies whatever the IPAM plugin (host-local included):
    a pod asking for ``floatingIPs`` needs ``feature_control.floating_ips``. Checked before
    IPAM runs, so a refusal leaves nothing to release (upstream releases after the fact)."""
    if (found := _annotations(ident, backend)) is not None:
        _check_floating_ips(conf, found[1])


def apply(conf: NetConf, env: CNIEnv, ident: Identity, backend: Backend) -> tuple[NetConf, CNIEnv]:
    """``(conf, env)`` with the annotations' IPAM choices applied (unchanged outside KDD/k8s)."""
    found = _annotations(ident, backend)
    if found is None:
        return conf, env
    ns_ann, pod_ann = found
    ipam = conf.ipam
    changes: dict[str, Any] = {}
    for field, key in POOL_KEYS.items():
        value = _json_list(pod_ann, key, "pod") or _json_list(ns_ann, key, "namespace")
        if value:
            changes[field] = value
    families = _json_list(pod_ann, A + "ipFamilies", "pod") or _json_list(
        ns_ann, A + "ipFamilies", "namespace"
    )
    if families:
        changes["assign_ipv4"] = "IPv4" in families
        changes["assign_ipv6"] = "IPv6" in families
    if pod_ann.get(A + "ipAddrsNoIpam"):
        if pod_ann.get(A + "ipAddrs"):
            raise CNIError(
                INVALID_NETCONF,
                "can't have both annotations: 'ipAddrs' and "
                "'ipAddrsNoIpam' in use at the same time",
            )
        raise CNIError(INVALID_NETCONF, "requested feature is not enabled: ip_addrs_no_ipam")
    _check_floating_ips(conf, pod_ann)
    addrs = _json_list(pod_ann, A + "ipAddrs", "pod")
    if addrs:
        try:
            parsed = [ipaddress.ip_address(a) for a in addrs]
        except ValueError as exc:
            raise CNIError(INVALID_NETCONF, "invalid ipAddrs annotation", str(exc)) from None
        if sum(a.version == 4 for a in parsed) > 1 or sum(a.version == 6 for a in parsed) > 1:
            raise CNIError(INVALID_NETCONF, "ipAddrs may hold at most one IPv4 and one IPv6")
        env = dataclasses.replace(env, args={**env.args, "IP": ",".join(map(str, parsed))})
    if changes:
        conf = dataclasses.replace(conf, ipam=dataclasses.replace(ipam, **changes))
    return conf, env
