"""Handle bookkeeping: how many addresses each handle holds in each block.

The handle is an index that lets release-by-handle visit only the blocks that matter. It is
updated *before* a block write that allocates (and rolled back if that write loses), so a crash
can leave a handle counting too much — which GC cleans up — but never an allocation the handle
does not know about.
"""

from __future__ import annotations

from calico.datastore.errors import (
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.ipam.blocks import IPNetwork
from calico.ipam.errors import TooMuchContentionError
from calico.ipam.store import IPAMStore


class HandleBook:
    def __init__(self, store: IPAMStore, retries: int) -> None:
        self.store = store
        self.retries = retries

    def add(self, handle_id: str, cidr: IPNetwork, n: int) -> None:
        key = str(cidr)
        for _ in range(self.retries):
            handle = self.store.get_handle(handle_id)
            try:
                if handle is None:
                    self.store.create_handle(handle_id, {key: n})
                else:
                    counts = dict(handle.spec.block)
                    counts[key] = counts.get(key, 0) + n
                    self.store.update_handle(handle, counts)
                return
            except (ResourceAlreadyExistsError, UpdateConflictError, ResourceDoesNotExistError):
                continue
        raise TooMuchContentionError(f"could not update handle {handle_id}: too much contention")

    def remove(self, handle_id: str, counts: dict[str, int]) -> None:
        """Subtract per-block counts; a handle left with nothing is deleted."""
        for _ in range(self.retries):
            handle = self.store.get_handle(handle_id)
            if handle is None:
                return
            left = dict(handle.spec.block)
            for key, n in counts.items():
                remaining = left.get(key, 0) - n
                if remaining > 0:
                    left[key] = remaining
                else:
                    left.pop(key, None)
            try:
                if left:
                    self.store.update_handle(handle, left)
                else:
                    self.store.delete_handle(handle)
                return
            except (UpdateConflictError, ResourceDoesNotExistError):
                continue
        raise TooMuchContentionError(f"could not update handle {handle_id}: too much contention")
