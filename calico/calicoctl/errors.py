"""How calicoctl reports failure: the message alone on stderr, exit code 1.

Upstream's calicoctl returns an error string to its main, which prints it without any prefix;
scripts match on those strings, so every expected failure inside the ``ctl`` group is turned
into one such message here instead of click's ``Error: ...`` or a traceback.
"""

from __future__ import annotations

import functools
import logging
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from calico.api import APIError, ResourceValidationError
from calico.calicoctl.flags import options
from calico.datastore.errors import (
    ConnectionFailedError,
    DatastoreError,
    ResourceDoesNotExistError,
)

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)


class CtlError(Exception):
    """A failure whose message is printed verbatim (no prefix) before exiting 1."""


def fail(message: str) -> NoReturn:
    raise CtlError(message)


def go_error(exc: BaseException) -> str:
    """An error as upstream's libcalico error types print it.

    Not-found carries its (nil) cause, ``resource does not exist: IPPool(x) with error: <nil>``;
    validation failures are ``error with field <Field> = '<value>' (<reason>)``.
    """
    if isinstance(exc, ResourceDoesNotExistError):
        return f"{exc} with error: <nil>"
    if isinstance(exc, ResourceValidationError):
        return exc.go_text()
    return str(exc)


def go_errors(errors: list[Exception]) -> str:
    """A list of errors as Go prints ``[]error`` with ``%v``: ``[first second]``."""
    return "[" + " ".join(go_error(e) for e in errors) + "]"


def connection_message(exc: ConnectionFailedError) -> str:
    return f"failed to connect to the datastore: {exc}"


def _debug() -> bool:
    return options().log_level in ("debug", "trace")


def report(message: str) -> NoReturn:
    """Print ``message`` to stderr and stop with exit code 1.

    SystemExit rather than click's Exit: the root runs click with ``standalone_mode=False``,
    where click turns Exit into a return value that the entry point does not use.
    """
    text = message if message.endswith("\n") else message + "\n"
    click.echo(text, err=True, nl=False)
    raise SystemExit(1)


def report_ctl_errors(fn: F) -> F:
    """Decorator for commands that word every expected failure as a :class:`CtlError` (the
    ``ipam`` commands): printed bare, exit 1. Anything else reaches the root's ``Error: ...``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CtlError as exc:
            report(str(exc))

    return wrapper  # type: ignore[return-value]


def handle_errors(fn: F) -> F:
    """Decorator for command callbacks: expected failures become one stderr message, exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except CtlError as exc:
            if _debug():
                traceback.print_exc()
            report(str(exc))
        except ConnectionFailedError as exc:
            if _debug():
                traceback.print_exc()
            report(connection_message(exc))
        except (APIError, DatastoreError, OSError, ValueError) as exc:
            if _debug():
                traceback.print_exc()
            report(go_error(exc))

    return wrapper  # type: ignore[return-value]
