"""Calico IPAM: block-based address allocation shared by every host through the datastore.

Public entry points: :class:`~calico.ipam.allocator.IPAMClient`
(assign/release/affinity/config/utilization), :func:`~calico.ipam.gc.garbage_collect` (leaked
addresses, empty blocks of deleted nodes), utilisation and the ``ipam check`` report
(:mod:`calico.ipam.check`). Library code only: the ``calicoctl ipam`` commands live in
:mod:`calico.calicoctl.ipam`.

Names resolve on first use (PEP 562), so importing a light submodule (the CNI plugin's lean
ADD uses only :mod:`calico.ipam.blocks`) does not load the typed allocator and pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calico.ipam.allocator import IPAMClient, ReleaseOptions
    from calico.ipam.blocks import BadSequenceNumber, affinity_name, cidr_to_name
    from calico.ipam.errors import (
        AddressInUseError,
        IPAMError,
        NoFreeAddressesError,
        TooMuchContentionError,
    )
    from calico.ipam.gc import GCResult, garbage_collect
    from calico.ipam.usage import BlockUsage, PoolUsage, get_utilization

__all__ = [
    "AddressInUseError",
    "BadSequenceNumber",
    "BlockUsage",
    "GCResult",
    "IPAMClient",
    "IPAMError",
    "NoFreeAddressesError",
    "PoolUsage",
    "ReleaseOptions",
    "TooMuchContentionError",
    "affinity_name",
    "cidr_to_name",
    "garbage_collect",
    "get_utilization",
]

_SOURCES = {
    "AddressInUseError": "calico.ipam.errors",
    "BadSequenceNumber": "calico.ipam.blocks",
    "BlockUsage": "calico.ipam.usage",
    "GCResult": "calico.ipam.gc",
    "IPAMClient": "calico.ipam.allocator",
    "IPAMError": "calico.ipam.errors",
    "NoFreeAddressesError": "calico.ipam.errors",
    "PoolUsage": "calico.ipam.usage",
    "ReleaseOptions": "calico.ipam.allocator",
    "TooMuchContentionError": "calico.ipam.errors",
    "affinity_name": "calico.ipam.blocks",
    "cidr_to_name": "calico.ipam.blocks",
    "garbage_collect": "calico.ipam.gc",
    "get_utilization": "calico.ipam.usage",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value = getattr(importlib.import_module(source), name)
    return value
