"""BlockAffinity -> its v1 key (confd's per-node block aggregation). Apart from ``ipam`` so
the Felix syncer, which converts pools and blocks only, does not define the affinity model."""

from __future__ import annotations

from typing import Any

from calico.api.ipamalloc import BlockAffinity
from calico.model import values as v1
from calico.model.ipam_keys import BlockAffinityKey
from calico.model.processors.common import Output, decode
from calico.model.resources import ResourceKey


def block_affinity(key: ResourceKey, value: Any) -> Output:
    """``{state, deleted}`` under the host's affinity key. Pending claims are not sent: confd
    must not advertise a block the host may yet fail to claim."""
    spec = decode(key, value, BlockAffinity).spec
    if spec.state == "pending":
        return {}
    affinity = v1.BlockAffinity(state=spec.state, deleted=spec.deleted)
    return {BlockAffinityKey(spec.node, spec.cidr): affinity}
