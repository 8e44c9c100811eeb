"""Kinds as calicoctl names them on the command line, and their ``get`` table columns.

Column values are rendered from the resource's wire form the way upstream's Go templates render
them: booleans as ``true``/``false``, an unset optional (pointer) field as ``<nil>``, integral
numbers without a fraction, lists joined with commas.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from calico.api import API_VERSION, ObjectMeta, Resource, kind_class, resource_class
from calico.calicoctl.errors import CtlError

Wire = Mapping[str, Any]
Column = Callable[[Wire, "TableContext"], str]


@dataclass
class TableContext:
    """Cluster facts some columns need (the node ASN column falls back to the global ASN)."""

    global_as_number: Callable[[], str] = lambda: "64512"


def resolve_kind(name: str) -> type[Resource]:
    """A kind from its name or alias (case-insensitive), or upstream's "not supported" error."""
    cls = kind_class(name) or resource_class(name)
    if cls is None:
        raise CtlError(f"resource type '{name}' is not supported")
    return cls


def identity(cls: type[Resource], name: str, namespace: str | None = None) -> Resource:
    """A resource carrying only kind, name and namespace: the target of get/delete/patch."""
    meta = ObjectMeta(name=name, namespace=namespace)
    return cls.model_construct(api_version=API_VERSION, kind=cls.KIND, metadata=meta)


# --- value rendering (Go template semantics)


def go_float(value: float) -> str:
    """Go's ``%v`` for a float64: shortest digits, exponent form from 1e+06 or below 1e-04."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits_t = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digits_t.digits)).rstrip("0") or "0"
    exponent = int(digits_t.exponent) + (len(digits_t.digits) - len(digits))
    exp = len(digits) + exponent - 1
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    text = repr(abs(value))
    return sign + (text[:-2] if text.endswith(".0") else text)


def go_value(value: Any) -> str:
    """``{{.Field}}`` output: nil -> ``<nil>``, bools lower-case, 100.0 -> ``100``."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, dict):
        inner = " ".join(f"{k}:{go_value(v)}" for k, v in sorted(value.items()))
        return f"map[{inner}]"
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    return str(value)


def join(items: Any, sep: str = ",", max_len: int = 0) -> str:
    """Upstream's ``join``/``joinAndTruncate``: maps become sorted ``k=v`` pairs."""
    if items is None:
        return ""
    if isinstance(items, dict):
        items = sorted(f"{k}={go_value(v)}" for k, v in items.items())
    if not isinstance(items, list):
        items = [items]
    out = ""
    for i, item in enumerate(items):
        if i:
            out += sep
        out += item if isinstance(item, str) else _struct(item)
        if max_len > 0 and len(out) > max_len:
            return out[: max_len - 3] + "..."
    return out


def _struct(value: Any) -> str:
    """A Go struct printed with ``%v``: ``{field1 field2}``."""
    if isinstance(value, dict):
        return "{" + " ".join(go_value(v) for v in value.values()) + "}"
    return go_value(value)


def _spec(w: Wire) -> Mapping[str, Any]:
    spec = w.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _meta(w: Wire) -> Mapping[str, Any]:
    meta = w.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def name(w: Wire, _: TableContext) -> str:
    return str(_meta(w).get("name", ""))


def namespace(w: Wire, _: TableContext) -> str:
    return str(_meta(w).get("namespace", ""))


def spec_str(key: str, default: str = "") -> Column:
    """A plain (non-pointer) string or number field: absent prints ``default``."""

    def col(w: Wire, _: TableContext) -> str:
        value = _spec(w).get(key)
        return default if value is None or value == "" else go_value(value)

    return col


def spec_ptr(key: str) -> Column:
    """An optional (pointer) field: absent prints ``<nil>``."""
    return lambda w, _: go_value(_spec(w).get(key))


def spec_float(key: str) -> Column:
    """An optional float64 (policy and tier ``order``): ``<nil>`` or Go's float format."""

    def col(w: Wire, _: TableContext) -> str:
        value = _spec(w).get(key)
        return "<nil>" if value is None else go_float(float(value))

    return col


def spec_bool(key: str) -> Column:
    return lambda w, _: go_value(bool(_spec(w).get(key, False)))


def spec_join(key: str, max_len: int = 0) -> Column:
    return lambda w, _: join(_spec(w).get(key), ",", max_len)


def _tier(w: Wire, _: TableContext) -> str:
    return str(_spec(w).get("tier") or "default")


def _peer_node(w: Wire, _: TableContext) -> str:
    spec = _spec(w)
    return str(spec.get("node") or spec.get("nodeSelector") or "(global)")


def _node_bgp(key: str) -> Column:
    def col(w: Wire, _: TableContext) -> str:
        bgp = _spec(w).get("bgp")
        return str(bgp.get(key) or "") if isinstance(bgp, Mapping) else ""

    return col


def _node_asn(w: Wire, ctx: TableContext) -> str:
    bgp = _spec(w).get("bgp")
    if not isinstance(bgp, Mapping):
        return ""
    asn = bgp.get("asNumber")
    return str(asn) if asn else f"({ctx.global_as_number()})"


def _wep_workload(w: Wire, _: TableContext) -> str:
    spec = _spec(w)
    return str(spec.get("workload") or spec.get("pod") or "")


def _dash_if_unset(key: str) -> Column:
    """``{{if .Field}}{{.Field}}{{else}}-{{end}}`` on a pointer: only nil prints ``-``."""

    def col(w: Wire, _: TableContext) -> str:
        value = _spec(w).get(key)
        return "-" if value is None else go_value(value)

    return col


@dataclass(frozen=True)
class Table:
    headings: tuple[str, ...]
    wide: tuple[str, ...]
    columns: Mapping[str, Column] = field(default_factory=dict)


def _t(headings: str, wide: str, **columns: Column) -> Table:
    cols: dict[str, Column] = {"NAME": name, **columns}
    return Table(tuple(headings.split()), tuple(wide.split()), cols)


_NS = {"NAMESPACE": namespace}
_POLICY = _t(
    "NAME TIER",
    "NAME TIER ORDER SELECTOR",
    TIER=_tier,
    ORDER=spec_float("order"),
    SELECTOR=spec_str("selector"),
    **_NS,
)

TABLES: dict[str, Table] = {
    "IPPool": _t(
        "NAME CIDR SELECTOR",
        "NAME CIDR NAT IPIPMODE VXLANMODE DISABLED DISABLEBGPEXPORT SELECTOR ASSIGNMENTMODE",
        CIDR=spec_str("cidr"),
        NAT=spec_bool("natOutgoing"),
        IPIPMODE=spec_str("ipipMode", "Never"),
        VXLANMODE=spec_str("vxlanMode", "Never"),
        DISABLED=spec_bool("disabled"),
        DISABLEBGPEXPORT=spec_bool("disableBGPExport"),
        SELECTOR=spec_str("nodeSelector"),
        ASSIGNMENTMODE=spec_ptr("assignmentMode"),
    ),
    "BGPPeer": _t(
        "NAME PEERIP NODE ASN",
        "NAME PEERIP NODE ASN",
        PEERIP=spec_str("peerIP"),
        NODE=_peer_node,
        ASN=spec_str("asNumber", "0"),
    ),
    "BGPConfiguration": _t(
        "NAME LOGSEVERITY MESHENABLED ASNUMBER",
        "NAME LOGSEVERITY MESHENABLED ASNUMBER",
        LOGSEVERITY=spec_str("logSeverityScreen"),
        MESHENABLED=_dash_if_unset("nodeToNodeMeshEnabled"),
        ASNUMBER=_dash_if_unset("asNumber"),
    ),
    "BGPFilter": _t("NAME", "NAME"),
    "Node": _t(
        "NAME",
        "NAME ASN IPV4 IPV6",
        ASN=_node_asn,
        IPV4=_node_bgp("ipv4Address"),
        IPV6=_node_bgp("ipv6Address"),
    ),
    "WorkloadEndpoint": _t(
        "WORKLOAD NODE NETWORKS INTERFACE",
        "NAME WORKLOAD NODE NETWORKS INTERFACE PROFILES NATS",
        WORKLOAD=_wep_workload,
        NODE=spec_str("node"),
        ORCHESTRATOR=spec_str("orchestrator"),
        NETWORKS=spec_join("ipNetworks"),
        NATS=spec_join("ipNATs"),
        PROFILES=spec_join("profiles"),
        INTERFACE=spec_str("interfaceName"),
        **_NS,
    ),
    "HostEndpoint": _t(
        "NAME NODE",
        "NAME NODE INTERFACE IPS PROFILES",
        NODE=spec_str("node"),
        INTERFACE=spec_str("interfaceName"),
        IPS=spec_join("expectedIPs"),
        PROFILES=spec_join("profiles"),
    ),
    "NetworkPolicy": _POLICY,
    "StagedNetworkPolicy": _POLICY,
    "GlobalNetworkPolicy": _t(
        "NAME", "NAME ORDER SELECTOR", ORDER=spec_float("order"), SELECTOR=spec_str("selector")
    ),
    "StagedGlobalNetworkPolicy": _t(
        "NAME", "NAME ORDER SELECTOR", ORDER=spec_float("order"), SELECTOR=spec_str("selector")
    ),
    "StagedKubernetesNetworkPolicy": _t("NAME", "NAME", **_NS),
    "Tier": _t("NAME ORDER", "NAME ORDER", ORDER=spec_float("order")),
    "Profile": _t("NAME", "NAME LABELS", LABELS=spec_join("labelsToApply")),
    "NetworkSet": _t("NAME", "NAME NETS", NETS=spec_join("nets", 80), **_NS),
    "GlobalNetworkSet": _t("NAME", "NAME NETS", NETS=spec_join("nets", 80)),
    "IPReservation": _t("NAME", "NAME CIDRS", CIDRS=spec_join("reservedCIDRs", 80)),
    "IPAMConfiguration": _t(
        "NAME",
        "NAME STRICTAFFINITY MAXBLOCKSPERHOST",
        STRICTAFFINITY=spec_bool("strictAffinity"),
        MAXBLOCKSPERHOST=spec_str("maxBlocksPerHost", "0"),
    ),
    "IPAMBlock": _t(
        "NAME CIDR AFFINITY",
        "NAME CIDR AFFINITY",
        CIDR=spec_str("cidr"),
        AFFINITY=spec_str("affinity"),
    ),
    "IPAMHandle": _t("NAME", "NAME HANDLEID", HANDLEID=spec_str("handleID")),
    "BlockAffinity": _t(
        "NAME NODE CIDR STATE",
        "NAME NODE CIDR STATE",
        NODE=spec_str("node"),
        CIDR=spec_str("cidr"),
        STATE=spec_str("state"),
    ),
    "ClusterInformation": _t("NAME", "NAME"),
    "FelixConfiguration": _t("NAME", "NAME"),
    "KubeControllersConfiguration": _t("NAME", "NAME"),
    "CalicoNodeStatus": _t("NAME", "NAME"),
}


def table_for(kind: str) -> Table:
    return TABLES.get(kind) or _t("NAME", "NAME")


def default_headings(kind: type[Resource], wide: bool, print_namespace: bool) -> list[str]:
    table = table_for(kind.KIND)
    headings = list(table.wide if wide else table.headings)
    if print_namespace and "NAMESPACE" in table.columns:
        headings.insert(0, "NAMESPACE")
    return headings
