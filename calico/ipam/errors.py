"""IPAM errors callers act on (the CNI plugin maps them to CNI error results)."""

from __future__ import annotations

from calico.datastore.errors import DatastoreError


class IPAMError(DatastoreError):
    """A request IPAM cannot satisfy as asked (bad pool, bad address, bad config)."""


class NoFreeAddressesError(IPAMError):
    """No allowed pool had a free address for this host (after claiming and borrowing)."""


class AddressInUseError(IPAMError):
    """``assign_ip`` asked for an address that is already allocated."""


class TooMuchContentionError(IPAMError):
    """A compare-and-swap loop kept losing to other writers for every retry."""
