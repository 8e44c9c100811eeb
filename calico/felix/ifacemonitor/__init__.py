"""Interface (link + address) monitoring over netlink for Felix's dataplane."""

from calico.felix.ifacemonitor.monitor import InterfaceMonitor
from calico.felix.ifacemonitor.state import IfaceState, IfaceTracker, LinkFact

__all__ = ["IfaceState", "IfaceTracker", "InterfaceMonitor", "LinkFact"]
