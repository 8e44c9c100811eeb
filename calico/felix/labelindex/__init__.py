"""Label indexes for Felix's calculation graph.

* :class:`SelectorIndex` — which local endpoints each policy selector matches (upstream's
  InheritIndex, used by the ActiveRulesCalculator); callbacks ``on_match_started`` /
  ``on_match_stopped(sel_id, item_id)``.
* :class:`SelectorAndNamedPortIndex` — IP set members for selector and named-port sets;
  callbacks ``on_member_added`` / ``on_member_removed(set_id, member)``.

Each has a ``Linear...`` twin with the identical API: a naive scan used as the test oracle and
the benchmark baseline. See design/felix-labelindex.md.
"""

from calico.felix.labelindex.linear import LinearSelectorIndex
from calico.felix.labelindex.linear_named_port import LinearSelectorAndNamedPortIndex
from calico.felix.labelindex.members import (
    NamedPort,
    all_host_members,
    check_net,
    host_cidrs,
    is_host_member,
    normalise_net,
    normalise_nets,
)
from calico.felix.labelindex.named_port_index import SelectorAndNamedPortIndex
from calico.felix.labelindex.selector_index import SelectorIndex

__all__ = [
    "LinearSelectorAndNamedPortIndex",
    "LinearSelectorIndex",
    "NamedPort",
    "SelectorAndNamedPortIndex",
    "SelectorIndex",
    "all_host_members",
    "check_net",
    "host_cidrs",
    "is_host_member",
    "normalise_net",
    "normalise_nets",
]
