"""Felix's side of host endpoint resolution: the key the all-interfaces endpoint is rendered
under. The resolver itself is shared with ``calicoctl explain`` and lives below both
(``calico.policyeval.hostendpoints``); it is re-exported here for Felix's modules."""

from __future__ import annotations

from calico.policyeval.hostendpoints import (
    all_interfaces_endpoint,
    normalise_addr,
    resolve_host_endpoints,
)

# The key the all-interfaces (``interfaceName: "*"``) endpoint is resolved under, and the suffix
# of its chains (upstream's name): longer than IFNAMSIZ, so no real interface can clash with it.
ALL_INTERFACES = "any-interface-at-all"

__all__ = ["ALL_INTERFACES", "all_interfaces_endpoint", "normalise_addr", "resolve_host_endpoints"]
