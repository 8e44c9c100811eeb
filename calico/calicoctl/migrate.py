"""``datastore migrate export|import|lock|unlock``: move a cluster's data to another datastore.

The export file has upstream's three sections, separated by lines holding ``===``:

1. every v3 resource except ClusterInformation, as YAML documents in dependency order (tiers
   before policies, IP pools before IPAM blocks, nodes before what refers to them), with
   server-owned metadata (uid, resourceVersion, creationTimestamp) removed;
2. ClusterInformation ``default`` as JSON (import carries its clusterGUID and calicoVersion over);
3. the raw IPAM keys (everything under ``/calico/ipam/``) as JSON, copied byte for byte: both
   datastores share upstream's key layout, so block allocations and handles survive unchanged.

Export refuses to run unless the source is locked (``datastoreReady: false``) so nothing changes
while it is read; import refuses a target that already holds Calico data, validates the whole file
before writing, and leaves the target locked until ``unlock``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from calico.api import APIError, Resource, kinds, load_documents, resource_to_wire
from calico.api.policy import BUILT_IN_TIERS
from calico.calicoctl import actions
from calico.calicoctl.errors import CtlError, go_errors, handle_errors, report
from calico.calicoctl.inputs import read_input
from calico.calicoctl.printer import EXPORT_STRIPPED, render_yaml
from calico.calicoctl.session import client_version, config_option, global_options, open_client
from calico.datastore.client import Client
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreError,
    ResourceDoesNotExistError,
)

SECTION = "===\n"
IPAM_PREFIX = "/calico/ipam/"
# Dependency order; kinds not named here follow in registry order.
EXPORT_ORDER = (
    "Tier",
    "IPPool",
    "IPReservation",
    "IPAMConfiguration",
    "BGPConfiguration",
    "BGPFilter",
    "BGPPeer",
    "Node",
    "FelixConfiguration",
    "KubeControllersConfiguration",
    "Profile",
    "GlobalNetworkSet",
    "NetworkSet",
    "HostEndpoint",
    "WorkloadEndpoint",
    "GlobalNetworkPolicy",
    "StagedGlobalNetworkPolicy",
    "NetworkPolicy",
    "StagedNetworkPolicy",
    "StagedKubernetesNetworkPolicy",
    "BlockAffinity",
    "IPAMBlock",
    "IPAMHandle",
)
NOT_EXPORTED = frozenset({"ClusterInformation"})
# On the Kubernetes datastore these kinds are views of Nodes, Pods, Namespaces and
# ServiceAccounts: always present, so not "existing data", and (but Nodes) never written.
KDD_NATIVE_KINDS = frozenset({"Node", "Profile", "WorkloadEndpoint"})
KDD_DERIVED_PROFILES = ("kns.", "ksa.", "projectcalico-default-allow")


def _is_kdd(client: Client) -> bool:
    return getattr(client.backend, "datastore_type", "") == "kubernetes"


def _kdd_skip(res: Resource) -> str | None:
    """Why an exported resource is not imported into Kubernetes (None: import it)."""
    if res.KIND == "WorkloadEndpoint":
        return "workload endpoints come from pods"
    if res.KIND == "Profile" and res.metadata.name.startswith(KDD_DERIVED_PROFILES):
        return "namespace and service-account profiles come from Kubernetes"
    return None


def export_kinds() -> list[type[Resource]]:
    registry = kinds()
    ordered = [registry[k] for k in EXPORT_ORDER if k in registry]
    rest = [c for k, c in registry.items() if k not in EXPORT_ORDER and k not in NOT_EXPORTED]
    return ordered + rest


def _exported(res: Resource) -> dict[str, Any]:
    wire = resource_to_wire(res)
    meta = wire.get("metadata", {})
    for key in EXPORT_STRIPPED:
        if key != "namespace":
            meta.pop(key, None)
    return wire


def cluster_info(client: Client, what: str) -> Resource:
    try:
        return client.get("ClusterInformation", "default")
    except ConnectionFailedError:
        raise
    except DatastoreError as exc:
        raise CtlError(f"Error retrieving ClusterInformation{what}: {exc}") from None


def is_locked(client: Client) -> bool:
    try:
        cinfo = client.get("ClusterInformation", "default")
    except ConnectionFailedError:
        raise
    except DatastoreError as exc:
        raise CtlError(
            "error while checking if datastore was locked: "
            f"Error retrieving ClusterInformation: {exc}"
        ) from None
    return cinfo.spec.datastore_ready is False  # type: ignore[attr-defined]


def set_ready(client: Client, ready: bool) -> None:
    what = "unlocking" if ready else "locking"
    try:
        client.ensure_initialized(client_version())
    except ConnectionFailedError:
        raise
    except DatastoreError as exc:
        raise CtlError(
            f"Unable to initialize cluster information for the datastore migration: {exc}"
        ) from None
    cinfo = cluster_info(client, f" for {what}")
    spec = cinfo.spec.model_copy(update={"datastore_ready": ready})  # type: ignore[attr-defined]
    try:
        client.update(cinfo.model_copy(update={"spec": spec}))
    except ConnectionFailedError:
        raise
    except DatastoreError as exc:
        raise CtlError(f"Error updating ClusterInformation for {what}: {exc}") from None


@click.group("datastore")
def datastore_group() -> None:
    """Datastore-wide operations."""


@datastore_group.group("migrate")
def migrate_group() -> None:
    """Move all Calico data between datastores (e.g. from the embedded one to etcd).

    \b
    calicoctl datastore migrate lock            (source: stop Calico acting on changes)
    calicoctl datastore migrate export > data   (source)
    calicoctl datastore migrate import -f data  (target)
    calicoctl datastore migrate unlock          (target)
    """


@migrate_group.command("lock")
@config_option
@global_options
@handle_errors
def lock_command(config_file: str | None) -> None:
    """Mark the datastore not ready (datastoreReady: false) so Calico stops acting on it."""
    _set_ready(config_file, False)


@migrate_group.command("unlock")
@config_option
@global_options
@handle_errors
def unlock_command(config_file: str | None) -> None:
    """Mark the datastore ready again (datastoreReady: true)."""
    _set_ready(config_file, True)


def _set_ready(config_file: str | None, ready: bool) -> None:
    with open_client(config_file) as client:
        set_ready(client, ready)
    click.echo("Datastore unlocked." if ready else "Datastore locked.")


@migrate_group.command("export")
@config_option
@global_options
@handle_errors
def export_command(config_file: str | None) -> None:
    """Write every resource and the IPAM state of a locked datastore to stdout."""
    with open_client(config_file) as client:
        if not is_locked(client):
            raise CtlError(
                "datastore is not locked. Run the `calicoctl datastore migrate lock` command "
                "in order to begin migration"
            )
        docs = []
        for cls in export_kinds():
            docs.extend(render_yaml(_exported(r)) for r in client.list(cls).items)
        cinfo = resource_to_wire(cluster_info(client, ""))
        ipam = [{"key": kv.key, "value": kv.value} for kv in client.backend.list(IPAM_PREFIX).kvs]
    out = sys.stdout
    out.write("".join(f"---\n{d}" for d in docs))
    out.write(SECTION)
    out.write(json.dumps(cinfo, indent=2) + "\n")
    out.write(SECTION)
    out.write(json.dumps({"kvs": ipam}, indent=2) + "\n")
    out.flush()


def _read_sections(filename: str) -> tuple[list[Resource], dict[str, Any], list[dict[str, str]]]:
    """Parse and validate the whole export file before anything is written."""
    source = "<stdin>" if filename == "-" else filename
    try:
        raw = read_input(filename)
    except OSError as exc:
        raise CtlError(f"Error while reading migration file: {exc}") from None
    text = raw.decode("utf-8", errors="replace")
    parts = text.split(SECTION)
    if len(parts) != 3:
        raise CtlError(
            f"Imported file: {source} is improperly formatted. "
            "Try recreating with 'calicoctl datastore migrate export'"
        )
    try:
        resources = load_documents(parts[0], source)
    except APIError as exc:
        raise CtlError(f"Error while reading migration file: {exc}") from None
    try:
        cinfo = json.loads(parts[1])
        ipam = json.loads(parts[2])
        kvs = ipam["kvs"]
        if not isinstance(cinfo, dict) or not all(
            isinstance(kv.get("key"), str) and isinstance(kv.get("value"), str) for kv in kvs
        ):
            raise ValueError("unexpected structure")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CtlError(f"Error while reading migration file: {source}: {exc}") from None
    return resources, cinfo, kvs


def check_empty(client: Client) -> None:
    """Upstream refuses to import over existing data; defaults from initialisation are fine."""
    kdd = _is_kdd(client)
    for cls in kinds().values():
        if cls.KIND in NOT_EXPORTED or (kdd and cls.KIND in KDD_NATIVE_KINDS):
            continue
        for res in client.list(cls).items:
            if cls.KIND == "Tier" and res.metadata.name in BUILT_IN_TIERS:
                continue
            raise CtlError(
                f"Datastore already has Calico resources: Found existing Calico {cls.KIND} "
                "resource. Clear out all Calico resources before importing."
            )
    if client.backend.list(IPAM_PREFIX).kvs:
        raise CtlError(
            "Datastore already has Calico resources: Found existing IPAM resources. "
            "Clear out all Calico resources before importing."
        )


@migrate_group.command("import")
@click.option(
    "-f",
    "--filename",
    required=True,
    metavar="FILE",
    help="File written by 'datastore migrate export' ('-' for stdin).",
)
@config_option
@global_options
@handle_errors
def import_command(filename: str, config_file: str | None) -> None:
    """Load an export into an empty datastore; it stays locked until 'migrate unlock'."""
    resources, exported_cinfo, kvs = _read_sections(filename)
    with open_client(config_file, check_version=False) as client:
        check_empty(client)
        set_ready(client, False)  # initialises a fresh target, and keeps Calico off it
        handled = 0
        kdd = _is_kdd(client)
        for res in resources:
            if kdd and _kdd_skip(res):
                handled += 1
                continue
            try:
                actions.apply(client, res)
            except ConnectionFailedError:
                raise
            except (DatastoreError, APIError) as exc:
                if kdd and res.KIND == "Node" and isinstance(exc, ResourceDoesNotExistError):
                    click.echo(
                        f"[WARNING] Attempted to import node {res.metadata.name} that references "
                        "a nonexistent Kubernetes node. Skipping that node. Non-Kubernetes nodes "
                        "are not supported in the Kubernetes datastore and will be skipped."
                    )
                    continue
                if handled:
                    click.echo(
                        f"Partial success: applied the first {handled} out of "
                        f"{len(resources)} resources:"
                    )
                report(f"Failed to import v3 resources: hit error: {go_errors([exc])}")
            handled += 1
        click.echo(f"Successfully applied {handled} resource(s)")
        _carry_cluster_identity(client, exported_cinfo)
        click.echo("Importing IPAM resources")
        for kv in kvs:
            try:
                client.backend.create(kv["key"], kv["value"])
            except ConnectionFailedError:
                raise
            except DatastoreError as exc:
                report(f"Failed to import IPAM resources: hit error: {go_errors([exc])}")
        click.echo(f"Successfully applied {len(kvs)} IPAM resource(s)")
    click.echo(
        "Datastore information successfully imported. "
        "Please refer to the datastore migration documentation for next steps."
    )


def _carry_cluster_identity(client: Client, exported: dict[str, Any]) -> None:
    """The target keeps the source's clusterGUID and calicoVersion, as upstream's import."""
    spec_in = exported.get("spec") or {}
    cinfo = cluster_info(client, " for migration")
    spec = cinfo.spec.model_copy(  # type: ignore[attr-defined]
        update={
            "cluster_guid": spec_in.get("clusterGUID") or cinfo.spec.cluster_guid,  # type: ignore[attr-defined]
            "calico_version": spec_in.get("calicoVersion") or cinfo.spec.calico_version,  # type: ignore[attr-defined]
        }
    )
    try:
        client.update(cinfo.model_copy(update={"spec": spec}))
    except ResourceDoesNotExistError as exc:
        raise CtlError(f"Failed to update cluster information: {exc}") from None
    except ConnectionFailedError:
        raise
    except DatastoreError as exc:
        raise CtlError(f"Failed to update cluster information: {exc}") from None
