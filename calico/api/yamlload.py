"""The YAML loader calicoctl's manifests are read with: Go's YAML rules, not PyYAML's defaults.

Kept out of ``calico.api.io`` so that decoding stored JSON (every datastore read) does not
import PyYAML.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class GoLikeLoader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings and rejects duplicate keys (as Go's YAML)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                duplicate = False  # unhashable; the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


# Go's YAML reader (yaml.v2 behind upstream's converter) has no timestamps for string fields and
# no base-60 numbers: ``5663:12`` (a BGP community) must stay a string.
_INT = re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"
)
_FLOAT = re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


def _resolver(tag: str, rx: re.Pattern[str]) -> tuple[str, re.Pattern[str]]:
    if tag == "tag:yaml.org,2002:int":
        return tag, _INT
    if tag == "tag:yaml.org,2002:float":
        return tag, _FLOAT
    return tag, rx


GoLikeLoader.yaml_implicit_resolvers = {
    ch: [_resolver(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
