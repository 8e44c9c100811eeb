"""Shared helpers for the label index tests: event recorders and hypothesis strategies that
generate random selectors (as text, from a small grammar) and random API call sequences."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable

from hypothesis import strategies as st

from calico.felix.labelindex import (
    LinearSelectorAndNamedPortIndex,
    NamedPort,
    SelectorAndNamedPortIndex,
    host_cidrs,
)
from calico.selector import parse

LABELS = ["a", "b", "c"]
VALUES = ["x", "y", ""]
PARENTS = ["p0", "p1", "p2"]
ITEMS = ["e0", "e1", "e2", "e3"]
SELECTOR_IDS = ["s0", "s1", "s2"]
NETS = [
    "10.0.0.1",
    "10.0.0.1/32",
    "10.0.0.2/32",
    "10.0.1.7/24",
    "10.0.1.0/24",
    "0.0.0.0/0",
    "0.0.0.0/1",
    "fd00::1",
    "fd00::1/128",
    "fd00::/64",
    "::/0",
]
PORT_NAMES = ["http", "dns"]
PORT_PROTOCOLS = ["tcp", "TCP", "udp", "UDP", "sctp", "", "6", "17"]
SET_PROTOCOLS = ["tcp", "udp", "sctp", "any", None]


class Recorder:
    """Collects callback events; ``take()`` returns and clears those of the last call."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Hashable, Hashable]] = []

    def started(self, a: Hashable, b: Hashable) -> None:
        self.events.append(("+", a, b))

    def stopped(self, a: Hashable, b: Hashable) -> None:
        self.events.append(("-", a, b))

    def take(self) -> Counter[tuple[str, Hashable, Hashable]]:
        out = Counter(self.events)
        self.events.clear()
        return out


def _leaf(label: str, value: str, value2: str, kind: int) -> str:
    return [
        f'{label} == "{value}"',
        f'{label} != "{value}"',
        f"has({label})",
        f"!has({label})",
        f'{label} in {{"{value}", "{value2}"}}',
        f'{label} not in {{"{value}"}}',
        f'{label} contains "{value}"',
        f'{label} starts with "{value}"',
        f"{label} in {{}}",
        "all()",
    ][kind]


leaves = st.builds(
    _leaf,
    st.sampled_from(LABELS),
    st.sampled_from(VALUES),
    st.sampled_from(VALUES),
    st.integers(0, 9),
)

selector_texts = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) && ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) || ({b})", inner, inner),
        st.builds(lambda a: f"!({a})", inner),
    ),
    max_leaves=4,
)

label_sets = st.dictionaries(st.sampled_from(LABELS), st.sampled_from(VALUES), max_size=3)
parent_lists = st.lists(st.sampled_from(PARENTS), max_size=3)

_common_ops = [
    st.tuples(st.just("parent"), st.sampled_from(PARENTS), label_sets),
    st.tuples(st.just("delparent"), st.sampled_from(PARENTS)),
]

_selector_op = st.tuples(st.just("sel"), st.sampled_from(SELECTOR_IDS), selector_texts)
_item_op = st.tuples(st.just("item"), st.sampled_from(ITEMS), label_sets, parent_lists)


def _weighted(choices: list[tuple[int, st.SearchStrategy[tuple]]]) -> st.SearchStrategy[tuple]:
    """Pick a strategy with the given relative weights (st.one_of would pick uniformly, and
    sequences dominated by deletes leave too little state for a comparison to mean much)."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(pool) - 1).flatmap(lambda i: pool[i])


selector_index_ops = st.lists(
    _weighted(
        [
            (3, _selector_op),
            (6, _item_op),
            (1, st.tuples(st.just("delsel"), st.sampled_from(SELECTOR_IDS))),
            (1, st.tuples(st.just("delitem"), st.sampled_from(ITEMS))),
            (2, _common_ops[0]),
            (1, _common_ops[1]),
        ]
    ),
    min_size=5,
    max_size=40,
)

named_ports = st.lists(
    st.tuples(
        st.sampled_from(PORT_NAMES), st.sampled_from(PORT_PROTOCOLS), st.sampled_from([53, 80])
    ),
    max_size=3,
)

_set_op = st.tuples(
    st.just("set"),
    st.sampled_from(SELECTOR_IDS),
    selector_texts,
    st.sampled_from(SET_PROTOCOLS),
    st.sampled_from([None, *PORT_NAMES]),
)
_endpoint_op = st.tuples(
    st.just("ep"),
    st.sampled_from(ITEMS),
    label_sets,
    st.lists(st.sampled_from(NETS), max_size=3),
    named_ports,
    parent_lists,
)

named_port_index_ops = st.lists(
    _weighted(
        [
            (3, _set_op),
            (6, _endpoint_op),
            (1, st.tuples(st.just("delset"), st.sampled_from(SELECTOR_IDS))),
            (1, st.tuples(st.just("delep"), st.sampled_from(ITEMS))),
            (2, _common_ops[0]),
            (1, _common_ops[1]),
        ]
    ),
    min_size=5,
    max_size=40,
)


def apply_ip_set_op(
    index: SelectorAndNamedPortIndex | LinearSelectorAndNamedPortIndex,
    op: tuple,
    *,
    as_host_members: bool = False,
) -> None:
    """Run one op of :func:`named_port_index_ops` on ``index``. ``as_host_members``: an
    endpoint's nets go in as :func:`host_cidrs` output with ``nets_normalised=True``."""
    kind, *args = op
    if kind == "set":
        set_id, text, protocol, port_name = args
        index.update_ip_set(set_id, parse(text), protocol, port_name)
    elif kind == "delset":
        index.delete_ip_set(args[0])
    elif kind == "ep":
        item_id, labels, nets, ports, parent_ids = args
        named = [NamedPort(*p) for p in ports]
        if as_host_members:
            index.update_endpoint_or_set(
                item_id, labels, host_cidrs(nets), named, parent_ids, nets_normalised=True
            )
        else:
            index.update_endpoint_or_set(item_id, labels, nets, named, parent_ids)
    elif kind == "delep":
        index.delete_endpoint_or_set(args[0])
    elif kind == "parent":
        index.update_parent_labels(args[0], args[1])
    else:
        index.delete_parent_labels(args[0])
