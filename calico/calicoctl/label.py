"""``label KIND NAME key=value | key``: set, overwrite or remove one label."""

from __future__ import annotations

import click

from calico.api import APIError
from calico.calicoctl.actions import with_tier_label
from calico.calicoctl.errors import CtlError, handle_errors
from calico.calicoctl.inputs import NamespaceFlags, resolve_namespace
from calico.calicoctl.resources import resolve_kind
from calico.calicoctl.session import config_option, global_options, open_client
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreError,
    ResourceDoesNotExistError,
)


@click.command("label")
@click.argument("kind")
@click.argument("name")
@click.argument("label")
@click.option("--overwrite", is_flag=True, help="Replace the value of a key already present.")
@click.option("--remove", is_flag=True, help="Remove the key given as LABEL.")
@click.option("-n", "--namespace", default=None, help="Namespace of the resource.")
@config_option
@global_options
@handle_errors
def label_command(
    kind: str,
    name: str,
    label: str,
    overwrite: bool,
    remove: bool,
    namespace: str | None,
    config_file: str | None,
) -> None:
    """Add, update or remove a label on an existing resource.

    \b
    calicoctl label nodes node1 cluster=frontend
    calicoctl label nodes node1 cluster=backend --overwrite
    calicoctl label nodes node1 cluster --remove
    """
    if remove:
        key, value = label, ""
    else:
        key, sep, value = label.partition("=")
        if not sep:
            raise CtlError(f"invalid label {label}")
    try:
        cls = resolve_kind(kind)
        ns = resolve_namespace(cls, None, NamespaceFlags(namespace))
    except CtlError as exc:
        raise CtlError(f"failed to get {kind} {name}, error {exc}") from None
    with open_client(config_file, error_prefix=f"failed to get {kind} {name}, error ") as client:
        try:
            current = client.get(cls, name, ns)
        except ResourceDoesNotExistError:
            raise CtlError(f"{kind} {name} not found") from None
        except ConnectionFailedError:
            raise
        except DatastoreError as exc:
            raise CtlError(f"failed to get {kind} {name}, error {exc}") from None
        labels = dict(current.metadata.labels or {})
        overwritten = False
        if remove:
            if key not in labels:
                raise CtlError(f"cannot remove label of {kind} {name}, key {key} does not exist")
            del labels[key]
        elif key in labels:
            if not overwrite and labels[key] != value:
                raise CtlError(
                    f"failed to update label of {kind} {name}, key {key} is already present. "
                    "please use '--overwrite' to set a new value"
                )
            labels[key] = value
            overwritten = True
        else:
            labels[key] = value
        meta = current.metadata.model_copy(update={"labels": labels or None})
        try:
            client.update(with_tier_label(current.model_copy(update={"metadata": meta})))
        except ConnectionFailedError:
            raise
        except (DatastoreError, APIError) as exc:
            raise CtlError(f"failed to update {kind} {name}, label not changed: {exc}") from None
    if remove:
        click.echo(f"Successfully removed label {key} from {kind} {name}")
    elif overwritten:
        click.echo(f"Successfully updated label {key} on {kind} {name}")
    else:
        click.echo(f"Successfully set label {key} on {kind} {name}")
