"""The one error type node code raises for a problem the operator must fix."""

from __future__ import annotations


class NodeError(Exception):
    """A fatal, already-explained problem, worded as one line.

    Upstream logs the reason and then "Terminating"; one exception type keeps every exit path
    identical and free of tracebacks. It knows nothing of click: the node's command groups
    (:class:`calico.node.command.NodeGroup`) turn it into ``Error: <message>``, exit 1.
    """
