"""Calico IPAM: block-based address allocation shared by every host through the datastore.

Public entry points: :class:`IPAMClient` (assign/release/affinity/config/utilization),
:func:`garbage_collect` (leaked addresses, empty blocks of deleted nodes), utilisation and the
``ipam check`` report (:mod:`calico.ipam.check`). Library code only: the ``calicoctl ipam``
commands live in :mod:`calico.calicoctl.ipam`.
"""

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
