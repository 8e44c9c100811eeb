"""The ``calicoctl ipam`` command group: show, check, release, configure.

The group does not know how to reach a datastore: ``ctx.obj`` must provide ``client()``
returning a typed :class:`~calico.datastore.client.Client` (and optionally ``version``, the
calicoctl version written into and checked against ``ipam check`` reports), so calicoctl can
attach it after its own config loading and version checks. Errors go to stderr without a
prefix and exit 1, like the rest of calicoctl.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Sequence
from typing import IO, Any

import click
from pydantic import ValidationError

from calico.datastore.client import Client
from calico.datastore.errors import DatastoreError, ResourceDoesNotExistError
from calico.ipam.allocator import IPAMClient, ReleaseOptions
from calico.ipam.blocks import BadSequenceNumber
from calico.ipam.check import load_report, run_check, write_report
from calico.ipam.store import IPAMStore
from calico.ipam.usage import get_utilization

TRUE_WORDS = {"1", "t", "T", "TRUE", "true", "True"}
FALSE_WORDS = {"0", "f", "F", "FALSE", "false", "False"}


class IpamCommandError(click.ClickException):
    """Printed bare on stderr (no ``Error:`` prefix), exit code 1."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.message, file=file or sys.stderr)


def _client(ctx: click.Context) -> Client:
    obj = ctx.find_root().obj if ctx.obj is None else ctx.obj
    if obj is None:
        raise IpamCommandError("no datastore client configured for the ipam commands")
    return obj() if callable(obj) and not hasattr(obj, "client") else obj.client()


def _version(ctx: click.Context) -> str:
    version = getattr(ctx.obj, "version", None)
    if version:
        return str(version)
    from calico.buildinfo import build_info

    return build_info().version


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()
) -> str:
    """A go-pretty default-style box table, as calicoctl prints them."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: Sequence[str], header: bool) -> str:
        parts = [
            c.rjust(w) if (i in right and not header) else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(parts) + " |"

    out = [border, line(headers, True), border]
    out += [line(r, False) for r in rows]
    if rows:
        out.append(border)
    return "\n".join(out)


def _count(n: int) -> str:
    return f"{float(n):.5g}"


def _pct(n: int, capacity: int) -> str:
    share = 100.0 * n / capacity if capacity else 0.0
    return f"{float(n):.5g} ({share:.0f}%)"


@click.group("ipam", help="IP address management.")
def ipam() -> None:
    pass


# -- show ------------------------------------------------------------------------------------


@ipam.command(
    "show", help="Show details of a Calico configuration, IP address, or overall IP usage."
)
@click.option("--ip", "ip", default=None, help="Report whether this specific IP address is in use.")
@click.option(
    "--show-blocks", is_flag=True, help="Show detailed information for IP blocks as well as pools."
)
@click.option(
    "--show-borrowed", is_flag=True, help='Show detailed information for "borrowed" IP addresses.'
)
@click.option("--show-configuration", is_flag=True, help="Show current Calico IPAM configuration.")
@click.pass_context
def show(
    ctx: click.Context,
    ip: str | None,
    show_blocks: bool,
    show_borrowed: bool,
    show_configuration: bool,
) -> None:
    client = _client(ctx)
    try:
        if ip is not None:
            _show_ip(client, _valid_ip(ip))
        elif show_borrowed:
            _show_borrowed(client)
        elif show_configuration:
            _show_configuration(client)
        else:
            _show_usage(client, show_blocks)
    except DatastoreError as exc:
        raise IpamCommandError(str(exc)) from None


def _valid_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise IpamCommandError(f"invalid IP address specified: {text}") from None


def _show_ip(client: Client, ip: str) -> None:
    try:
        handle, attrs = IPAMClient(client).get_assignment_attributes(ip)
    except ResourceDoesNotExistError:
        click.echo(f"{ip} is not assigned")
        return
    click.echo(f"IP {ip} is in use")
    click.echo(f"Handle ID: {handle}" if handle is not None else "Handle ID: <none>")
    if attrs:
        click.echo("Active Owner Attributes:")
        for key in sorted(attrs):
            click.echo(f"  {key}: {attrs[key]}")
    else:
        click.echo("No Active Owner attributes defined")


def _show_usage(client: Client, show_blocks: bool) -> None:
    headers = ["GROUPING", "CIDR", "IPS TOTAL", "IPS IN USE", "IPS RESERVED", "IPS FREE"]

    def row(kind: str, cidr: str, cap: int, used: int, reserved: int, free: int) -> list[str]:
        return [kind, cidr, _count(cap), _pct(used, cap), _pct(reserved, cap), _pct(free, cap)]

    rows: list[list[str]] = []
    for pool in get_utilization(client):
        if pool.cidr is not None:
            rows.append(
                row("IP Pool", str(pool.cidr), pool.capacity, pool.in_use, pool.reserved, pool.free)
            )
        if show_blocks:
            rows += [
                row("Block", str(b.cidr), b.capacity, b.in_use, b.reserved, b.free)
                for b in pool.blocks
            ]
    click.echo(render_table(headers, rows, frozenset({2, 3, 4, 5})))


def _show_borrowed(client: Client) -> None:
    rows: list[list[str]] = []
    unclassified = 0
    for stored in IPAMStore(client).list_blocks():
        block = stored.block
        owner = (block.affinity or "").split(":", 1)[-1]
        for ordinal in range(block.size):
            attr = block.attr_of(ordinal)
            if attr is None:
                continue
            sec = attr.secondary or {}
            node = sec.get("node")
            if node is None:
                unclassified += 1
                continue
            if node == owner:
                continue
            ns = sec.get("namespace", "")
            kind, to = "", ""
            if "vmi" in sec:
                kind, to = "vmi", f"{ns}/{sec['vmi']}"
            elif "pod" in sec:
                kind, to = "pod", f"{ns}/{sec['pod']}"
            elif "type" in sec:
                kind = sec["type"]
            rows.append([str(block.ip(ordinal)), node, str(block.cidr), owner, kind, to])
    headers = ["IP", "BORROWING-NODE", "BLOCK", "BLOCK OWNER", "TYPE", "ALLOCATED-TO"]
    click.echo(render_table(headers, rows))
    if unclassified:
        click.echo(
            f"\nNote: found {unclassified} IP allocations without an explicit node association. "
            "Unable to determine if they are borrowed."
        )


def _show_configuration(client: Client) -> None:
    cfg = IPAMClient(client).get_ipam_config()
    persistence = cfg.kube_virt_vm_address_persistence
    rows = [
        ["StrictAffinity", str(cfg.strict_affinity).lower()],
        ["AutoAllocateBlocks", str(cfg.auto_allocate_blocks).lower()],
        ["MaxBlocksPerHost", str(cfg.max_blocks_per_host)],
        ["KubeVirtVMAddressPersistence", f'"{persistence}"' if persistence else "nil"],
        ["IPCooldownSeconds", str(cfg.ip_cooldown_seconds or 0)],
    ]
    click.echo(render_table(["PROPERTY", "VALUE"], rows))


# -- check -----------------------------------------------------------------------------------


@ipam.command("check", help="Check the integrity of the IPAM datastructures.")
@click.option("-o", "--output", "output", default=None, help="Path to output report file.")
@click.option("--show-all-ips", is_flag=True, help="Print all IPs that are checked.")
@click.option(
    "--show-problem-ips",
    is_flag=True,
    help="Print all IPs that are leaked or not allocated properly.",
)
@click.pass_context
def check(
    ctx: click.Context, output: str | None, show_all_ips: bool, show_problem_ips: bool
) -> None:
    client = _client(ctx)
    out = sys.stdout
    try:
        report = run_check(
            client,
            out,
            show_all_ips=show_all_ips,
            show_problem_ips=show_problem_ips,
            version=_version(ctx),
        )
    except DatastoreError as exc:
        raise IpamCommandError(str(exc)) from None
    if output:
        write_report(report, output)


# -- release ---------------------------------------------------------------------------------


@ipam.command("release", help="Release a Calico assigned IP address.")
@click.option("--ip", "ip", default=None, help="IP address to release.")
@click.option(
    "--from-report",
    "reports",
    multiple=True,
    help="Release all leaked addresses common to all the given reports.",
)
@click.option("--force", is_flag=True, help="Force release of leaked addresses.")
@click.pass_context
def release(ctx: click.Context, ip: str | None, reports: tuple[str, ...], force: bool) -> None:
    client = _client(ctx)
    try:
        if reports:
            _release_from_reports(client, reports, force, _version(ctx))
            click.echo("You may now unlock the data store.")
            return
        if ip is not None:
            addr = _valid_ip(ip)
            if IPAMClient(client).release_ips([addr]):
                raise IpamCommandError(f"IP address {addr} is not assigned")
            click.echo(f"Successfully released IP address {addr}")
    except (DatastoreError, BadSequenceNumber) as exc:
        raise IpamCommandError(f"error: {exc}") from None


def _release_from_reports(client: Client, paths: Sequence[str], force: bool, version: str) -> None:
    try:
        cinfo = client.get("ClusterInformation", "default")
    except ResourceDoesNotExistError as exc:
        raise IpamCommandError(str(exc)) from None
    spec = cinfo.spec  # type: ignore[attr-defined]
    reports: list[dict[str, Any]] = []
    current = False
    for path in paths:
        try:
            report = load_report(path)
        except (OSError, ValueError) as exc:
            raise IpamCommandError(str(exc)) from None
        if report.get("clusterGUID") != (spec.cluster_guid or ""):
            raise IpamCommandError(
                f"cluster does not match the provided report ({path}): mismatched cluster "
                "GUID. Refusing to release"
            )
        if report.get("version") != version:
            if not force:
                raise IpamCommandError(
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
        raise IpamCommandError(
            "the provided reports are all stale - at least one should be up-to-date. Please "
            "generate a new report while the data store is locked and try again"
        )
    if spec.datastore_ready is None or spec.datastore_ready:
        if not force:
            raise IpamCommandError(
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


# -- configure -------------------------------------------------------------------------------


@ipam.command("configure", help="Configure IPAM.")
@click.option(
    "--strictaffinity",
    "strict",
    default=None,
    help="Set StrictAffinity to true/false. When StrictAffinity is true, borrowing "
    "IP addresses is not allowed.",
)
@click.option(
    "--max-blocks-per-host",
    "max_blocks",
    default=None,
    help="Set the maximum number of blocks that can be affine to a host.",
)
@click.pass_context
def configure(ctx: click.Context, strict: str | None, max_blocks: str | None) -> None:
    client = _client(ctx)
    strict_value: bool | None = None
    if strict:
        if strict not in TRUE_WORDS | FALSE_WORDS:
            raise IpamCommandError("invalid value. Use true or false to set strictaffinity")
        strict_value = strict in TRUE_WORDS
    blocks_value: int | None = None
    if max_blocks:
        try:
            blocks_value = int(max_blocks)
        except ValueError:
            raise IpamCommandError("invalid value for maxblockhost. Use a valid number") from None
    if strict_value is None and blocks_value is None:
        raise IpamCommandError("at least one configuration option must be specified")
    ipam_client = IPAMClient(client)
    try:
        cfg = ipam_client.get_ipam_config()
        update: dict[str, Any] = {}
        if strict_value is not None:
            update["strict_affinity"] = strict_value
        if blocks_value is not None:
            update["max_blocks_per_host"] = blocks_value
        ipam_client.set_ipam_config(cfg.model_copy(update=update))
    except ValidationError as exc:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise IpamCommandError(f"error: {problems}") from None
    except DatastoreError as exc:
        raise IpamCommandError(f"error: {exc}") from None
    if strict_value is not None:
        click.echo(f"Successfully set StrictAffinity to: {str(strict_value).lower()}")
    if blocks_value is not None:
        click.echo(f"Successfully set MaxBlocksPerHost to: {blocks_value}")
