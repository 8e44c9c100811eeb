"""Endpoint-side kinds: Profile, NetworkSet, GlobalNetworkSet, HostEndpoint, WorkloadEndpoint.

These are what policy selects: their labels (and a profile's ``labelsToApply``) feed the label
index, their IPs/nets become IP set members, their named ports resolve rule ports.
"""

import ipaddress
import re
from typing import Annotated, Any, ClassVar, Self

from pydantic import AfterValidator, Field, WithJsonSchema, field_validator, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, register
from calico.api.rules import DSCPValue, Loc, ProtocolValue, Rule, supports_ports

_NAMESPACE_LABEL = "projectcalico.org/namespace"
_DNS_LABEL = r"[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?"
_DOMAIN = re.compile(rf"^(\*\.)?({_DNS_LABEL}\.)*{_DNS_LABEL}\.?$")


def _names(values: list[str] | None) -> list[str] | None:
    for item in values or []:
        v.dns1123_subdomain(item)
    return values


# --- Profile


class ProfileSpec(CalicoModel):
    ingress: list[Rule] | None = Field(default=None, max_length=1024)
    egress: list[Rule] | None = Field(default=None, max_length=1024)
    labels_to_apply: Annotated[dict[str, str], AfterValidator(v.label_map)] | None = None


@register
class Profile(Resource):
    """Rules and labels inherited by the endpoints that list the profile (end of all tiers)."""

    KIND: ClassVar[str] = "Profile"

    spec: ProfileSpec = Field(default_factory=lambda: ProfileSpec())


# --- Network sets


def _check_nets(values: list[str] | None) -> list[str] | None:
    for item in values or []:
        v.cidr(item)  # upstream "cidr" rule: host bits allowed
    return values


def _no_namespace_label(res: Resource) -> None:
    """The namespace label is synthesised for the v1 model; users may not set it."""
    if _NAMESPACE_LABEL in (res.metadata.labels or {}):
        msg = f"{_NAMESPACE_LABEL} is not a valid label name (it is reserved)"
        v.raise_issues([(("metadata", "labels", _NAMESPACE_LABEL), msg)])


# Upstream's CRD limits on a network set: entries are CIDRs or IPs (at most 49 characters, an
# IPv6 CIDR's longest form), at most 100000 of them.
SetNets = Annotated[list[Annotated[str, Field(max_length=49)]], Field(max_length=100000)]


class NetworkSetSpec(CalicoModel):
    nets: SetNets | None = None

    @field_validator("nets")
    @classmethod
    def _nets(cls, value: list[str] | None) -> list[str] | None:
        return _check_nets(value)


class GlobalNetworkSetSpec(CalicoModel):
    nets: SetNets | None = None
    allowed_egress_domains: list[str] | None = None

    @field_validator("nets")
    @classmethod
    def _nets(cls, value: list[str] | None) -> list[str] | None:
        return _check_nets(value)

    @field_validator("allowed_egress_domains")
    @classmethod
    def _domains(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            if len(item) > 253 or not _DOMAIN.match(item):
                raise ValueError(f"{item!r} is not a valid domain name (a leading '*.' is allowed)")
        return value


@register
class NetworkSet(Resource):
    KIND: ClassVar[str] = "NetworkSet"

    spec: NetworkSetSpec = Field(default_factory=lambda: NetworkSetSpec())

    @model_validator(mode="after")
    def _labels(self) -> Self:
        _no_namespace_label(self)
        return self


@register
class GlobalNetworkSet(Resource):
    KIND: ClassVar[str] = "GlobalNetworkSet"

    spec: GlobalNetworkSetSpec = Field(default_factory=lambda: GlobalNetworkSetSpec())

    @model_validator(mode="after")
    def _labels(self) -> Self:
        _no_namespace_label(self)
        return self


# --- Host endpoints


class EndpointPort(CalicoModel):
    """A named port on an endpoint, referenced by name from rule ports."""

    name: str
    protocol: ProtocolValue
    port: int

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return v.port_name(value)

    @field_validator("port")
    @classmethod
    def _port(cls, value: int) -> int:
        if not 1 <= value <= 65535:
            raise ValueError(f"port {value} is out of range 1-65535")
        return value

    @model_validator(mode="after")
    def _proto(self) -> Self:
        if not supports_ports(self.protocol):
            v.raise_issues([(("protocol",), "protocol must be TCP, UDP or SCTP")])
        return self


class HostEndpointSpec(CalicoModel):
    node: str | None = None
    interface_name: str | None = None
    expected_ips: list[str] | None = Field(default=None, alias="expectedIPs")
    profiles: list[str] | None = None
    ports: list[EndpointPort] | None = None

    @field_validator("node")
    @classmethod
    def _node(cls, value: str | None) -> str | None:
        return v.dns1123_subdomain(value, "node name") if value else value

    @field_validator("interface_name")
    @classmethod
    def _iface(cls, value: str | None) -> str | None:
        return v.interface_name(value, allow_wildcard=True) if value else value

    @field_validator("expected_ips")
    @classmethod
    def _ips(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            v.ip_address(item)
        return value

    @field_validator("profiles")
    @classmethod
    def _profiles(cls, value: list[str] | None) -> list[str] | None:
        return _names(value)

    @model_validator(mode="after")
    def _required(self) -> Self:
        issues: list[tuple[Loc, str]] = []
        if not self.interface_name and not self.expected_ips:
            msg = "at least one of interfaceName or expectedIPs must be specified"
            issues.append((("interfaceName",), msg))
        if not self.node:
            issues.append((("node",), "node must be specified"))
        v.raise_issues(issues)
        return self


@register
class HostEndpoint(Resource):
    """A host interface (or all of them, ``*``) that policy protects."""

    KIND: ClassVar[str] = "HostEndpoint"

    spec: HostEndpointSpec


# --- Workload endpoints


class WorkloadEndpointPort(CalicoModel):
    name: str | None = None
    protocol: ProtocolValue
    port: int
    host_port: int | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return v.port_name(value) if value else value

    @field_validator("port", "host_port")
    @classmethod
    def _port(cls, value: int | None) -> int | None:
        if value is not None and not 0 <= value <= 65535:
            raise ValueError(f"port {value} is out of range 1-65535")
        return value

    @field_validator("host_ip")
    @classmethod
    def _host_ip(cls, value: str | None) -> str | None:
        return v.ip_address(value) if value else value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        issues: list[tuple[Loc, str]] = []
        if self.port == 0:
            issues.append((("port",), "port must be 1-65535"))
        if not supports_ports(self.protocol):
            issues.append((("protocol",), "protocol must be TCP, UDP or SCTP"))
        if not self.name and not self.host_port:
            issues.append((("name",), "name must not be empty if no hostPort is specified"))
        v.raise_issues(issues)
        return self


class IPNAT(CalicoModel):
    """A 1:1 NAT (floating IP) mapping; the internal IP must be one of the endpoint's."""

    internal_ip: str = Field(alias="internalIP")
    external_ip: str = Field(alias="externalIP")
    source: str | None = None

    @field_validator("internal_ip", "external_ip")
    @classmethod
    def _ip(cls, value: str) -> str:
        return v.ip_address(value)

    @model_validator(mode="after")
    def _same_family(self) -> Self:
        a, b = ipaddress.ip_address(self.internal_ip), ipaddress.ip_address(self.external_ip)
        if a.version != b.version:
            v.raise_issues([(("externalIP",), "internalIP and externalIP must be the same family")])
        return self


def _in_range(low: int, high: int) -> Any:
    """An int64 QoS control: 0 means "not applied" (or "use the default"), else low..high."""

    def check(value: int) -> int:
        if value == 0 or low <= value <= high:
            return value
        raise ValueError(f"{value} is out of range: must be 0 or {low}-{high}")

    return Annotated[int, AfterValidator(check)]


_BANDWIDTH = _in_range(1000, 10**15)
_BURST = _in_range(1000, 34359738360)
_PEAKRATE = _in_range(1010, 101 * 10**13)
_MINBURST = _in_range(1000, 10**8)
_PACKETS = _in_range(1, 10**4)
_CONNECTIONS = _in_range(1, 4294967295)


class QoSControls(CalicoModel):
    """Per-workload bandwidth, packet-rate, connection and DSCP limits (upstream's ranges;
    zero or unset means the limit is not applied). Bandwidths are bits per second, bursts
    bits, minburst bytes."""

    ingress_bandwidth: _BANDWIDTH | None = None
    ingress_burst: _BURST | None = None
    ingress_peakrate: _PEAKRATE | None = None
    ingress_minburst: _MINBURST | None = None
    egress_bandwidth: _BANDWIDTH | None = None
    egress_burst: _BURST | None = None
    egress_peakrate: _PEAKRATE | None = None
    egress_minburst: _MINBURST | None = None
    ingress_packet_rate: _PACKETS | None = None
    ingress_packet_burst: _PACKETS | None = None
    egress_packet_rate: _PACKETS | None = None
    egress_packet_burst: _PACKETS | None = None
    ingress_max_connections: _CONNECTIONS | None = None
    egress_max_connections: _CONNECTIONS | None = None
    dscp: Annotated[DSCPValue, WithJsonSchema(v.INT_OR_STRING)] | None = None


class WorkloadEndpointSpec(CalicoModel):
    orchestrator: str | None = None
    workload: str | None = None
    node: str | None = None
    container_id: str | None = Field(default=None, alias="containerID")
    pod: str | None = None
    endpoint: str | None = None
    service_account_name: str | None = None
    ip_networks: list[str] | None = None
    ip_nats: list[IPNAT] | None = Field(default=None, alias="ipNATs")
    ipv4_gateway: str | None = None
    ipv6_gateway: str | None = None
    profiles: list[str] | None = None
    interface_name: str | None = None
    mac: str | None = None
    ports: list[WorkloadEndpointPort] | None = None
    allow_spoofed_source_prefixes: list[str] | None = None
    qos_controls: QoSControls | None = Field(default=None, alias="qosControls")

    @field_validator("orchestrator", "workload", "node", "pod", "endpoint", "service_account_name")
    @classmethod
    def _name_fields(cls, value: str | None) -> str | None:
        return v.dns1123_subdomain(value) if value else value

    @field_validator("container_id")
    @classmethod
    def _cid(cls, value: str | None) -> str | None:
        return v.container_id(value) if value else value

    @field_validator("ip_networks")
    @classmethod
    def _networks(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            if v.is_ipv4_host_cidr(item):  # the common case, without two ipaddress parses
                continue
            v.cidr(item, strict=True)
            net = ipaddress.ip_network(item)
            if net.num_addresses != 1:
                raise ValueError(f"{item!r}: only /32 (IPv4) or /128 (IPv6) networks are supported")
        return value

    @field_validator("ipv4_gateway")
    @classmethod
    def _gw4(cls, value: str | None) -> str | None:
        return v.ip_address(value, 4) if value else value

    @field_validator("ipv6_gateway")
    @classmethod
    def _gw6(cls, value: str | None) -> str | None:
        return v.ip_address(value, 6) if value else value

    @field_validator("profiles")
    @classmethod
    def _profiles(cls, value: list[str] | None) -> list[str] | None:
        return _names(value)

    @field_validator("interface_name")
    @classmethod
    def _iface(cls, value: str | None) -> str | None:
        return v.interface_name(value) if value is not None else value

    @field_validator("mac")
    @classmethod
    def _mac(cls, value: str | None) -> str | None:
        return v.mac_address(value) if value else value

    @field_validator("allow_spoofed_source_prefixes")
    @classmethod
    def _spoof(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            v.cidr(item)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        issues: list[tuple[Loc, str]] = []
        if not self.interface_name:
            issues.append((("interfaceName",), "interfaceName must be specified"))
        # Parsed only when there are NATs to check (a Felix start validates every endpoint).
        nets = [ipaddress.ip_network(n) for n in self.ip_networks or []] if self.ip_nats else []
        for i, nat in enumerate(self.ip_nats or []):
            ip = ipaddress.ip_address(nat.internal_ip)
            if not any(ip in n for n in nets):
                msg = f"internalIP {nat.internal_ip} is not one of the endpoint's ipNetworks"
                issues.append((("ipNATs", i, "internalIP"), msg))
        v.raise_issues(issues)
        return self


@register
class WorkloadEndpoint(Resource):
    """A pod/VM/container interface. Normally written by the CNI plugin, not by users."""

    KIND: ClassVar[str] = "WorkloadEndpoint"

    spec: WorkloadEndpointSpec
