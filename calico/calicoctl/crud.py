"""``create``, ``apply``, ``replace``, ``validate`` and ``delete``.

Every file is decoded before the first datastore call (a document upstream's loader refuses
means nothing is written: ``failed to execute command: ...``). Write verbs then take the
documents in order, each one validated, namespaced and written in turn, and stop at the first
failure, so ``Partial success: <verb> the first N out of M ...`` names exactly the documents
that were written: documents 1..N (design/calicoctl.md "Decisions").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import click

from calico.api import APIError, Resource, ResourceValidationError
from calico.api.io import Loaded
from calico.calicoctl import actions
from calico.calicoctl.errors import CtlError, go_error, go_errors, handle_errors, report
from calico.calicoctl.inputs import (
    NamespaceFlags,
    load_entries_from,
    load_inputs,
    resolve_namespace,
    single_kind,
    with_namespace,
)
from calico.calicoctl.resources import identity, resolve_kind
from calico.calicoctl.session import config_option, global_options, open_client
from calico.datastore.client import Client
from calico.datastore.errors import (
    DatastoreError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
)

PAST = {
    "create": "created",
    "apply": "applied",
    "replace": "replaced",
    "validate": "validated",
    "delete": "deleted",
}
Action = Callable[[Client, Resource], Resource]


@dataclass
class Outcome:
    """What happened to the input resources, for the upstream-shaped report."""

    total: int
    kind: str
    handled: int = 0
    errors: list[Exception] = field(default_factory=list)


def file_options(verb: str, required: bool = True) -> Callable[[Callable[..., None]], object]:
    def decorate(fn: Callable[..., None]) -> object:
        for deco in reversed(
            [
                click.option(
                    "-f",
                    "--filename",
                    required=required,
                    metavar="FILE",
                    help=f"File, directory or '-' (stdin) holding the resources to {verb}.",
                ),
                click.option(
                    "-R",
                    "--recursive",
                    is_flag=True,
                    help="Process the directory given with -f recursively.",
                ),
                click.option(
                    "--skip-empty", is_flag=True, help="Do not fail on files with no resources."
                ),
                click.option(
                    "-n",
                    "--namespace",
                    default=None,
                    help="Namespace for namespaced resources that do not name one "
                    "(default: 'default').",
                ),
                config_option,
                global_options,
            ]
        ):
            fn = deco(fn)  # type: ignore[operator]
        return fn

    return decorate


def _write_message_failure(verb: str, out: Outcome, brackets: bool) -> str:
    err = go_errors(out.errors) if brackets else go_error(out.errors[0])
    if out.total == 1:
        return f"failed to {verb} '{out.kind}' resource: {err}"
    if out.kind:
        return f"failed to {verb} any '{out.kind}' resources: {err}"
    return f"failed to {verb} any resources: {err}"


def report_write(verb: str, out: Outcome) -> None:
    """Upstream's create/apply/replace/validate report; raises Exit(1) on any failure."""
    past = PAST[verb]
    brackets = verb != "replace"
    what = f"'{out.kind}' resource(s)" if out.kind else "resource(s)"
    if not out.errors:
        click.echo(f"Successfully {past} {out.handled} {what}")
        return
    if out.handled == 0:
        report(_write_message_failure(verb, out, brackets))
    kind = f" '{out.kind}'" if out.kind else ""
    click.echo(
        f"Partial success: {past} the first {out.handled} out of {out.total}{kind} resources:"
    )
    err = go_errors(out.errors) if brackets else go_error(out.errors[0])
    hit = "hit error(s)" if verb == "validate" else "hit error"
    report(f"{hit}: {err}")


def prepare(entry: Loaded, flags: NamespaceFlags) -> Resource:
    """One document ready to write: valid, its namespace filled in (``-n`` or ``default``).

    Raises the document's validation error, or the namespace rule it breaks.
    """
    if isinstance(entry, ResourceValidationError):
        raise entry
    return with_namespace(entry, resolve_namespace(type(entry), entry.metadata.namespace, flags))


def load_write_inputs(
    filename: str, recursive: bool, skip_empty: bool
) -> tuple[Outcome, list[Loaded]] | None:
    """A write verb's documents and the outcome to report; None when there are none."""
    entries = load_entries_from(filename, recursive, skip_empty)
    if not entries:
        click.echo("No resources specified")
        return None
    return Outcome(len(entries), single_kind(entries)), entries


def given_inputs(filename: str, recursive: bool, skip_empty: bool) -> list[Resource]:
    """The resources ``-f`` names (identity is enough: delete); none is not an error."""
    resources = load_inputs(filename, recursive, skip_empty)
    if not resources:
        click.echo("No resources specified")
    return resources


def run_write(
    verb: str,
    action: Action,
    filename: str,
    recursive: bool,
    skip_empty: bool,
    namespace: str | None,
    config_file: str | None,
    skip_exists: bool = False,
) -> None:
    loaded = load_write_inputs(filename, recursive, skip_empty)
    if loaded is None:
        return
    out, entries = loaded
    flags = NamespaceFlags(namespace)
    with open_client(config_file, initialize=True) as client:
        for entry in entries:
            try:
                action(client, prepare(entry, flags))
            except ResourceAlreadyExistsError as exc:
                if not skip_exists:
                    out.errors.append(exc)
                    break
            except (CtlError, DatastoreError, APIError) as exc:
                out.errors.append(exc)
                break
            out.handled += 1
    report_write(verb, out)


@click.command("create")
@file_options("create")
@click.option("--skip-exists", is_flag=True, help="Skip over resources that already exist.")
@handle_errors
def create_command(
    filename: str,
    recursive: bool,
    skip_empty: bool,
    namespace: str | None,
    config_file: str | None,
    skip_exists: bool,
) -> None:
    """Create resources from a file, directory or stdin; existing ones are an error."""
    run_write(
        "create",
        actions.create,
        filename,
        recursive,
        skip_empty,
        namespace,
        config_file,
        skip_exists,
    )


def _write_command(verb: str, action: Action, help_text: str) -> click.Command:
    """A write verb whose only flags are the file options (``apply``, ``replace``)."""

    @click.command(verb, help=help_text)
    @file_options(verb)
    @handle_errors
    def command(
        filename: str,
        recursive: bool,
        skip_empty: bool,
        namespace: str | None,
        config_file: str | None,
    ) -> None:
        run_write(verb, action, filename, recursive, skip_empty, namespace, config_file)

    return command


apply_command = _write_command(
    "apply",
    actions.apply,
    "Create resources, or update them when they exist (labels and spec from the file).",
)
replace_command = _write_command(
    "replace",
    actions.update,
    "Replace existing resources; a resourceVersion in the file must be the current one.",
)


@click.command("validate")
@file_options("validate")
@handle_errors
def validate_command(
    filename: str,
    recursive: bool,
    skip_empty: bool,
    namespace: str | None,
    config_file: str | None,
) -> None:
    """Check resources' syntax and schema without contacting the datastore."""
    loaded = load_write_inputs(filename, recursive, skip_empty)
    if loaded is None:
        return
    out, entries = loaded
    flags = NamespaceFlags(namespace)
    for entry in entries:  # every document is checked: nothing is written
        try:
            prepare(entry, flags)
        except (CtlError, APIError) as exc:
            out.errors.append(exc)
            continue
        out.handled += 1
    report_write("validate", out)


def _targets_from_args(kind: str, names: tuple[str, ...]) -> list[Resource]:
    cls = resolve_kind(kind)
    if not names:
        raise CtlError("No resources specified")
    if any(not n for n in names):
        raise CtlError("resource name may not be empty")
    return [identity(cls, n) for n in names]


@click.command("delete")
@click.argument("kind", required=False)
@click.argument("names", nargs=-1)
@file_options("delete", required=False)
@click.option(
    "-s", "--skip-not-exists", is_flag=True, help="Skip over resources that do not exist."
)
@handle_errors
def delete_command(
    kind: str | None,
    names: tuple[str, ...],
    filename: str | None,
    recursive: bool,
    skip_empty: bool,
    namespace: str | None,
    config_file: str | None,
    skip_not_exists: bool,
) -> None:
    """Delete resources named by KIND and NAME(s), or listed in a file, directory or stdin."""
    if filename and kind:
        raise CtlError("cannot use both --filename and KIND [NAME...] arguments")
    if filename:
        resources = given_inputs(filename, recursive, skip_empty)
        if not resources:
            return
        kind_name = single_kind(resources)
    elif kind:
        resources = _targets_from_args(kind, names)
        kind_name = resources[0].KIND
    else:
        raise CtlError("No resources specified")
    flags = NamespaceFlags(namespace)
    handled = 0
    errors: list[Exception] = []
    with open_client(config_file) as client:
        for res in resources:
            try:
                ns = resolve_namespace(type(res), res.metadata.namespace, flags)
                actions.delete(client, with_namespace(res, ns))
            except ResourceDoesNotExistError as exc:
                if not skip_not_exists:
                    errors.append(exc)
                    continue
            except (CtlError, DatastoreError) as exc:
                errors.append(exc)
                continue
            handled += 1
    if handled:
        what = f"'{kind_name}' resource(s)" if kind_name else "resource(s)"
        click.echo(f"Successfully deleted {handled} {what}")
    if errors:
        what = f"'{kind_name}' resource" if kind_name else "resource"
        prefix = f"Failed to delete {what}"
        report("".join(f"{prefix}: {go_error(e)}\n" for e in errors))
