"""Get this host's Node, apply what the environment says about it, and write it back.

Shared by ``startup`` (addresses, AS number, orchestrator ref) and ``monitor-addresses``
(addresses only). A Node is written only when something changed, so restarts are cheap and do
not churn resourceVersions other components watch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from calico.api import APIError, Resource, parse_resource, resource_to_wire
from calico.api import validators as v
from calico.datastore.client import Client
from calico.datastore.errors import DatastoreError, ResourceDoesNotExistError
from calico.node import autodetect as ad
from calico.node.errors import NodeError
from calico.node.interfaces import Interface
from calico.node.node_ips import AutodetectFailed, configure_ips, conflicts

log = logging.getLogger(__name__)


def get_node(client: Client, name: str) -> Resource | None:
    try:
        return client.get("Node", name)
    except ResourceDoesNotExistError:
        log.info("Building new node resource %s", name)
        return None


def _blank(name: str) -> dict[str, Any]:
    return {"apiVersion": "projectcalico.org/v3", "kind": "Node", "metadata": {"name": name}}


def write_node(client: Client, wire: dict[str, Any]) -> Resource:
    try:
        node = parse_resource(wire)
    except APIError as exc:
        raise NodeError(f"invalid Node resource: {str(exc).replace(chr(10), '; ')}") from None
    try:
        if node.metadata.resource_version:
            return client.update(node)
        return client.create(node)
    except DatastoreError as exc:
        raise NodeError(f"Unable to set node resource configuration: {exc}") from None


def _clear_stale(client: Client, node: Resource, versions: Sequence[int]) -> None:
    """Drop addresses that autodetection can no longer vouch for, so another node may take
    them (upstream does this before exiting)."""
    if not versions:
        return
    wire = resource_to_wire(node)
    bgp = wire.get("spec", {}).get("bgp") or {}
    for version in versions:
        old = bgp.pop("ipv4Address" if version == 4 else "ipv6Address", None)
        if old:
            log.info("Clearing out-of-date IPv%d address %s from this node", version, old)
    if bgp:
        wire["spec"]["bgp"] = bgp
    else:
        wire.get("spec", {}).pop("bgp", None)
    try:
        client.update(parse_resource(wire))
    except (APIError, DatastoreError) as exc:
        log.warning("Failed to clear node addresses: %s", exc)


def _autodetected(env: Mapping[str, str], versions: Sequence[int]) -> list[int]:
    return [v for v in versions if env.get("IP" if v == 4 else "IP6") == "autodetect"]


def _configure_as(spec: dict[str, Any], env: Mapping[str, str]) -> bool:
    raw = env.get("AS", "").strip()
    if env.get("CALICO_NETWORKING_BACKEND") == "none" or not raw:
        return False
    try:
        asn = v.asn(raw)
    except ValueError:
        raise NodeError(
            f"The AS number specified in the environment (AS={raw}) is not valid"
        ) from None
    log.info("Using AS number specified in environment (AS=%s)", raw)
    bgp = spec.setdefault("bgp", {})
    changed = bgp.get("asNumber") != asn
    bgp["asNumber"] = asn
    return changed


def _configure_node_ref(spec: dict[str, Any], env: Mapping[str, str]) -> bool:
    ref = env.get("CALICO_K8S_NODE_REF", "").strip()
    if not ref:
        return False
    wanted = [{"nodeName": ref, "orchestrator": "k8s"}]
    changed = spec.get("orchRefs") != wanted
    spec["orchRefs"] = wanted
    return changed


def sync_node(
    client: Client,
    name: str,
    env: Mapping[str, str],
    list_ifaces: Callable[[], Sequence[Interface]],
    reach: ad.Reach = ad.udp_reach,
    *,
    addresses_only: bool = False,
) -> tuple[Resource | None, bool]:
    """Bring the Node up to date; returns (the stored Node or None, whether it was written)."""
    node = get_node(client, name)
    wire = resource_to_wire(node) if node is not None else _blank(name)
    spec = wire.setdefault("spec", {})
    try:
        ips = configure_ips(spec, env, list_ifaces, reach)
    except AutodetectFailed:
        if node is not None:
            _clear_stale(client, node, _autodetected(env, (4, 6)))
        raise
    if ips.changed and env.get("DISABLE_NODE_IP_CHECK") != "true":
        found = conflicts(name, spec, client.list("Node").items)
        if found:
            if node is not None:
                _clear_stale(client, node, _autodetected(env, sorted(found)))
            version, other = sorted(found.items())[0]
            addr = spec["bgp"]["ipv4Address" if version == 4 else "ipv6Address"]
            raise NodeError(
                f"conflicting node detected: Calico node '{other}' is already using the "
                f"IPv{version} address {addr.split('/')[0]} (set DISABLE_NODE_IP_CHECK=true "
                "to skip this check)"
            )
    changed = ips.changed
    if not addresses_only:
        changed = _configure_as(spec, env) or changed
        changed = _configure_node_ref(spec, env) or changed
    if not changed:
        return node, False
    return write_node(client, wire), True
