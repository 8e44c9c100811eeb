"""Test helpers for calc-graph nodes: a PipelineCallbacks that records every call, and a way
to turn v3 YAML into the exact ``(key, value)`` updates the Felix syncer would dispatch (by
running the real update processors), so node tests exercise the processor contract too."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from calico.api import load_documents, resource_to_wire
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import (
    Encapsulation,
    GlobalBGPConfigUpdate,
    HostEndpoint,
    HostEndpointID,
    HostMetadataV4V6Update,
    IPAMPool,
    IPSetType,
    NamespaceID,
    Policy,
    PolicyID,
    Profile,
    ProfileID,
    RouteUpdate,
    ServiceAccountID,
    ServiceUpdate,
    VXLANTunnelEndpointUpdate,
    WireguardEndpointUpdate,
    WireguardEndpointV6Update,
    WorkloadEndpoint,
    WorkloadEndpointID,
)
from calico.model import ResourceKey
from calico.model.processors import process
from calico.model.values import decode_value, encode_value

Call = tuple[Any, ...]


class RecordingCallbacks:
    """Implements PipelineCallbacks; ``calls`` is ``[(method_name, *args), ...]`` in order.
    Mapping arguments are copied to plain dicts so later mutation by the caller shows up."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def take(self) -> list[Call]:
        """The calls since the last ``take()``."""
        out, self.calls = self.calls, []
        return out

    def _rec(self, name: str, *args: Any) -> None:
        self.calls.append((name, *(dict(a) if isinstance(a, Mapping) else a for a in args)))

    # -- IP sets ---------------------------------------------------------------------------
    def on_ipset_added(self, set_id: str, set_type: IPSetType) -> None:
        self._rec("on_ipset_added", set_id, set_type)

    def on_ipset_removed(self, set_id: str) -> None:
        self._rec("on_ipset_removed", set_id)

    def on_ipset_member_added(self, set_id: str, member: str) -> None:
        self._rec("on_ipset_member_added", set_id, member)

    def on_ipset_member_removed(self, set_id: str, member: str) -> None:
        self._rec("on_ipset_member_removed", set_id, member)

    # -- rules -----------------------------------------------------------------------------
    def on_policy_active(self, policy_id: PolicyID, policy: Policy) -> None:
        self._rec("on_policy_active", policy_id, policy)

    def on_policy_inactive(self, policy_id: PolicyID) -> None:
        self._rec("on_policy_inactive", policy_id)

    def on_profile_active(self, profile_id: ProfileID, profile: Profile) -> None:
        self._rec("on_profile_active", profile_id, profile)

    def on_profile_inactive(self, profile_id: ProfileID) -> None:
        self._rec("on_profile_inactive", profile_id)

    # -- endpoints -------------------------------------------------------------------------
    def on_workload_endpoint_update(
        self, endpoint_id: WorkloadEndpointID, endpoint: WorkloadEndpoint | None
    ) -> None:
        self._rec("on_workload_endpoint_update", endpoint_id, endpoint)

    def on_host_endpoint_update(
        self, endpoint_id: HostEndpointID, endpoint: HostEndpoint | None
    ) -> None:
        self._rec("on_host_endpoint_update", endpoint_id, endpoint)

    # -- config ----------------------------------------------------------------------------
    def on_config_update(
        self,
        global_config: Mapping[str, str],
        selector_config: Mapping[str, str],
        host_config: Mapping[str, str],
    ) -> None:
        self._rec("on_config_update", global_config, selector_config, host_config)

    def on_datastore_not_ready(self) -> None:
        self._rec("on_datastore_not_ready")

    # -- pass-through and derived state ----------------------------------------------------
    def on_host_metadata_update(self, update: HostMetadataV4V6Update) -> None:
        self._rec("on_host_metadata_update", update)

    def on_host_metadata_remove(self, hostname: str) -> None:
        self._rec("on_host_metadata_remove", hostname)

    def on_ip_pool_update(self, pool_id: str, pool: IPAMPool) -> None:
        self._rec("on_ip_pool_update", pool_id, pool)

    def on_ip_pool_remove(self, pool_id: str) -> None:
        self._rec("on_ip_pool_remove", pool_id)

    def on_service_account_update(self, sa_id: ServiceAccountID, labels: Mapping[str, str]) -> None:
        self._rec("on_service_account_update", sa_id, labels)

    def on_service_account_remove(self, sa_id: ServiceAccountID) -> None:
        self._rec("on_service_account_remove", sa_id)

    def on_namespace_update(self, ns_id: NamespaceID, labels: Mapping[str, str]) -> None:
        self._rec("on_namespace_update", ns_id, labels)

    def on_namespace_remove(self, ns_id: NamespaceID) -> None:
        self._rec("on_namespace_remove", ns_id)

    def on_wireguard_update(self, update: WireguardEndpointUpdate) -> None:
        self._rec("on_wireguard_update", update)

    def on_wireguard_remove(self, hostname: str) -> None:
        self._rec("on_wireguard_remove", hostname)

    def on_wireguard_v6_update(self, update: WireguardEndpointV6Update) -> None:
        self._rec("on_wireguard_v6_update", update)

    def on_wireguard_v6_remove(self, hostname: str) -> None:
        self._rec("on_wireguard_v6_remove", hostname)

    def on_global_bgp_config_update(self, update: GlobalBGPConfigUpdate) -> None:
        self._rec("on_global_bgp_config_update", update)

    def on_service_update(self, update: ServiceUpdate) -> None:
        self._rec("on_service_update", update)

    def on_service_remove(self, name: str, namespace: str) -> None:
        self._rec("on_service_remove", name, namespace)

    def on_encap_update(self, encap: Encapsulation) -> None:
        self._rec("on_encap_update", encap)

    def on_route_update(self, update: RouteUpdate) -> None:
        self._rec("on_route_update", update)

    def on_route_remove(self, dst: str) -> None:
        self._rec("on_route_remove", dst)

    def on_vtep_update(self, update: VXLANTunnelEndpointUpdate) -> None:
        self._rec("on_vtep_update", update)

    def on_vtep_remove(self, node: str) -> None:
        self._rec("on_vtep_remove", node)


# --- feeding v3 resources through the real processors ---------------------------------------


def wire_round_trip(key: Any, value: Any) -> Any:
    """``value`` through its v1 JSON and back, as across a process boundary (Typha); the
    round trip must not change it."""
    decoded = decode_value(key, json.loads(json.dumps(encode_value(key, value))))
    assert decoded == value, (key, value, decoded)
    return decoded


def updates_from_yaml(text: str, *, delete: bool = False) -> list[tuple[Any, Any]]:
    """``(key, value)`` pairs the Felix syncer would emit for the resources in ``text``
    (values JSON round-tripped, as through Typha). ``delete=True`` gives the deletions of
    everything those resources produce."""
    out: list[tuple[Any, Any]] = []
    for res in load_documents(text):
        wire = resource_to_wire(res)
        source = ResourceKey(res.KIND, res.metadata.name, res.metadata.namespace or "")
        for key, value in process(source, wire).items():
            out.append((key, None if delete else wire_round_trip(key, value)))
    return out


def feed(fanout: TypeFanout, text: str, *, delete: bool = False) -> None:
    """Fan out every update ``updates_from_yaml`` makes of ``text``."""
    for key, value in updates_from_yaml(text, delete=delete):
        fanout.on_update(key, value)
