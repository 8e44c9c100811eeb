"""``calicoctl explain``: why traffic between two endpoints is allowed or denied, which policies
select an endpoint, what a policy selects. The evaluation is ``calico.policyeval``'s, built on
the rule semantics Felix itself uses; this module parses the command line, finds the endpoints
and renders the answer (design/explain.md).
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import click

from calico.calicoctl.errors import CtlError, handle_errors
from calico.calicoctl.explain_render import render_connection, render_endpoint, render_policy
from calico.calicoctl.session import config_option, global_options, open_backend_checked
from calico.gcpause import paused
from calico.model import PolicyKey
from calico.model.resources import resource_prefix
from calico.policyeval.dataset import Dataset, Endpoint, IPAddress, load
from calico.policyeval.evaluate import Packet
from calico.policyeval.hostconfig import FelixConfigs
from calico.policyeval.hostendpoints import CrossingUnknown
from calico.policyeval.nodeaddrs import NodeAddresses
from calico.policyeval.report import (
    HostAddress,
    endpoint_policies,
    enforcing_endpoint,
    explain_connection,
    policy_selection,
)
from calico.policyeval.tunnels import Routing

PROTOCOLS = {"TCP": 6, "UDP": 17, "SCTP": 132, "ICMP": 1}
DEFAULT_SRC_PORT = 40000
OUTPUTS = ("text", "yaml", "json")


def _emit(data: dict[str, Any], output: str, text: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        import yaml

        class _Dumper(yaml.SafeDumper):
            def ignore_aliases(self, data: Any) -> bool:  # the same rule may appear twice
                return True

        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
        click.echo(text, nl=False)
    else:
        click.echo(text, nl=False)


def _check_output(output: str) -> str:
    if output not in OUTPUTS:
        raise CtlError(f"unrecognized output format '{output}' (use one of text, yaml, json)")
    return output


def _load(config_file: str | None) -> Dataset:
    return _load_with_configs(config_file)[0]


def _load_with_configs(config_file: str | None) -> tuple[Dataset, FelixConfigs]:
    """The dataset and the stored FelixConfigurations (one more list; converted only for a
    host endpoint's node)."""
    # ~10^4 stored endpoint texts and 10^3 policy documents, kept to the end: no collector
    # runs over them while they are built, nor after (calico.gcpause).
    with open_backend_checked(config_file) as backend, paused():
        data = load(backend)
        prefix = resource_prefix("FelixConfiguration")
        return data, FelixConfigs.from_kvs(prefix, backend.list(prefix).kvs)


def _node_addresses(config_file: str | None) -> NodeAddresses:
    """The stored Nodes' addresses: read only when a side is an address no endpoint holds."""
    with open_backend_checked(config_file) as backend:
        prefix = resource_prefix("Node")
        return NodeAddresses.from_kvs(prefix, backend.list(prefix).kvs)


def _routing(
    config_file: str | None, ends: tuple[Endpoint | None, Endpoint | None],
    hosts: tuple[HostAddress | None, HostAddress | None], via: str | None,
) -> Routing | None:  # fmt: skip
    """The IP pools and Nodes (two more lists), read only for traffic between two nodes
    whose crossing explain decides (a workload's side, or a node address no endpoint holds)
    when no ``--via-interface`` names the device."""
    nodes = [
        ep.key.hostname if ep is not None else host.node if host is not None else None
        for ep, host in zip(ends, hosts, strict=True)
    ]
    decided = any(
        ep.kind == "WorkloadEndpoint" if ep is not None else host is not None
        for ep, host in zip(ends, hosts, strict=True)
    )
    if via is not None or not decided or None in nodes or nodes[0] == nodes[1]:
        return None
    with open_backend_checked(config_file) as backend:
        pools, node_prefix = resource_prefix("IPPool"), resource_prefix("Node")
        return Routing.from_kvs(
            pools, backend.list(pools).kvs, node_prefix, backend.list(node_prefix).kvs
        )


def host_addresses(
    config_file: str | None, src: Endpoint | None, dst: Endpoint | None, pkt: Packet
) -> tuple[HostAddress | None, HostAddress | None]:
    """Which node, if any, a side's address belongs to when no endpoint holds it."""
    if src is not None and dst is not None:
        return None, None
    nodes = _node_addresses(config_file)
    out: list[HostAddress | None] = []
    for ep, addr in ((src, pkt.src), (dst, pkt.dst)):
        try:
            owner = None if ep is not None else nodes.owner(addr)
        except ValueError as exc:
            raise CtlError(str(exc)) from None
        out.append(HostAddress(*owner) if owner is not None else None)
    return out[0], out[1]


def _unique(spec: str, found: list[Endpoint]) -> Endpoint:
    if not found:
        raise CtlError(f"endpoint {spec!r} not found")
    if len(found) > 1:
        names = ", ".join(sorted(e.display for e in found))
        raise CtlError(f"endpoint {spec!r} is ambiguous: {names}")
    return found[0]


def _wep(data: Dataset, name: str, namespace: str) -> list[Endpoint]:
    ep = data.endpoint("WorkloadEndpoint", name, namespace)
    return [] if ep is None else [ep]


def _pod(data: Dataset, pod: str, namespace: str) -> list[Endpoint]:
    out = []
    for name, raw in data.raw_endpoints("WorkloadEndpoint", namespace, f'"{pod}"'):
        spec = raw.get("spec") or {}
        if pod in (spec.get("pod"), spec.get("workload")):
            ep = data.endpoint("WorkloadEndpoint", name, namespace)
            if ep is not None:
                out.append(ep)
    return out


def resolve(data: Dataset, spec: str, namespace: str) -> tuple[Endpoint | None, IPAddress | None]:
    """An endpoint argument -> (endpoint or None for a non-Calico address, address or None).

    Forms: an IP; ``hostendpoint/NAME`` (``hep/``); ``workloadendpoint/[NS/]NAME`` (``wep/``);
    ``NS/POD``; a bare workload endpoint, host endpoint or pod name (in ``namespace``).
    """
    try:
        addr = ipaddress.ip_address(spec)
    except ValueError:
        addr = None
    if addr is not None:
        found = enforcing_endpoint(data.endpoints_at(addr), addr)
        return (_unique(spec, found) if found else None), addr
    kind, sep, rest = spec.partition("/")
    if sep and kind.lower() in ("hostendpoint", "hep", "hostendpoints"):
        ep = data.endpoint("HostEndpoint", rest)
        return _unique(spec, [ep] if ep else []), None
    if sep and kind.lower() in ("workloadendpoint", "wep", "workloadendpoints"):
        ns, sep2, name = rest.rpartition("/")
        return _unique(spec, _wep(data, name, ns if sep2 else namespace)), None
    if sep:
        ns, name = kind, rest
        return _unique(spec, _wep(data, name, ns) or _pod(data, name, ns)), None
    found = _wep(data, spec, namespace)
    if not found:
        hep = data.endpoint("HostEndpoint", spec)
        found = [hep] if hep else _pod(data, spec, namespace)
    return _unique(spec, found), None


def _address(ep: Endpoint | None, addr: IPAddress | None, version: int, spec: str) -> IPAddress:
    if addr is not None:
        return addr
    assert ep is not None
    for candidate in ep.addresses:
        if candidate.version == version:
            return candidate
    raise CtlError(f"endpoint {spec!r} has no IPv{version} address")


def _port(value: str | None, what: str) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise CtlError(f"invalid {what} {value!r}: must be a number from 0 to 65535")
    return int(value)


def _byte(value: str | None, what: str) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or not 0 <= int(value) <= 255:
        raise CtlError(f"invalid {what} {value!r}: must be a number from 0 to 255")
    return int(value)


def build_packet(
    data: Dataset,
    src_spec: str,
    dst_spec: str,
    namespace: str,
    protocol: str,
    port: str | None,
    src_port: str | None,
    icmp_type: str | None,
    icmp_code: str | None,
    ip_version: int | None,
) -> tuple[Endpoint | None, Endpoint | None, Packet, str]:
    """Validate the flags and resolve both ends into the connection's first packet."""
    name = protocol.upper()
    if name not in PROTOCOLS:
        raise CtlError(f"invalid protocol {protocol!r}: must be one of TCP, UDP, SCTP, ICMP")
    dport, sport = _port(port, "port"), _port(src_port, "source port")
    itype, icode = _byte(icmp_type, "ICMP type"), _byte(icmp_code, "ICMP code")
    if name == "ICMP":
        if dport is not None or sport is not None:
            raise CtlError("--port and --src-port do not apply to ICMP")
    else:
        if dport is None:
            raise CtlError(f"--port is required for {name}")
        if itype is not None or icode is not None:
            raise CtlError("--icmp-type and --icmp-code apply to ICMP only")
    src, src_addr = resolve(data, src_spec, namespace)
    dst, dst_addr = resolve(data, dst_spec, namespace)
    versions = [ip_version] if ip_version else [4, 6]
    for version in versions:
        try:
            s = _address(src, src_addr, version, src_spec)
            d = _address(dst, dst_addr, version, dst_spec)
        except CtlError:
            if version == versions[-1]:
                raise
            continue
        break
    if s.version != d.version:
        raise CtlError(f"{src_spec} and {dst_spec} are of different IP families")
    number = PROTOCOLS[name]
    if name == "ICMP":
        number = 58 if s.version == 6 else 1
        itype = (128 if s.version == 6 else 8) if itype is None else itype
        icode = 0 if icode is None else icode
        return src, dst, Packet(number, s, d, icmp_type=itype, icmp_code=icode), name
    sport = DEFAULT_SRC_PORT if sport is None else sport
    return src, dst, Packet(number, s, d, sport, dport), name


class ExplainGroup(click.Group):
    """``explain --from A --to B ...`` runs the group itself; ``explain endpoint|policy`` the
    subcommands."""


@click.group("explain", cls=ExplainGroup, invoke_without_command=True)
@click.option("--from", "src", metavar="ENDPOINT", help="Source: ns/pod, wep/..., hep/..., IP.")
@click.option("--to", "dst", metavar="ENDPOINT", help="Destination, in the same forms.")
@click.option("--port", default=None, help="Destination port (TCP, UDP, SCTP).")
@click.option("--src-port", default=None, help=f"Source port [default: {DEFAULT_SRC_PORT}].")
@click.option("--protocol", default="TCP", help="TCP, UDP, SCTP or ICMP.")
@click.option("--icmp-type", default=None, help="ICMP type [default: echo request].")
@click.option("--icmp-code", default=None, help="ICMP code [default: 0].")
@click.option("--ip-version", type=click.IntRange(4, 6), default=None, help="4 or 6.")
@click.option("-n", "--namespace", default="default", help="Namespace for bare names.")
@click.option("-o", "--output", default="text", help="text, yaml or json.")
@click.option(
    "--via-interface",
    "via",
    default=None,
    metavar="IFACE",
    help="Host interface forwarded traffic crosses [default: the node's one uplink host "
    "endpoint, else its * one].",
)
@click.option(
    "--live", is_flag=True, help="Also trace a real probe through this node's dataplane (root)."
)
@config_option
@global_options
@click.pass_context
@handle_errors
def explain_group(
    ctx: click.Context,
    src: str | None,
    dst: str | None,
    port: str | None,
    src_port: str | None,
    protocol: str,
    icmp_type: str | None,
    icmp_code: str | None,
    ip_version: int | None,
    namespace: str,
    output: str,
    via: str | None,
    live: bool,
    config_file: str | None,
) -> None:
    """Explain why traffic from one endpoint to another is allowed or denied.

    \b
    calicoctl explain --from prod/frontend --to prod/backend --port 8080
    calicoctl explain --from 10.65.0.4 --to hep/node1-eth0 --protocol ICMP -o yaml
    calicoctl explain --from 203.0.113.9 --to prod/backend --port 80 --via-interface eth1
    calicoctl explain endpoint prod/backend
    calicoctl explain policy default.allow-dns
    """
    if ctx.invoked_subcommand is not None:
        return
    _check_output(output)
    if not src or not dst:
        raise CtlError("explain needs --from and --to (or a subcommand: endpoint, policy)")
    if ip_version not in (None, 4, 6):
        raise CtlError(f"invalid IP version {ip_version}")
    if via is not None and not via.strip():
        raise CtlError("--via-interface needs an interface name")
    with paused():  # the read and the first conversions (model imports, schema builds)
        data, configs = _load_with_configs(config_file)
        s, d, pkt, name = build_packet(
            data, src, dst, namespace, protocol, port, src_port, icmp_type, icmp_code, ip_version
        )
        hosts = host_addresses(config_file, s, d, pkt)
        try:
            routing = _routing(config_file, (s, d), hosts, via)
            report = explain_connection(
                data, s, d, pkt, name, configs, hosts=hosts, via=via, routing=routing
            )
        except CrossingUnknown as exc:
            raise CtlError(
                f"cannot tell which host endpoint traffic forwarded by node {exc.node} crosses: "
                f"{', '.join(exc.interfaces)} all have one; pass --via-interface IFACE"
            ) from None
        except ValueError as exc:  # a FelixConfiguration value Felix itself would refuse
            raise CtlError(f"cannot evaluate host endpoint policy: {exc}") from None
    if live:
        from calico.calicoctl.explain_live import live as live_trace

        report["live"] = live_trace(s, d, pkt, report)
    _emit(report, output, render_connection(report))


@explain_group.command("endpoint")
@click.argument("name")
@click.option("-n", "--namespace", default="default", help="Namespace for a bare name.")
@click.option("-o", "--output", default="text", help="text, yaml or json.")
@config_option
@global_options
@handle_errors
def explain_endpoint(name: str, namespace: str, output: str, config_file: str | None) -> None:
    """List the policies selecting an endpoint, in enforcement order, with their selectors."""
    show_endpoint_policies(config_file, name, namespace, _check_output(output))


def show_endpoint_policies(config_file: str | None, spec: str, namespace: str, output: str) -> None:
    """Print the ordered policies selecting one endpoint (``explain endpoint`` and ``get
    workloadendpoint NAME --show-policies``); ``output`` is text, yaml or json."""
    with paused():  # the read and the conversions, as for --from/--to
        data = _load(config_file)
        ep, _addr = resolve(data, spec, namespace)
        if ep is None:
            raise CtlError(
                f"endpoint {spec!r} not found: {spec} is not a Calico endpoint's address"
            )
        report = endpoint_policies(data, ep)
    _emit(report, output, render_endpoint(report))


@explain_group.command("policy")
@click.argument("name")
@click.option("-n", "--namespace", default="", help="Namespace of a namespaced policy.")
@click.option(
    "-k",
    "--kind",
    default=None,
    help="Policy kind when the name is ambiguous (e.g. NetworkPolicy).",
)
@click.option("-o", "--output", default="text", help="text, yaml or json.")
@config_option
@global_options
@handle_errors
def explain_policy(
    name: str, namespace: str, kind: str | None, output: str, config_file: str | None
) -> None:
    """Show the endpoints a policy selects and, per rule, what its peers match."""
    _check_output(output)
    data = _load(config_file)
    found = [
        k
        for k in data.policy_sources()
        if k.name == name
        and (not namespace or k.namespace == namespace)
        and (kind is None or k.kind.lower() == kind.lower())
    ]
    if not found:
        raise CtlError(f"policy {name!r} not found")
    if len(found) > 1:
        names = ", ".join(
            sorted(f"{k.kind} {k.namespace}/{k.name}".replace(" /", " ") for k in found)
        )
        raise CtlError(f"policy {name!r} is ambiguous ({names}): use -n and/or --kind")
    key = found[0]
    with paused():  # converts every endpoint: ~10^5 objects kept to the end
        report = policy_selection(data, PolicyKey(key.kind, key.namespace, key.name))
    if report is None:
        raise CtlError(
            f"policy {name!r} is not in effect: it could not be converted or is a staged Delete"
        )
    _emit(report, output, render_policy(report))
