"""policy.networking.k8s.io/v1alpha2 ClusterNetworkPolicy -> a GlobalNetworkPolicy in the
``kube-admin`` / ``kube-baseline`` tier (upstream's conversion at the recorded commit).

Tier ``Admin`` -> kube-admin, ``Baseline`` -> kube-baseline; any other tier, or a subject with
neither namespaces nor pods, is a tombstone (no value), so a bad object never loops the watch.
order = priority; types only for non-empty rule lists (the tiers default to Pass). Actions
Accept -> Allow, Deny, Pass; a rule that fails to convert becomes ``{action: Deny}`` when it
was Deny/Pass (fail closed) and is dropped when it was Accept. Named ports are not supported
upstream yet, so a rule using one fails to convert.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from calico.datastore.errors import InvalidValueError
from calico.datastore.kubernetes.native.networkpolicy import label_selector, simplify_ports
from calico.datastore.kubernetes.uids import convert_uid

TIERS = {"Admin": "kube-admin", "Baseline": "kube-baseline"}
ACTIONS = {"Accept": "Allow", "Deny": "Deny", "Pass": "Pass"}
RULE_NAME_ANNOTATION = "name"


def _protocols(entries: list[dict[str, Any]] | None) -> dict[str | None, list | None]:
    """protocol -> ports (None = all); ``{None: None}`` = any protocol."""
    out: dict[str | None, list | None] = {}
    for entry in entries or [{}]:
        proto = next((p for p in ("tcp", "udp", "sctp") if entry.get(p) is not None), None)
        if proto is None:
            if entry.get("destinationNamedPort"):
                raise InvalidValueError("named ports are not supported yet")
            return {None: None}
        port = (entry.get(proto) or {}).get("destinationPort")
        value: int | str | None = None
        if port and port.get("number"):
            value = int(port["number"])
        elif port and port.get("range"):
            lo, hi = int(port["range"]["start"]), int(port["range"]["end"])
            if hi < lo:
                raise InvalidValueError(f"invalid port range {lo}:{hi}")
            value = f"{lo}:{hi}"
        name = proto.upper()
        if value is None:
            out[name] = None
        elif name not in out or out[name]:
            out.setdefault(name, [])
            ports = out[name]
            assert ports is not None
            ports.append(value)
    return out


def _rules(rules: list[dict[str, Any]] | None, egress: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rule in rules or []:
        action = ACTIONS.get(str(rule.get("action")))
        try:
            if action is None:
                raise InvalidValueError(
                    f"unsupported cluster network policy action {rule.get('action')}"
                )
            out.extend(_rule(rule, action, egress))
        except (InvalidValueError, ValueError, KeyError, TypeError):
            if rule.get("action") in ("Deny", "Pass"):
                out.append({"action": "Deny"})  # fail closed
    return out


def _rule(rule: dict[str, Any], action: str, egress: bool) -> list[dict[str, Any]]:
    protos = _protocols(rule.get("protocols"))
    peers = rule.get("to" if egress else "from") or []
    out = []
    for proto in sorted(protos, key=lambda p: p or ""):
        ports = protos[proto]
        ports = simplify_ports(ports) if ports else ports
        for peer in peers:
            ent: dict[str, Any] = {}
            if peer.get("namespaces") is not None:
                ent["namespaceSelector"] = label_selector(peer["namespaces"], pods=False)
            if peer.get("pods") is not None:
                ent["selector"] = label_selector(peer["pods"].get("podSelector") or {}, pods=True)
                ent["namespaceSelector"] = label_selector(
                    peer["pods"].get("namespaceSelector") or {}, pods=False
                )
            if egress and peer.get("networks"):
                ent["nets"] = [str(ipaddress.ip_network(n, strict=False)) for n in peer["networks"]]
            if not ent:
                raise InvalidValueError("none of the supported peer fields is set")
            calico: dict[str, Any] = {"action": action}
            if rule.get("name"):
                calico["metadata"] = {"annotations": {RULE_NAME_ANNOTATION: rule["name"]}}
            if proto is not None:
                calico["protocol"] = proto
            dest: dict[str, Any] = {"ports": ports} if ports else {}
            if egress:
                calico["destination"] = {**ent, **dest}
            else:
                calico["source"] = ent
                if dest:
                    calico["destination"] = dest
            out.append(calico)
    return out


def cluster_network_policy_to_calico(cnp: dict[str, Any]) -> dict[str, Any] | None:
    """The GlobalNetworkPolicy (JSON form), or None for a tombstone."""
    meta = cnp.get("metadata") or {}
    spec = cnp.get("spec") or {}
    tier = TIERS.get(str(spec.get("tier")))
    subject = spec.get("subject") or {}
    if tier is None or (subject.get("namespaces") is None and subject.get("pods") is None):
        return None
    if subject.get("namespaces") is not None:
        ns_sel = label_selector(subject["namespaces"], pods=False)
        selector = label_selector(None, pods=True)
    else:
        ns_sel = label_selector(subject["pods"].get("namespaceSelector") or {}, pods=False)
        selector = label_selector(subject["pods"].get("podSelector") or {}, pods=True)
    ingress = _rules(spec.get("ingress"), egress=False)
    egress = _rules(spec.get("egress"), egress=True)
    out_meta: dict[str, Any] = {"name": meta.get("name", "")}
    if meta.get("uid"):
        out_meta["uid"] = convert_uid(meta["uid"])
    if meta.get("creationTimestamp"):
        out_meta["creationTimestamp"] = meta["creationTimestamp"]
    gspec: dict[str, Any] = {
        "tier": tier,
        "order": float(spec.get("priority") or 0),
        "namespaceSelector": ns_sel,
        "selector": selector,
        "types": [t for t, r in (("Ingress", ingress), ("Egress", egress)) if r],
    }
    if ingress:
        gspec["ingress"] = ingress
    if egress:
        gspec["egress"] = egress
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "GlobalNetworkPolicy",
        "metadata": out_meta,
        "spec": gspec,
    }
