"""``calicoctl ipam``: show, check, release, configure, split.

The group opens the datastore the way every calicoctl command does (``-c`` file, default file
or environment, version-mismatch check), and only when a subcommand asks for a client:
``ctx.obj`` is a session with ``client()`` and ``version`` (the calicoctl version written into
and checked against ``ipam check`` reports). Errors go to stderr without a prefix and exit 1,
like the rest of calicoctl (:class:`~calico.calicoctl.errors.CtlError`).
"""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import dataclass, field
from typing import Any

import click
from pydantic import ValidationError

from calico.boxtable import render_box_table
from calico.calicoctl.errors import CtlError, report, report_ctl_errors
from calico.calicoctl.flags import config_option, global_options
from calico.calicoctl.ipam_release import release_from_reports
from calico.calicoctl.ipam_split import parse_count, split_pool
from calico.calicoctl.session import client_version, open_client
from calico.datastore.client import Client
from calico.datastore.errors import DatastoreError, ResourceDoesNotExistError
from calico.gobool import go_bool
from calico.ipam.allocator import IPAMClient
from calico.ipam.blocks import BadSequenceNumber
from calico.ipam.check import run_check, write_report
from calico.ipam.store import IPAMStore
from calico.ipam.usage import get_utilization


@dataclass
class _Session:
    """``ctx.obj`` for the ipam commands: opens the datastore on the first ``client()`` call."""

    ctx: click.Context
    config_file: str | None
    version: str = field(default_factory=client_version)
    _client: Client | None = None

    def client(self) -> Client:
        if self._client is None:
            try:
                self._client = self.ctx.with_resource(open_client(self.config_file))
            except CtlError as exc:
                report(str(exc))
        return self._client


def _client(ctx: click.Context) -> Client:
    client: Client = ctx.obj.client()
    return client


def _version(ctx: click.Context) -> str:
    return str(ctx.obj.version)


def _count(n: int) -> str:
    return f"{float(n):.5g}"


def _pct(n: int, capacity: int) -> str:
    share = 100.0 * n / capacity if capacity else 0.0
    return f"{float(n):.5g} ({share:.0f}%)"


@click.group(
    "ipam",
    help="IP address management.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
@config_option
@global_options
@click.pass_context
def ipam_group(ctx: click.Context, config_file: str | None) -> None:
    ctx.obj = _Session(ctx, config_file)


# -- show ------------------------------------------------------------------------------------


@ipam_group.command(
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
@report_ctl_errors
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
        raise CtlError(str(exc)) from None


def _valid_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise CtlError(f"invalid IP address specified: {text}") from None


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
    click.echo(render_box_table(headers, rows, frozenset({2, 3, 4, 5})))


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
    click.echo(render_box_table(headers, rows))
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
    click.echo(render_box_table(["PROPERTY", "VALUE"], rows))


# -- check -----------------------------------------------------------------------------------


@ipam_group.command("check", help="Check the integrity of the IPAM datastructures.")
@click.option("-o", "--output", "output", default=None, help="Path to output report file.")
@click.option("--show-all-ips", is_flag=True, help="Print all IPs that are checked.")
@click.option(
    "--show-problem-ips",
    is_flag=True,
    help="Print all IPs that are leaked or not allocated properly.",
)
@click.pass_context
@report_ctl_errors
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
        raise CtlError(str(exc)) from None
    if output:
        write_report(report, output)


# -- release ---------------------------------------------------------------------------------


@ipam_group.command("release", help="Release a Calico assigned IP address.")
@click.option("--ip", "ip", default=None, help="IP address to release.")
@click.option(
    "--from-report",
    "reports",
    multiple=True,
    help="Release all leaked addresses common to all the given reports.",
)
@click.option("--force", is_flag=True, help="Force release of leaked addresses.")
@click.pass_context
@report_ctl_errors
def release(ctx: click.Context, ip: str | None, reports: tuple[str, ...], force: bool) -> None:
    client = _client(ctx)
    try:
        if reports:
            release_from_reports(client, reports, force, _version(ctx))
            click.echo("You may now unlock the data store.")
            return
        if ip is not None:
            addr = _valid_ip(ip)
            if IPAMClient(client).release_ips([addr]):
                raise CtlError(f"IP address {addr} is not assigned")
            click.echo(f"Successfully released IP address {addr}")
    except (DatastoreError, BadSequenceNumber) as exc:
        raise CtlError(f"error: {exc}") from None


# -- configure -------------------------------------------------------------------------------


@ipam_group.command("configure", help="Configure IPAM.")
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
@report_ctl_errors
def configure(ctx: click.Context, strict: str | None, max_blocks: str | None) -> None:
    client = _client(ctx)
    strict_value: bool | None = None
    if strict:
        strict_value = go_bool(strict)
        if strict_value is None:
            raise CtlError("invalid value. Use true or false to set strictaffinity")
    blocks_value: int | None = None
    if max_blocks:
        try:
            blocks_value = int(max_blocks)
        except ValueError:
            raise CtlError("invalid value for maxblockhost. Use a valid number") from None
    if strict_value is None and blocks_value is None:
        raise CtlError("at least one configuration option must be specified")
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
        raise CtlError(f"error: {problems}") from None
    except DatastoreError as exc:
        raise CtlError(f"error: {exc}") from None
    if strict_value is not None:
        click.echo(f"Successfully set StrictAffinity to: {str(strict_value).lower()}")
    if blocks_value is not None:
        click.echo(f"Successfully set MaxBlocksPerHost to: {blocks_value}")


# -- split -----------------------------------------------------------------------------------


@ipam_group.command(
    "split",
    help="Split an IP pool (given by --cidr or --name) into NUMBER smaller pools of equal size; "
    "NUMBER must be a power of 2 and the datastore must be locked "
    "(calicoctl datastore migrate lock).",
)
@click.argument("args", nargs=-1, metavar="[CIDR] NUMBER")
@click.option("--cidr", default=None, help="CIDR of the IP pool to split.")
@click.option("--name", "pool_name", default=None, help="Name of the IP pool to split.")
@config_option
@global_options
@click.pass_context
@report_ctl_errors
def split(
    ctx: click.Context,
    args: tuple[str, ...],
    cidr: str | None,
    pool_name: str | None,
    config_file: str | None,
) -> None:
    # Current upstream takes `split NUMBER --cidr=|--name=`; its first release took
    # `split CIDR NUMBER`, which still works here.
    if len(args) == 2 and not cidr:
        cidr, number = args
    elif len(args) == 1:
        (number,) = args
    else:
        raise CtlError(
            f"invalid option: 'calicoctl ipam split {' '.join(args)}'. Use flag '--help' to "
            "read about a specific subcommand"
        )
    parts = parse_count(number)
    if config_file:
        ctx.obj.config_file = config_file
    split_pool(_client(ctx), cidr, pool_name, parts)
