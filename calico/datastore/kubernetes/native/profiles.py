"""Namespaces -> ``kns.<ns>`` and ServiceAccounts -> ``ksa.<ns>.<sa>`` profiles, plus the
synthetic allow-all ``projectcalico-default-allow`` (read-only, as upstream)."""

from __future__ import annotations

from typing import Any

from calico.datastore.kubernetes.uids import convert_uid

NS_PREFIX = "kns."
SA_PREFIX = "ksa."
DEFAULT_ALLOW = "projectcalico-default-allow"
DEFAULT_ALLOW_REVISION = 1


def _meta(name: str, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"name": name}
    if meta.get("uid"):
        out["uid"] = convert_uid(meta["uid"])
    if meta.get("creationTimestamp"):
        out["creationTimestamp"] = meta["creationTimestamp"]
    return out


def _profile(meta: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "projectcalico.org/v3", "kind": "Profile", "metadata": meta, "spec": spec}


def namespace_profile(ns: dict[str, Any]) -> dict[str, Any]:
    name = (ns.get("metadata") or {}).get("name", "")
    labels = {f"pcns.{k}": v for k, v in ((ns.get("metadata") or {}).get("labels") or {}).items()}
    labels["pcns.projectcalico.org/name"] = name
    return _profile(
        _meta(NS_PREFIX + name, ns),
        {
            "ingress": [{"action": "Allow"}],
            "egress": [{"action": "Allow"}],
            "labelsToApply": labels,
        },
    )


def service_account_profile(sa: dict[str, Any]) -> dict[str, Any]:
    meta = sa.get("metadata") or {}
    ns, name = meta.get("namespace") or "default", meta.get("name", "")
    labels = {f"pcsa.{k}": v for k, v in (meta.get("labels") or {}).items()}
    labels["pcsa.projectcalico.org/name"] = name
    return _profile(_meta(f"{SA_PREFIX}{ns}.{name}", sa), {"labelsToApply": labels})


def default_allow_profile() -> dict[str, Any]:
    return _profile(
        {"name": DEFAULT_ALLOW},
        {"ingress": [{"action": "Allow"}], "egress": [{"action": "Allow"}]},
    )


def parse_profile_name(name: str) -> tuple[str, str, str] | None:
    """("ns", ns, "") | ("sa", ns, sa) | ("default", "", "") | None."""
    if name == DEFAULT_ALLOW:
        return ("default", "", "")
    if name.startswith(NS_PREFIX) and len(name) > len(NS_PREFIX):
        return ("ns", name[len(NS_PREFIX) :], "")
    if name.startswith(SA_PREFIX):
        parts = name.split(".", 2)
        if len(parts) == 3 and parts[1] and parts[2]:
            return ("sa", parts[1], parts[2])
    return None
