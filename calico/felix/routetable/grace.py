"""Grace-period bookkeeping for deleting routes we don't want.

The CNI plugin creates a workload's veth and adds its route *before* the datastore tells us about
the endpoint, so an unexpected route on a brand-new ``cali*`` interface is usually one we are about
to be told to want. Likewise a route that stopped being desired a moment ago may be re-desired by
the next update. Deleting either immediately would cut live traffic; we wait ``grace_period``
seconds since the interface first appeared or the route was last desired, whichever is later.
"""

from __future__ import annotations


class GraceTracker:
    """Remembers when interfaces appeared and when routes stopped being desired."""

    def __init__(self, grace_period: float) -> None:
        self.grace_period = grace_period
        self._iface_first_seen: dict[str, float] = {}
        self._last_desired: dict[tuple[str, str], float] = {}

    # --- interfaces ---------------------------------------------------------------------------

    def iface_seen(self, iface: str, now: float) -> None:
        """Record the first sighting of ``iface``; later sightings keep the original time."""
        self._iface_first_seen.setdefault(iface, now)

    def iface_gone(self, iface: str) -> None:
        """The interface disappeared: its routes went with it, and a re-creation starts afresh."""
        self._iface_first_seen.pop(iface, None)
        for key in [k for k in self._last_desired if k[0] == iface]:
            del self._last_desired[key]

    def first_seen(self, iface: str) -> float | None:
        return self._iface_first_seen.get(iface)

    # --- routes -------------------------------------------------------------------------------

    def route_undesired(self, iface: str, cidr: str, now: float) -> None:
        """``cidr`` on ``iface`` was desired until ``now``."""
        self._last_desired[(iface, cidr)] = now

    def route_desired(self, iface: str, cidr: str) -> None:
        self._last_desired.pop((iface, cidr), None)

    def was_desired(self, iface: str, cidr: str) -> bool:
        """True if we wanted this route at some point (so it is ours even off-prefix)."""
        return (iface, cidr) in self._last_desired

    def route_deleted(self, iface: str, cidr: str) -> None:
        self._last_desired.pop((iface, cidr), None)

    def deletion_time(self, iface: str, cidr: str, now: float) -> float:
        """Earliest time an undesired ``cidr`` on ``iface`` may be deleted.

        An interface we have never seen counts as seen ``now`` (so the answer is never "already").
        """
        first = self._iface_first_seen.get(iface, now)
        when = first + self.grace_period
        last = self._last_desired.get((iface, cidr))
        if last is not None:
            when = max(when, last + self.grace_period)
        return when

    def may_delete(self, iface: str, cidr: str, now: float) -> bool:
        return now >= self.deletion_time(iface, cidr, now)
