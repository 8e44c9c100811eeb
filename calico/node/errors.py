"""The one error type node commands raise for a problem the operator must fix."""

from __future__ import annotations

import click


class NodeError(click.ClickException):
    """A fatal, already-explained problem: printed as one ``Error: ...`` line, exit 1.

    Upstream logs the reason and then "Terminating"; one exception type keeps every exit path
    identical and free of tracebacks.
    """
