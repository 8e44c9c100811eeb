"""v1 BGP values read by confd: computed peerings (config values are plain strings)."""

from __future__ import annotations

from dataclasses import dataclass

from calico.model.values.codec import V1Value, text


@dataclass(frozen=True, slots=True)
class BGPPeer(V1Value):
    """``/calico/bgp/v1/{global,host/<node>}/peer_v4|v6/<ip>``: the peer's address and AS
    number (the AS travels as a JSON string, as upstream's ``as_num,string`` tag writes it)."""

    ip: str = text("ip")
    as_num: str = text("as_num")
