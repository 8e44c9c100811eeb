"""Selector rewriting for the v1 model: namespace / service-account label prefixes and the
selector an entity rule really means once its namespace context is folded in.

The v1 model has one flat label space per endpoint, so v3 concepts become labels: a namespace's
labels appear on its endpoints as ``pcns.<key>`` (via the ``kns.<ns>`` profile), a service
account's as ``pcsa.<key>``, and membership as ``projectcalico.org/namespace`` /
``projectcalico.org/serviceaccount``. Rewritten selectors are rendered in canonical form, as
upstream renders its parsed selectors.
"""

from __future__ import annotations

from calico.model.processors.common import (
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_PREFIX,
    SERVICE_ACCOUNT_LABEL,
    SERVICE_ACCOUNT_LABEL_PREFIX,
)
from calico.selector import SelectorParseError, parse
from calico.selector.ast import And, Compare, Has, InSet, Node, Not, Or
from calico.selector.canonical import canonical


def _prefix_node(node: Node, prefix: str) -> Node:
    match node:
        case Has(label):
            return Has(prefix + label)
        case Compare(label, op, value):
            return Compare(prefix + label, op, value)
        case InSet(label, values, negated):
            return InSet(prefix + label, values, negated)
        case Not(operand):
            return Not(_prefix_node(operand, prefix))
        case And(operands):
            return And(tuple(_prefix_node(o, prefix) for o in operands))
        case Or(operands):
            return Or(tuple(_prefix_node(o, prefix) for o in operands))
    return node  # all() / global() carry no label


def prefix_selector(text: str, prefix: str) -> str:
    """``k == 'v'`` -> ``<prefix>k == "v"`` for every label, canonically rendered."""
    try:
        root = parse(text).root
    except SelectorParseError as exc:
        raise ValueError(str(exc)) from None
    return canonical(_prefix_node(root, prefix))


def and_prefixed(current: str, extra: str, prefix: str) -> str:
    """Upstream's prefixAndAppendSelector: ``(current) && <prefixed extra>``."""
    if not extra:
        return current
    prefixed = prefix_selector(extra, prefix)
    return f"({current}) && {prefixed}" if current else prefixed


def service_account_selector(names: list[str] | None, selector: str | None) -> str:
    """Service-account names and/or selector as one endpoint-label selector (ANDed)."""
    sel = prefix_selector(selector, SERVICE_ACCOUNT_LABEL_PREFIX) if selector else ""
    if not names:
        return sel
    quoted = ", ".join(f"'{n}'" for n in names)
    by_name = canonical(parse(f"{SERVICE_ACCOUNT_LABEL} in {{ {quoted} }}").root)
    return f"({sel}) && ({by_name})" if sel else by_name


def entity_selector(
    namespace_selector: str | None,
    selector: str | None,
    sa_selector: str,
    not_selector: str | None,
    namespace: str,
) -> str:
    """The selector one side of a rule matches (upstream's getEndpointSelector).

    A namespaced policy confines its selectors to its own namespace unless a namespaceSelector
    says otherwise; ``all()``/``global()`` in a namespaceSelector mean "any namespace" / "no
    namespace" (host endpoints and global network sets).
    """
    ns_sel = ""
    if namespace_selector:
        ns_sel = prefix_selector(namespace_selector, NAMESPACE_LABEL_PREFIX)
        ns_sel = ns_sel.replace("all()", f"has({NAMESPACE_LABEL})")
        ns_sel = ns_sel.replace("global()", f"!has({NAMESPACE_LABEL})")
    elif namespace:
        ns_sel = f"{NAMESPACE_LABEL} == '{namespace}'"
    parts = [s for s in (sa_selector, selector or "") if s]
    combined = parts[0] if len(parts) == 1 else f"({') && ('.join(parts)})" if parts else ""
    if ns_sel and (combined or not_selector or namespace_selector):
        combined = f"({ns_sel}) && ({combined})" if combined else ns_sel
    return combined
