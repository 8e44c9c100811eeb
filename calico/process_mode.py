"""Decide what one process is, from its argv[0] and ``CNI_COMMAND``, before parsing flags.

Pure and table-tested: the same installed entry point serves as ``calico``, ``calicoctl`` and the
CNI plugins, because kubelet/container runtimes and operators invoke it under those names.
Standard library only (``os``, ``enum``, ``collections``; not ``typing``, which a call served by
the resident helper would otherwise load just for this): every CNI call imports this module.
"""

from __future__ import annotations

import os
from collections import namedtuple
from enum import Enum


class Mode(Enum):
    CLI = "cli"  # the click command tree
    CNI_PLUGIN = "cni-plugin"  # the calico network plugin (CNI protocol on env + stdin)
    CNI_IPAM = "cni-ipam"  # the calico-ipam IPAM plugin


# argv[1] values that always mean "the CLI", even when CNI_COMMAND leaks into the environment.
# `node` is ours (calico node run|stop|status); the rest are upstream's list.
CLI_VERBS = frozenset({"component", "ctl", "health", "version", "help", "node", "bpf"})


class Decision(namedtuple("Decision", ("mode", "argv"))):
    """The chosen mode and the argv to hand it (argv[0] included).

    A plain namedtuple: a dataclass costs ~9 ms and typing.NamedTuple needs typing."""

    __slots__ = ()
    mode: Mode
    argv: tuple[str, ...]


def decide(argv: list[str] | tuple[str, ...], cni_command: str | None) -> Decision:
    """Map (argv, $CNI_COMMAND) to a mode and the argv that mode should parse."""
    args = tuple(argv)
    prog = os.path.basename(args[0]) if args else "calico"
    if prog == "calico-ipam":
        return Decision(Mode.CNI_IPAM, args)
    if prog == "calicoctl":
        return Decision(Mode.CLI, (args[0], "ctl", *args[1:]))
    first = args[1] if len(args) > 1 else ""
    if cni_command and first not in CLI_VERBS:
        return Decision(Mode.CNI_PLUGIN, args)
    return Decision(Mode.CLI, args)
