"""``patch KIND NAME -p PATCH``: change a resource in place, validated before it is written."""

from __future__ import annotations

import json

import click

from calico.api import APIError, parse_resource, resource_to_wire
from calico.calicoctl.actions import with_tier_label
from calico.calicoctl.errors import CtlError, go_error, handle_errors
from calico.calicoctl.inputs import NamespaceFlags, resolve_namespace
from calico.calicoctl.patching import PatchError, json_patch, merge_patch
from calico.calicoctl.resources import resolve_kind
from calico.calicoctl.session import config_option, global_options, open_client
from calico.datastore.errors import ConnectionFailedError, DatastoreError

PATCH_TYPES = ("strategic", "merge", "json")


@click.command("patch")
@click.argument("kind")
@click.argument("name")
@click.option(
    "-p", "--patch", "patch_text", required=True, metavar="PATCH", help="The patch, as JSON."
)
@click.option(
    "-t",
    "--type",
    "patch_type",
    default="strategic",
    show_default=True,
    type=click.Choice(PATCH_TYPES),
    help="strategic and merge: a JSON merge patch (RFC 7386); json: a JSON patch (RFC 6902).",
)
@click.option("-n", "--namespace", default=None, help="Namespace of the resource.")
@config_option
@global_options
@handle_errors
def patch_command(
    kind: str,
    name: str,
    patch_text: str,
    patch_type: str,
    namespace: str | None,
    config_file: str | None,
) -> None:
    """Patch a pre-existing resource in place.

    Example: calicoctl patch ippool pool1 -p '{"spec":{"natOutgoing":true}}'
    """
    cls = resolve_kind(kind)
    ns = resolve_namespace(cls, None, NamespaceFlags(namespace))
    if not name:
        raise CtlError("resource name may not be empty")
    try:
        patch = json.loads(patch_text)
    except ValueError as exc:
        raise CtlError(f"hit error: invalid patch: not valid JSON: {exc}") from None
    with open_client(config_file) as client:
        try:
            current = client.get(cls, name, ns)
        except ConnectionFailedError:
            raise
        except DatastoreError as exc:
            raise CtlError(f"hit error: {go_error(exc)}") from None
        original = resource_to_wire(current)
        try:
            if patch_type == "json":
                patched = json_patch(original, patch)
            else:
                patched = merge_patch(original, patch)
        except PatchError as exc:
            raise CtlError(f"hit error: applying {patch_type} patch: {exc}") from None
        meta = patched.get("metadata") if isinstance(patched, dict) else None
        if not isinstance(meta, dict) or (meta.get("name"), meta.get("namespace")) != (
            name,
            ns,
        ):
            raise CtlError("hit error: a patch may not change the resource's name or namespace")
        if patched.get("kind") != cls.KIND:
            raise CtlError("hit error: a patch may not change the resource's kind")
        try:
            updated = parse_resource(patched, source="patched resource", go_decode=True)
        except APIError as exc:
            raise CtlError(
                f"hit error: creating resource from patched data: {go_error(exc)}"
            ) from None
        try:
            client.update(with_tier_label(updated))
        except ConnectionFailedError:
            raise
        except DatastoreError as exc:
            raise CtlError(f"hit error: updating existing resource: {go_error(exc)}") from None
    click.echo(f"Successfully patched 1 '{cls.KIND}' resource")
