"""Felix's side of host endpoint resolution: the key the all-interfaces endpoint is rendered
under. The resolver itself is shared with ``calicoctl explain`` and lives below both
(``calico.policyeval.hostendpoints``); it is re-exported here for Felix's modules."""

from __future__ import annotations

from calico.policyeval.chains import ALL_INTERFACES
from calico.policyeval.hostendpoints import (
    all_interfaces_endpoint,
    normalise_addr,
    resolve_host_endpoints,
)

__all__ = ["ALL_INTERFACES", "all_interfaces_endpoint", "normalise_addr", "resolve_host_endpoints"]
