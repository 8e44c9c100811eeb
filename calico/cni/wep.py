"""The WorkloadEndpoint (and default Profile) the plugin writes for Felix to act on."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from calico.cni.errors import DATASTORE_FAILURE, CNIError
from calico.cni.identity import K8S, NAMESPACE_LABEL, ORCHESTRATOR_LABEL, Identity, profiles_for
from calico.cni.netconf import NetConf

if TYPE_CHECKING:
    from calico.cni.store import Store
    from calico.datastore.client import Client

log = logging.getLogger(__name__)

_RETRIES = 5


def build(
    ident: Identity,
    conf: NetConf,
    networks: Sequence[str],
    host_ifname: str,
    container_mac: str,
) -> Any:
    from calico.api.endpoints import WorkloadEndpoint

    labels = dict(conf.mesos_labels)
    labels[NAMESPACE_LABEL] = ident.namespace
    labels[ORCHESTRATOR_LABEL] = ident.orchestrator
    spec: dict[str, Any] = {
        "orchestrator": ident.orchestrator,
        "node": ident.node,
        "endpoint": ident.endpoint,
        "containerID": ident.container_id,
        "ipNetworks": list(networks),
        "profiles": profiles_for(ident, conf),
        "interfaceName": host_ifname,
        "mac": container_mac,
    }
    if ident.orchestrator == K8S:
        spec["pod"] = ident.workload
    else:
        spec["workload"] = ident.workload
    return WorkloadEndpoint.model_validate(
        {
            "metadata": {"name": ident.wep_name, "namespace": ident.namespace, "labels": labels},
            "spec": spec,
        }
    )


def get(client: Client, ident: Identity) -> Any | None:
    from calico.datastore.errors import ResourceDoesNotExistError

    try:
        return client.get("WorkloadEndpoint", ident.wep_name, ident.namespace)
    except ResourceDoesNotExistError:
        return None


def create_or_update(
    store: Store,
    ident: Identity,
    conf: NetConf,
    networks: Sequence[str],
    host_ifname: str,
    container_mac: str,
) -> None:
    """Write the endpoint: a plain create on stored JSON when it is new (the common case),
    else the typed :func:`build` and :func:`write`."""
    from calico.cni import lean

    try:
        lean.create_wep(
            store.backend, lean.wep_doc(ident, conf, networks, host_ifname, container_mac)
        )
        return
    except lean.NotLean as exc:
        log.debug("Typed endpoint write: %s", exc)
    write(store.client, build(ident, conf, networks, host_ifname, container_mac))


def write(client: Client, wep: Any) -> Any:
    """Create, or replace an existing endpoint of the same name (a restarted sandbox)."""
    from calico.datastore.errors import (
        ResourceAlreadyExistsError,
        ResourceDoesNotExistError,
        UpdateConflictError,
    )

    for _ in range(_RETRIES):
        try:
            return client.create(wep)
        except ResourceAlreadyExistsError:
            pass
        try:
            return client.update(wep)
        except (ResourceDoesNotExistError, UpdateConflictError):
            continue
    raise CNIError(DATASTORE_FAILURE, f"could not write WorkloadEndpoint {wep.metadata.name}")


def remove(store: Store, ident: Identity) -> str:
    """:func:`delete`, on stored JSON unless that declines (:func:`calico.cni.lean.delete_wep`)."""
    from calico.cni import lean

    try:
        outcome, owner = lean.delete_wep(store.backend, ident)
    except lean.NotLean as exc:
        log.debug("Typed endpoint delete: %s", exc)
        return delete(store.client, ident)
    if outcome == "kept":
        log.info("Keeping WorkloadEndpoint %s: it belongs to container %s", ident.wep_name, owner)
    return outcome


def delete(client: Client, ident: Identity) -> str:
    """Delete our endpoint: "deleted", "absent", or "kept" when another sandbox owns it now.

    A different (non-empty) containerID means kubelet already started a new sandbox for the pod
    and this DEL is for the old one: deleting would cut the live pod off.
    """
    from calico.datastore.errors import ResourceDoesNotExistError, UpdateConflictError

    for _ in range(_RETRIES):
        current = get(client, ident)
        if current is None:
            return "absent"
        owner = current.spec.container_id
        if owner and owner != ident.container_id:
            log.info(
                "Keeping WorkloadEndpoint %s: it belongs to container %s", ident.wep_name, owner
            )
            return "kept"
        try:
            client.delete(
                "WorkloadEndpoint",
                ident.wep_name,
                ident.namespace,
                resource_version=current.metadata.resource_version,
                uid=current.metadata.uid,
            )
            return "deleted"
        except ResourceDoesNotExistError:
            return "absent"
        except UpdateConflictError:
            continue
    raise CNIError(DATASTORE_FAILURE, f"could not delete WorkloadEndpoint {ident.wep_name}")


def ensure_profile(store: Store, ident: Identity, conf: NetConf) -> None:
    """Create the network's Profile if missing (never update an existing one)."""
    from calico.cni.lean import profile_exists

    if conf.policy_type or profile_exists(store.backend, conf.name):
        return  # one key read, no model: the profile exists on every ADD but a network's first
    from calico.api.endpoints import Profile
    from calico.datastore.errors import ResourceAlreadyExistsError

    ingress: dict[str, Any] = {"action": "Allow"}
    if ident.orchestrator != K8S:
        ingress["source"] = {"selector": f"has({conf.name})"}
    profile = Profile.model_validate(
        {
            "metadata": {"name": conf.name},
            "spec": {
                "ingress": [ingress],
                "egress": [{"action": "Allow"}],
                "labelsToApply": {conf.name: ""},
            },
        }
    )
    with contextlib.suppress(ResourceAlreadyExistsError):
        store.client.create(profile)
