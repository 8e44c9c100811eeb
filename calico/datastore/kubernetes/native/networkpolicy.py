"""Kubernetes NetworkPolicy -> the Calico NetworkPolicy Felix enforces (upstream's conversion).

Stored under kind ``KubernetesNetworkPolicy`` with the policy's own name (no ``knp.default.``
prefix: that is etcd mode, written by kube-controllers). Rules are sorted protocols x peers,
one Allow rule each; ports are simplified per protocol (named ports first, numbers merged into
sorted ranges); an unparsable ipBlock CIDR gives an unrestricted peer, as upstream.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from calico.datastore.errors import InvalidValueError
from calico.datastore.kubernetes.uids import convert_uid

ORCHESTRATOR_TERM = "projectcalico.org/orchestrator == 'k8s'"
K8S_POLICY_ORDER = 1000


def label_selector(sel: dict[str, Any] | None, *, pods: bool) -> str:
    """Pod selectors always start with the orchestrator term; a nil namespace selector is
    ``""`` (the policy's own namespace) and ``{}`` is ``all()``."""
    parts = [ORCHESTRATOR_TERM] if pods else []
    if sel is None:
        return parts[0] if pods else ""
    for key, value in sorted((sel.get("matchLabels") or {}).items()):
        parts.append(f"{key} == '{value}'")
    for expr in sel.get("matchExpressions") or []:
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ", ".join(f"'{v}'" for v in expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in {{ {values} }}")
        elif op == "NotIn":
            parts.append(f"{key} not in {{ {values} }}")
        elif op == "Exists":
            parts.append(f"has({key})")
        elif op == "DoesNotExist":
            parts.append(f"! has({key})")
        else:
            raise InvalidValueError(f"unknown label selector operator {op!r}")
    if not parts:
        return "all()"
    return " && ".join(parts)


def _net(text: str) -> str:
    return str(ipaddress.ip_network(text, strict=False))


def _peer(peer: dict[str, Any]) -> dict[str, Any]:
    block = peer.get("ipBlock")
    if block is not None:
        try:
            out: dict[str, Any] = {"nets": [_net(block.get("cidr", ""))]}
            if block.get("except"):
                out["notNets"] = [_net(e) for e in block["except"]]
        except ValueError:
            return {}  # upstream: an unparsable CIDR matches anything
        return out
    pod_sel = peer.get("podSelector")
    ns_sel = peer.get("namespaceSelector")
    out = {"selector": label_selector(pod_sel, pods=True)}
    if ns_sel is not None:
        out["namespaceSelector"] = label_selector(ns_sel, pods=False)
    return out


def simplify_ports(ports: list[str | int]) -> list[str | int]:
    """Named ports first (input order), then numbers merged into sorted ranges; with at most
    one numeric entry the list is left as it is."""
    named = [p for p in ports if isinstance(p, str) and not p[:1].isdigit()]
    numeric = [p for p in ports if p not in named]
    if len(numeric) <= 1:
        return list(ports)
    ranges = []
    for p in numeric:
        lo, _, hi = str(p).partition(":")
        ranges.append((int(lo), int(hi or lo)))
    ranges.sort()
    merged: list[list[int]] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [*named, *(lo if lo == hi else f"{lo}:{hi}" for lo, hi in merged)]


def _ports(entries: list[dict[str, Any]] | None) -> list[tuple[str | None, list[str | int] | None]]:
    """(protocol, ports) per protocol, sorted; no entries -> one (None, None) "any"."""
    if not entries:
        return [(None, None)]
    by_proto: dict[str, list[str | int] | None] = {}
    for entry in entries:
        proto = str(entry.get("protocol") or "TCP").upper()
        port = entry.get("port")
        if port is None:
            by_proto[proto] = None  # all ports: absorbs the protocol's other entries
            continue
        if proto in by_proto and by_proto[proto] is None:
            continue
        if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
            value: str | int = int(port)
            end = entry.get("endPort")
            if end is not None:
                if int(end) < int(value):
                    raise InvalidValueError(f"endPort {end} is below port {value}")
                value = f"{value}:{int(end)}" if int(end) != int(value) else int(value)
        elif isinstance(port, str) and port:
            value = port
        else:
            raise InvalidValueError(f"invalid port {port!r}")
        by_proto.setdefault(proto, [])
        ports = by_proto[proto]
        assert ports is not None
        ports.append(value)
    return [
        (proto, None if ports is None else simplify_ports(ports))
        for proto, ports in sorted(by_proto.items())
    ]


def _rules(rules: list[dict[str, Any]] | None, egress: bool) -> list[dict[str, Any]]:
    out = []
    for rule in rules or []:
        peers = [_peer(p) for p in (rule.get("to" if egress else "from") or [])] or [{}]
        try:
            protos = _ports(rule.get("ports"))
        except (InvalidValueError, ValueError):
            continue  # upstream drops the whole rule (and reports the policy as partial)
        for proto, ports in protos:
            for peer in peers:
                calico: dict[str, Any] = {"action": "Allow"}
                if proto is not None:
                    calico["protocol"] = proto
                dest: dict[str, Any] = {"ports": ports} if ports is not None else {}
                if egress:
                    dest = {**peer, **dest}
                    if dest:
                        calico["destination"] = dest
                else:
                    if peer:
                        calico["source"] = peer
                    if dest:
                        calico["destination"] = dest
                out.append(calico)
    return out


def k8s_network_policy_to_calico(np: dict[str, Any]) -> dict[str, Any]:
    """The v3 NetworkPolicy object (JSON form) a networking.k8s.io/v1 NetworkPolicy means."""
    meta = np.get("metadata") or {}
    spec = np.get("spec") or {}
    types = [t for t in spec.get("policyTypes") or []] or ["Ingress"]
    out_meta: dict[str, Any] = {
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
    }
    if meta.get("uid"):
        out_meta["uid"] = convert_uid(meta["uid"])
    if meta.get("creationTimestamp"):
        out_meta["creationTimestamp"] = meta["creationTimestamp"]
    cal_spec: dict[str, Any] = {
        "order": K8S_POLICY_ORDER,
        "tier": "default",
        "selector": label_selector(spec.get("podSelector"), pods=True),
        "types": types,
    }
    ingress = _rules(spec.get("ingress"), egress=False)
    egress = _rules(spec.get("egress"), egress=True)
    if ingress:
        cal_spec["ingress"] = ingress
    if egress:
        cal_spec["egress"] = egress
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "NetworkPolicy",
        "metadata": out_meta,
        "spec": cal_spec,
    }
