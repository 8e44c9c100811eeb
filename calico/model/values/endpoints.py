"""v1 endpoint-side values: workload and host endpoints, their ports and NATs, network sets and
profile labels (upstream ``backend/model`` WorkloadEndpoint, HostEndpoint, NetworkSet...).

Addresses and CIDRs are held as the canonical strings the update processors write
(``10.65.0.2/32``, lower-case MACs): the label index and the dataplane want text, and a value
that came off the wire is checked by the calc graph's validation filter before use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from calico.model.values.codec import (
    V1Value,
    ValueJSONError,
    integer,
    items,
    opt_int_or_text,
    opt_text,
    string_map,
    text,
    texts,
)


@dataclass(frozen=True, slots=True)
class EndpointPort(V1Value):
    """A named port an endpoint exposes (rules may refer to it by name)."""

    name: str = text("name")
    protocol: int | str | None = opt_int_or_text("protocol", omitempty=False)
    port: int = integer("port")


@dataclass(frozen=True, slots=True)
class IPNAT(V1Value):
    """A 1:1 NAT of an endpoint address (``ipNATs`` in v3)."""

    int_ip: str = text("int_ip")
    ext_ip: str = text("ext_ip")


@dataclass(frozen=True, slots=True)
class WorkloadEndpoint(V1Value):
    """``/calico/v1/host/<h>/workload/<o>/<w>/endpoint/<e>``: a pod's interface."""

    state: str = text("state")
    name: str = text("name")
    active_instance_id: str = text("active_instance_id")
    mac: str | None = opt_text("mac")
    profile_ids: tuple[str, ...] = texts("profile_ids")
    ipv4_nets: tuple[str, ...] = texts("ipv4_nets")
    ipv6_nets: tuple[str, ...] = texts("ipv6_nets")
    ipv4_nat: tuple[IPNAT, ...] = items("ipv4_nat", IPNAT, omitempty=True)
    ipv6_nat: tuple[IPNAT, ...] = items("ipv6_nat", IPNAT, omitempty=True)
    labels: Mapping[str, str] = string_map("labels")
    ipv4_gateway: str | None = opt_text("ipv4_gateway", omitempty=True)
    ipv6_gateway: str | None = opt_text("ipv6_gateway", omitempty=True)
    ports: tuple[EndpointPort, ...] = items("ports", EndpointPort, omitempty=True)
    generate_name: str = text("generate_name", omitempty=True)
    allow_spoofed_source_ips: tuple[str, ...] = texts("allow_spoofed_source_ips", omitempty=True)
    annotations: Mapping[str, str] = string_map("annotations")


@dataclass(frozen=True, slots=True)
class HostEndpoint(V1Value):
    """``/calico/v1/host/<h>/endpoint/<e>``: a host interface (or all of them) under policy."""

    name: str = text("name", omitempty=True)
    expected_ipv4_addrs: tuple[str, ...] = texts("expected_ipv4_addrs", omitempty=True)
    expected_ipv6_addrs: tuple[str, ...] = texts("expected_ipv6_addrs", omitempty=True)
    labels: Mapping[str, str] = string_map("labels", omitempty=False)
    profile_ids: tuple[str, ...] = texts("profile_ids", omitempty=True)
    ports: tuple[EndpointPort, ...] = items("ports", EndpointPort, omitempty=True)


@dataclass(frozen=True, slots=True)
class NetworkSet(V1Value):
    """``/calico/v1/netset/<name>``: addresses selectable by labels (namespaced ones inherit
    their namespace's labels through ``profile_ids``)."""

    nets: tuple[str, ...] = texts("nets")
    labels: Mapping[str, str] = string_map("labels", omitempty=False)
    profile_ids: tuple[str, ...] = texts("profile_ids", omitempty=True)


@dataclass(frozen=True, slots=True)
class ProfileLabels(V1Value):
    """``/calico/v1/policy/profile/<name>/labels``: labels every endpoint using the profile
    inherits. On the wire it is the bare ``map[string]string``, not an object with a field."""

    labels: Mapping[str, str] = string_map("labels")

    def to_json(self) -> dict[str, Any]:
        return dict(self.labels)

    @classmethod
    def from_json(cls, data: Any) -> Self:
        if not isinstance(data, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise ValueJSONError(f"ProfileLabels: expected an object of strings, got {data!r}")
        return cls(dict(data))
