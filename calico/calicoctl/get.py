"""``get``: show resources as a table, YAML, JSON or chosen columns.

``get KIND`` lists the kind (one table; ``<Kind>List`` in YAML/JSON), ``get KIND NAME...`` fetches
each name (one table each; an object, or a sequence of objects), ``get -f FILE`` fetches every
resource the file names. Resources that cannot be fetched are reported on stderr after the
output of those that could, and the exit code is then 1.
"""

from __future__ import annotations

import functools

import click

from calico.api import API_VERSION, Resource
from calico.calicoctl.crud import file_options
from calico.calicoctl.errors import CtlError, go_error, handle_errors, report
from calico.calicoctl.inputs import NamespaceFlags, load_inputs, resolve_namespace
from calico.calicoctl.printer import KindList, Result, echo, parse_output, render
from calico.calicoctl.resources import TableContext, identity, resolve_kind
from calico.calicoctl.session import open_client
from calico.datastore.client import Client
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreError,
    ResourceDoesNotExistError,
)

DEFAULT_AS_NUMBER = "64512"


def global_as_number(client: Client) -> str:
    """The cluster-wide AS number nodes inherit (upstream's ``config "asnumber"``)."""
    try:
        cfg = client.get("BGPConfiguration", "default")
    except ResourceDoesNotExistError:
        return DEFAULT_AS_NUMBER
    except DatastoreError:
        return "unknown"
    asn = cfg.spec.as_number  # type: ignore[attr-defined]
    return str(asn) if asn else DEFAULT_AS_NUMBER


def _tier_order(res: Resource) -> tuple[int, float]:
    order = res.spec.order  # type: ignore[attr-defined]
    return (1, 0.0) if order is None else (0, float(order))


DEFAULT_ALLOW_PROFILE = "projectcalico-default-allow"


def default_allow_profile() -> Resource:
    """The profile upstream's client always lists: allow in and out, never stored.

    Endpoints with no profile of their own fall back to it; resourceVersion ``1`` and no
    creation time, as upstream shows it.
    """
    from calico.api import parse_resource

    allow = [{"action": "Allow", "source": {}, "destination": {}}]
    return parse_resource(
        {
            "apiVersion": API_VERSION,
            "kind": "Profile",
            "metadata": {"name": DEFAULT_ALLOW_PROFILE, "resourceVersion": "1"},
            "spec": {"ingress": allow, "egress": allow},
        }
    )


def fetch(client: Client, target: Resource, flags: NamespaceFlags) -> Result:
    """One target: a named resource (get) or a whole kind (list, name empty)."""
    cls = type(target)
    ns = resolve_namespace(cls, target.metadata.namespace, flags)
    name = target.metadata.name
    builtin = cls.KIND == "Profile"
    if name:
        if cls.NAMESPACED and ns is None:
            raise CtlError("cannot use --all-namespace flag for getting a single resource")
        if builtin and name == DEFAULT_ALLOW_PROFILE:
            return default_allow_profile()
        return client.get(cls, name, ns)
    listed = client.list(cls, ns)
    items = listed.items
    if cls.KIND == "Tier":
        items = sorted(items, key=_tier_order)
    if builtin and all(p.metadata.name != DEFAULT_ALLOW_PROFILE for p in items):
        items = [default_allow_profile(), *items]
    return KindList(cls, items, listed.revision)


def _targets(
    kind: str | None,
    names: tuple[str, ...],
    filename: str | None,
    recursive: bool,
    skip_empty: bool,
) -> list[Resource]:
    if filename:
        if kind:
            raise CtlError("cannot use both --filename and KIND [NAME...] arguments")
        return load_inputs(filename, recursive, skip_empty)
    if not kind:
        raise CtlError("No resources specified")
    try:
        cls = resolve_kind(kind)
        if any(not n for n in names):
            raise CtlError("resource name may not be empty")
    except CtlError as exc:
        raise CtlError(f"failed to get resources: {exc}") from None
    return [identity(cls, n) for n in names] if names else [identity(cls, "")]


#: ``get -o`` formats -> the explain report's (tables are its text form).
SHOW_POLICIES_OUTPUTS = {
    "ps": "text",
    "wide": "text",
    "yaml": "yaml",
    "yml": "yaml",
    "json": "json",
}


def _show_policies(
    kind: str | None,
    names: tuple[str, ...],
    filename: str | None,
    namespace: str | None,
    all_namespaces: bool,
    config_file: str | None,
    output: str,
) -> None:
    if filename or all_namespaces:
        raise CtlError(
            "--show-policies takes one KIND and NAME, not --filename or --all-namespaces"
        )
    if not kind or len(names) != 1 or not names[0]:
        raise CtlError("--show-policies needs exactly one endpoint: KIND NAME")
    cls = resolve_kind(kind)
    if cls.KIND not in ("WorkloadEndpoint", "HostEndpoint"):
        raise CtlError(
            f"--show-policies applies to workloadendpoint and hostendpoint, not {cls.KIND}"
        )
    fmt = SHOW_POLICIES_OUTPUTS.get(output)
    if fmt is None:
        raise CtlError(f"--show-policies prints ps, wide, yaml or json, not {output!r}")
    from calico.calicoctl.explain import show_endpoint_policies  # policyeval: only when asked

    if cls.KIND == "HostEndpoint":
        spec = f"hostendpoint/{names[0]}"
    else:
        spec = f"workloadendpoint/{namespace or 'default'}/{names[0]}"
    show_endpoint_policies(config_file, spec, namespace or "default", fmt)


@click.command("get")
@click.argument("kind", required=False)
@click.argument("names", nargs=-1)
@file_options("get", required=False)
@click.option(
    "-o",
    "--output",
    default="ps",
    show_default=True,
    metavar="FORMAT",
    help="ps, wide, yaml (or yml), json, or custom-columns=HEADING,... (headings of the "
    "kind's wide table).",
)
@click.option(
    "-A",
    "-a",
    "--all-namespaces",
    is_flag=True,
    help="List the requested resources across all namespaces.",
)
@click.option(
    "--export",
    is_flag=True,
    help="Strip cluster-specific metadata (uid, resourceVersion, creationTimestamp, namespace).",
)
@click.option(
    "--show-policies",
    is_flag=True,
    help="With one workloadendpoint or hostendpoint NAME: the policies selecting it, in "
    "enforcement order (as 'calicoctl explain endpoint').",
)
@handle_errors
def get_command(
    kind: str | None,
    names: tuple[str, ...],
    filename: str | None,
    recursive: bool,
    skip_empty: bool,
    namespace: str | None,
    config_file: str | None,
    output: str,
    all_namespaces: bool,
    export: bool,
    show_policies: bool,
) -> None:
    """Display resources by KIND [NAME...] or from a file, directory or stdin."""
    if show_policies:
        _show_policies(kind, names, filename, namespace, all_namespaces, config_file, output)
        return
    fmt = parse_output(output)
    targets = _targets(kind, names, filename, recursive, skip_empty)
    flags = NamespaceFlags(namespace, all_namespaces)
    results: list[Result] = []
    errors: list[Exception] = []
    with open_client(config_file, error_prefix="failed to get resources: ") as client:
        for target in targets:
            try:
                results.append(fetch(client, target, flags))
            except ConnectionFailedError:
                raise
            except (CtlError, DatastoreError) as exc:
                errors.append(exc)
        ctx = TableContext(functools.cache(lambda: global_as_number(client)))
        text = render(
            results,
            fmt,
            print_namespace=all_namespaces or bool(namespace),
            export=export,
            ctx=ctx,
        )
    echo(text)
    if errors:
        report("\n".join(go_error(e) for e in errors))
