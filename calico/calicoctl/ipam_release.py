"""``calicoctl ipam release --from-report``: release what every given ``ipam check`` report
found leaked, with upstream's safety policy.

Refuses unless every report is of this cluster (GUID) and this calicoctl version (``--force``
overrides the version), at least one report is current (ClusterInformation revision) and the
datastore is locked (``--force`` overrides). Releases the leaked addresses common to all reports,
then the leaked handles unchanged in all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from calico.calicoctl.errors import CtlError
from calico.datastore.client import Client
from calico.datastore.errors import DatastoreError, ResourceDoesNotExistError
from calico.ipam.allocator import IPAMClient, ReleaseOptions
from calico.ipam.blocks import BadSequenceNumber
from calico.ipam.check import load_report


def release_from_reports(client: Client, paths: Sequence[str], force: bool, version: str) -> None:
    try:
        cinfo = client.get("ClusterInformation", "default")
    except ResourceDoesNotExistError as exc:
        raise CtlError(str(exc)) from None
    spec = cinfo.spec  # type: ignore[attr-defined]
    reports: list[dict[str, Any]] = []
    current = False
    for path in paths:
        try:
            report = load_report(path)
        except (OSError, ValueError) as exc:
            raise CtlError(str(exc)) from None
        if report.get("clusterGUID") != (spec.cluster_guid or ""):
            raise CtlError(
                f"cluster does not match the provided report ({path}): mismatched cluster "
                "GUID. Refusing to release"
            )
        if report.get("version") != version:
            if not force:
                raise CtlError(
                    f"the provided report ({path}) was produced using a different version "
                    f"({report.get('version')}) of calicoctl. Refusing to release"
                )
            click.echo(
                "WARNING: Report was produced using a different version of calicoctl. "
                "Ignoring due to --force option"
            )
        if report.get("clusterInformationRevision") == cinfo.metadata.resource_version:
            current = True
        reports.append(report)
    if not current:
        raise CtlError(
            "the provided reports are all stale - at least one should be up-to-date. Please "
            "generate a new report while the data store is locked and try again"
        )
    if spec.datastore_ready is None or spec.datastore_ready:
        if not force:
            raise CtlError(
                "data store is not locked. Either lock the data store, or re-run with --force"
            )
        click.echo("WARNING: Data store is not locked. Ignoring due to --force option")
    ips, handles = merge_reports(reports)
    ipam_client = IPAMClient(client)
    if ips:
        click.echo(f"Releasing {len(ips)} old IPs...")
        try:
            unallocated = ipam_client.release_ips(list(ips.values()))
        except (DatastoreError, BadSequenceNumber) as exc:
            click.echo(
                f"An error occurred while releasing some IPs: {exc}.  Problems are often "
                "caused by an out-of-date IPAM report.  Try regenerating the IPAM report and "
                "retry."
            )
        else:
            click.echo(f"Released {len(ips) - len(unallocated)} IPs successfully")
            if unallocated:
                click.echo(
                    f"{len(unallocated)} addresses marked as leaked in the report had already "
                    "been cleaned up."
                )
    else:
        click.echo("Report didn't contain any leaked IPs to clean up.")
    if handles:
        _delete_handles(ipam_client, handles)
    else:
        click.echo("Report didn't contain any handles to clean up.")


def merge_reports(
    reports: Sequence[dict[str, Any]],
) -> tuple[dict[str, ReleaseOptions], dict[str, dict[str, Any]]]:
    """Leaked IPs present in every report, and handles unchanged (same revision) in all."""
    ips: dict[str, ReleaseOptions] | None = None
    handles: dict[str, dict[str, Any]] | None = None
    for report in reports:
        merged: dict[str, ReleaseOptions] = {}
        for allocs in (report.get("allocations") or {}).values():
            for a in allocs:
                if a.get("inUse") or (ips is not None and a["ip"] not in ips):
                    continue
                merged[a["ip"]] = ReleaseOptions(
                    a["ip"], a.get("handle") or None, a.get("sequenceNumber")
                )
        ips = merged
        kept: dict[str, dict[str, Any]] = {}
        for h in report.get("leakedHandles") or []:
            if handles is None or (
                h["ID"] in handles and handles[h["ID"]]["Revision"] == h["Revision"]
            ):
                kept[h["ID"]] = h
        handles = kept
    return ips or {}, handles or {}


def _delete_handles(ipam_client: IPAMClient, handles: dict[str, dict[str, Any]]) -> None:
    click.echo(f"Deleting {len(handles)} handles...")
    click.echo("Key: '.' = Deleted OK; 'x' = skip, handle missing/changed.")
    ok = skipped = errors = 0
    for info in handles.values():
        handle = ipam_client.store.get_handle(info["ID"])
        if (
            handle is None
            or handle.metadata.resource_version != info["Revision"]
            or (info.get("UID") and handle.metadata.uid != info["UID"])
        ):
            skipped += 1
            click.echo("x", nl=False)
            continue
        try:
            ipam_client.store.delete_handle(handle)
        except ResourceDoesNotExistError:
            skipped += 1
            click.echo("x", nl=False)
        except DatastoreError as exc:
            errors += 1
            click.echo(f"\nDeleting handle {info['ID']} failed: {exc}.")
        else:
            ok += 1
            click.echo(".", nl=False)
    click.echo()
    click.echo(f"Released {ok} handles; {skipped} skipped; {errors} errors.")
