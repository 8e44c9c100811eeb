"""A stored ClusterInformation read without pydantic: the first resource a Felix start reads
(``calico.felix.startup_config``) and one its syncer converts again; see ``leanpolicy`` for the
contract (a plain shape accepted and converted exactly as the processor would, anything else
None: the processor and its model decide). ``tests/unit/model/test_lean_config.py`` checks
the two agree over generated documents.
"""

from __future__ import annotations

from typing import Any

from calico.model.keys import GlobalConfigKey, ReadyFlagKey
from calico.model.processors.common import Output
from calico.model.processors.leanmeta import Decline, name_of, top
from calico.model.resources import ResourceKey

#: ClusterInformationSpec's string fields and the Felix parameters they set (processor order).
_STRING_FIELDS = (
    ("clusterGUID", "ClusterGUID"),
    ("clusterType", "ClusterType"),
    ("calicoVersion", "CalicoVersion"),
    ("variant", "Variant"),
)
_SPEC = frozenset({name for name, _ in _STRING_FIELDS} | {"datastoreReady"})


def lean_cluster_information(key: ResourceKey, value: Any) -> Output | None:
    """The processor's output for a plain stored ClusterInformation ``default``, or None."""
    if key.name != "default":
        return None  # the processor reports the name
    try:
        meta, spec = top(key, value, "ClusterInformation", namespaced=False)
        if name_of(key, meta) != "default":
            return None
    except (Decline, ValueError):
        return None
    if not spec.keys() <= _SPEC:
        return None
    out: Output = {}
    for field, param in _STRING_FIELDS:
        text = spec.get(field, "")
        if type(text) is not str:
            return None
        if text:
            out[GlobalConfigKey(param)] = text
    if "datastoreReady" in spec:
        ready = spec["datastoreReady"]
        if type(ready) is not bool:
            return None
        out[ReadyFlagKey()] = ready
    return out
