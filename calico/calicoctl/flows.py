"""``flows``: Goldmane's flow table in the terminal (``Flows.List``; ``--follow`` = ``Stream``).

Beyond upstream (what ``hubble observe`` gives Cilium users): each row names the flow's
endpoints, verdict and the policy rule that decided it, as ``tier|kind:[ns/]name|action|rule``.
``--denied`` and ``--policy`` filter in Goldmane; ``--namespace`` keeps flows with that namespace
on either side (Goldmane's filter fields AND, so this one is applied here).
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable

import click
import grpc
from google.protobuf import json_format

from calico.calicoctl.errors import CtlError, handle_errors
from calico.calicoctl.flags import global_options
from calico.proto.goldmane import api_pb2 as pb
from calico.proto.goldmane import api_pb2_grpc as pb_grpc

DEFAULT_SERVER = "localhost:7443"
COLUMNS = (
    "START",
    "REPORTER",
    "ACTION",
    "SOURCE",
    "SRC IP",
    "SRC PORT",
    "DEST",
    "PROTO",
    "PORT",
    "POLICY",
    "PKTS",
    "BYTES",
)


def hit_text(h: pb.PolicyHit) -> str:
    """Upstream's policy-hit form minus the policy index: ``tier|kind:[ns/]name|action|rule``."""
    kind = pb.PolicyKind.Name(h.kind)
    name = f"{h.namespace}/{h.name}" if h.namespace else h.name
    return f"{h.tier}|{kind}:{name}|{pb.Action.Name(h.action).lower()}|{h.rule_index}"


def _side(name: str, namespace: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def sampled(values: Iterable[object]) -> str:
    """The smallest of a flow's sampled source values, ``+N`` for the others; ``-`` for none
    (an upstream Goldmane sends no samples)."""
    items = [str(v) for v in values]
    if not items:
        return "-"
    return items[0] + (f"+{len(items) - 1}" if len(items) > 1 else "")


def row(flow: pb.Flow) -> tuple[str, ...]:
    k = flow.Key
    hits = k.policies.enforced_policies
    start = datetime.datetime.fromtimestamp(flow.start_time, datetime.UTC)
    return (
        start.strftime("%H:%M:%S"),
        pb.Reporter.Name(k.reporter),
        pb.Action.Name(k.action),
        _side(k.source_name, k.source_namespace),
        sampled(flow.source_ips),
        sampled(flow.source_ports),
        _side(k.dest_name, k.dest_namespace),
        k.proto,
        str(k.dest_port),
        hit_text(hits[-1]) if hits else "-",
        f"{flow.packets_in}/{flow.packets_out}",
        f"{flow.bytes_in}/{flow.bytes_out}",
    )


def table(flows: Iterable[pb.Flow], header: bool = True) -> str:
    rows = [row(f) for f in flows]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(COLUMNS)]
    lines = [COLUMNS] if header else []
    lines += rows
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines
    )


def build_filter(denied: bool, policy: str | None) -> pb.Filter:
    f = pb.Filter()
    if denied:
        f.actions.append(pb.Deny)
    if policy:
        namespace, _, name = policy.rpartition("/")
        match = pb.PolicyMatch(name=pb.StringMatch(value=name, type=pb.Exact))
        if namespace:
            match.namespace.CopyFrom(pb.StringMatch(value=namespace, type=pb.Exact))
        f.policies.append(match)
    return f


def keep(flow: pb.Flow, namespace: str | None) -> bool:
    k = flow.Key
    return namespace is None or namespace in (k.source_namespace, k.dest_namespace)


def _channel(server: str, ca: str | None, cert: str | None, key: str | None) -> grpc.Channel:
    if not (ca or cert or key):
        return grpc.insecure_channel(server)

    def read(path: str | None) -> bytes | None:
        if not path:
            return None
        with open(path, "rb") as fh:
            return fh.read()

    return grpc.secure_channel(
        server, grpc.ssl_channel_credentials(read(ca), read(key), read(cert))
    )


def _unreachable(server: str, exc: grpc.RpcError) -> CtlError:
    code = exc.code()  # type: ignore[attr-defined]
    detail = exc.details()  # type: ignore[attr-defined]
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return CtlError(f"Error: cannot reach Goldmane at {server}: {detail}")
    return CtlError(f"Error: Goldmane at {server}: {code.name}: {detail}")


def _emit(flows: list[pb.Flow], output: str, header: bool) -> None:
    if output == "json":
        for f in flows:
            click.echo(json.dumps(json_format.MessageToDict(f, preserving_proto_field_name=True)))
    elif flows or header:
        click.echo(table(flows, header))


@click.command("flows")
@click.option(
    "--server",
    default=lambda: os.environ.get("GOLDMANE_HOST", DEFAULT_SERVER),
    show_default=f"$GOLDMANE_HOST or {DEFAULT_SERVER}",
    help="Goldmane's gRPC address (host:port).",
)
@click.option("--denied", is_flag=True, help="Only denied flows.")
@click.option("--namespace", default=None, help="Only flows with this namespace on either side.")
@click.option("--policy", default=None, metavar="[NS/]NAME", help="Only flows this policy hit.")
@click.option("--follow", "-f", is_flag=True, help="Keep streaming new flows (Flows.Stream).")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table")
@click.option("--ca", default=None, help="CA bundle for a TLS Goldmane.")
@click.option("--cert", default=None, help="Client certificate (mTLS).")
@click.option("--key", default=None, help="Client key (mTLS).")
@click.option("--timeout", default=5.0, show_default=True, help="Seconds to wait for Goldmane.")
@global_options
@handle_errors
def flows_command(
    server: str,
    denied: bool,
    namespace: str | None,
    policy: str | None,
    follow: bool,
    output: str,
    ca: str | None,
    cert: str | None,
    key: str | None,
    timeout: float,
) -> None:
    """Print the flows Goldmane has aggregated (newest first), optionally following new ones."""
    flt = build_filter(denied, policy)
    channel = _channel(server, ca, cert, key)
    try:
        stub = pb_grpc.FlowsStub(channel)
        try:
            result = stub.List(pb.FlowListRequest(filter=flt), timeout=timeout)
        except grpc.RpcError as e:
            raise _unreachable(server, e) from None
        _emit([r.flow for r in result.flows if keep(r.flow, namespace)], output, True)
        if not follow:
            return
        try:
            for r in stub.Stream(pb.FlowStreamRequest(filter=flt)):
                if keep(r.flow, namespace):
                    _emit([r.flow], output, False)
        except grpc.RpcError as e:
            raise _unreachable(server, e) from None
    finally:
        channel.close()
