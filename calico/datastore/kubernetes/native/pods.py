"""Pods -> WorkloadEndpoints, as upstream's Kubernetes conversion (no MAC: KDD keeps none).

Host-network and unscheduled pods are no endpoint at all; finished pods and pods without an IP
are endpoints with no ipNetworks (Felix's processor turns those into deletes). Names double
every ``-`` inside a segment: ``node-1`` / ``nginx-abc`` -> ``node--1-k8s-nginx--abc-eth0``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
from typing import Any

from calico.datastore.errors import InvalidValueError
from calico.datastore.kubernetes.native.qos import pod_qos_controls

POD_IP = "cni.projectcalico.org/podIP"
POD_IPS = "cni.projectcalico.org/podIPs"
CONTAINER_ID = "cni.projectcalico.org/containerID"
AWS_POD_IPS = "vpc.amazonaws.com/pod-ips"
NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"
ALLOWED_SOURCE_PREFIXES = "cni.projectcalico.org/allowedSourcePrefixes"
FLOATING_IPS = "cni.projectcalico.org/floatingIPs"
FINISHED_PHASES = ("Failed", "Succeeded", "Completed")


def _escape(segment: str) -> str:
    return segment.replace("-", "--")


def wep_name(node: str, pod: str, endpoint: str = "eth0") -> str:
    return f"{_escape(node)}-k8s-{_escape(pod)}-{_escape(endpoint)}"


def parse_wep_name(name: str) -> tuple[str, str, str] | None:
    """(node, pod, endpoint) of ``<node>-k8s-<pod>-<endpoint>``, or None."""
    parts: list[str] = []
    cur = ""
    i = 0
    while i < len(name):
        if name[i] == "-":
            if name[i : i + 2] == "--":
                cur += "-"
                i += 2
                continue
            parts.append(cur)
            cur = ""
        else:
            cur += name[i]
        i += 1
    parts.append(cur)
    if len(parts) != 4 or parts[1] != "k8s" or not all(parts):
        return None
    return parts[0], parts[2], parts[3]


def interface_name(namespace: str, pod: str, prefix: str | None = None) -> str:
    """``cali`` (first FELIX_INTERFACEPREFIX entry) + 11 hex of SHA-1("<ns>.<pod>")."""
    if prefix is None:
        prefix = (os.environ.get("FELIX_INTERFACEPREFIX") or "cali").split(",")[0]
    return prefix + hashlib.sha1(f"{namespace}.{pod}".encode()).hexdigest()[:11]


def is_endpoint(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return not spec.get("hostNetwork") and bool(spec.get("nodeName"))


def _finished(pod: dict[str, Any]) -> bool:
    if (pod.get("status") or {}).get("phase") in FINISHED_PHASES:
        return True
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        for key in (POD_IP, AWS_POD_IPS):
            if key in ann and ann[key] == "":
                return True
    return False


def _host_net(text: str) -> str:
    try:
        iface = ipaddress.ip_interface(text.strip())
    except ValueError:
        raise InvalidValueError(f"invalid pod IP {text!r}") from None
    return f"{iface.ip}/{iface.ip.max_prefixlen}"


def pod_ips(pod: dict[str, Any]) -> list[str]:
    """podIPs > podIP > the CNI's podIPs/podIP annotations > AWS's; each as /32 or /128."""
    if _finished(pod):
        return []
    status = pod.get("status") or {}
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    found: list[str] = []
    if status.get("podIPs"):
        found = [p.get("ip", "") for p in status["podIPs"]]
    elif status.get("podIP"):
        found = [status["podIP"]]
    elif ann.get(POD_IPS):
        found = ann[POD_IPS].split(",")
    elif ann.get(POD_IP):
        found = [ann[POD_IP]]
    elif ann.get(AWS_POD_IPS):
        found = ann[AWS_POD_IPS].split(",")
    return [_host_net(ip) for ip in found if ip.strip()]


def _ports(spec: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for port in container.get("ports") or []:
            number = int(port.get("containerPort") or 0)
            if not number or not (port.get("hostPort") or port.get("name")):
                continue
            proto = {"TCP": "TCP", "": "TCP", "UDP": "UDP", "SCTP": "SCTP"}.get(
                str(port.get("protocol") or "")
            )
            if proto is None:
                continue
            entry: dict[str, Any] = {"port": number, "protocol": proto}
            if port.get("name"):
                entry["name"] = port["name"]
            if port.get("hostPort"):
                entry["hostPort"] = int(port["hostPort"])
            if port.get("hostIP"):
                entry["hostIP"] = port["hostIP"]
            out.append(entry)
    return out


def floating_ip_nats(annotation: str, ip_networks: list[str]) -> list[dict[str, str]]:
    """``ipNATs`` from the floatingIPs annotation (a JSON list), as upstream: each floating
    address maps to the pod's (last) address of its family, skipped when the pod has none;
    a pod address wider than /32 or /128, or a non-list annotation, is an error."""
    try:
        ips = json.loads(annotation)
    except ValueError:
        ips = None
    if not isinstance(ips, list) or not all(isinstance(ip, str) for ip in ips):
        raise InvalidValueError(f"failed to parse {annotation!r} as a JSON list of strings")
    internal: dict[int, str] = {}
    for text in ip_networks:
        net = ipaddress.ip_interface(text).network
        full = 32 if net.version == 4 else 128
        if net.prefixlen != full:
            raise InvalidValueError(
                f"PodIP {text} is not a valid IPv{net.version}: "
                f"Mask size is {net.prefixlen}, not {full}"
            )
        internal[net.version] = str(net.network_address)
    return [
        {"internalIP": internal[6 if ":" in ip else 4], "externalIP": ip}
        for ip in ips
        if (6 if ":" in ip else 4) in internal
    ]


def pod_to_wep(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The v3 WorkloadEndpoint (JSON form) of a pod; None for pods that are no endpoint."""
    if not is_endpoint(pod):
        return None
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ns, name, node = meta.get("namespace", ""), meta.get("name", ""), spec["nodeName"]
    ann = meta.get("annotations") or {}
    sa = spec.get("serviceAccountName") or ""
    labels = dict(meta.get("labels") or {})
    labels["projectcalico.org/namespace"] = ns
    labels["projectcalico.org/orchestrator"] = "k8s"
    if sa and len(sa) < 63:
        labels["projectcalico.org/serviceaccount"] = sa
    profiles = [f"kns.{ns}"] + ([f"ksa.{ns}.{sa}"] if sa else [])
    wep_meta: dict[str, Any] = {
        "name": wep_name(node, name),
        "namespace": ns,
        "labels": labels,
    }
    for src, dst in (
        ("uid", "uid"),
        ("creationTimestamp", "creationTimestamp"),
        ("generateName", "generateName"),
    ):
        if meta.get(src):
            wep_meta[dst] = meta[src]
    if NETWORK_STATUS in ann:
        wep_meta["annotations"] = {NETWORK_STATUS: ann[NETWORK_STATUS]}
    wep_spec: dict[str, Any] = {
        "orchestrator": "k8s",
        "node": node,
        "pod": name,
        "endpoint": "eth0",
        "profiles": profiles,
        "ipNetworks": pod_ips(pod),
        "interfaceName": interface_name(ns, name),
    }
    if sa:
        wep_spec["serviceAccountName"] = sa
    if ann.get(CONTAINER_ID):
        wep_spec["containerID"] = ann[CONTAINER_ID]
    if ports := _ports(spec):
        wep_spec["ports"] = ports
    ips = wep_spec["ipNetworks"]
    if FLOATING_IPS in ann and ips and (nats := floating_ip_nats(ann[FLOATING_IPS], ips)):
        wep_spec["ipNATs"] = nats
    if ann.get(ALLOWED_SOURCE_PREFIXES):
        try:
            prefixes = json.loads(ann[ALLOWED_SOURCE_PREFIXES])
            wep_spec["allowSpoofedSourcePrefixes"] = [
                str(ipaddress.ip_network(p, strict=False)) for p in prefixes
            ]
        except (ValueError, TypeError):
            raise InvalidValueError(f"invalid {ALLOWED_SOURCE_PREFIXES} annotation") from None
    if qos := pod_qos_controls(f"{ns}/{name}", ann):
        wep_spec["qosControls"] = qos
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "WorkloadEndpoint",
        "metadata": wep_meta,
        "spec": wep_spec,
    }
