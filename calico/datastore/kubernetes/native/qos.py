"""Pod QoS annotations -> WorkloadEndpoint ``qosControls``, as upstream's pod conversion.

Every problem is a warning, never a refusal: a bad quantity leaves its control unset, an
out-of-range one is clamped to the limit, a burst/peakrate/minburst/packet-burst without the
control it qualifies is dropped; bandwidth without burst gets burst ``4Gi``, a packet rate
without packet burst gets ``5`` (the minburst default depends on the MTU and is Felix's).
Calico's bandwidth annotations win over the ``kubernetes.io/*-bandwidth`` ones.
"""

from __future__ import annotations

import logging
from typing import Any

from calico.api.rules import DSCP_NAMES
from calico.datastore.kubernetes.quantity import QuantityError, canonical, quantity_value

log = logging.getLogger(__name__)

_Q = "qos.projectcalico.org/"
DSCP = _Q + "dscp"
DEFAULT_BURST = 4 * 2**30
DEFAULT_PACKET_BURST = 5

#: (annotation, field, what the error calls it, min, max), in upstream's parse order.
_ANNOTATIONS: tuple[tuple[str, str, str, int, int], ...] = (
    ("kubernetes.io/ingress-bandwidth", "ingressBandwidth", "ingress bandwidth", 1000, 10**15),
    ("kubernetes.io/egress-bandwidth", "egressBandwidth", "egress bandwidth", 1000, 10**15),
    (_Q + "ingressBandwidth", "ingressBandwidth", "ingress bandwidth", 1000, 10**15),
    (_Q + "egressBandwidth", "egressBandwidth", "egress bandwidth", 1000, 10**15),
    (_Q + "ingressBurst", "ingressBurst", "ingress burst", 1000, (2**32 - 1) * 8),
    (_Q + "egressBurst", "egressBurst", "egress burst", 1000, (2**32 - 1) * 8),
    (_Q + "ingressPeakrate", "ingressPeakrate", "ingress peakrate", 1010, 101 * 10**13),
    (_Q + "egressPeakrate", "egressPeakrate", "egress peakrate", 1010, 101 * 10**13),
    (_Q + "ingressMinburst", "ingressMinburst", "ingress minburst", 1000, 10**8),
    (_Q + "egressMinburst", "egressMinburst", "egress minburst", 1000, 10**8),
    (_Q + "ingressPacketRate", "ingressPacketRate", "ingress packet rate", 1, 10**4),
    (_Q + "egressPacketRate", "egressPacketRate", "egress packet rate", 1, 10**4),
    # Upstream calls the packet-burst annotations "packet rate" in its errors too.
    (_Q + "ingressPacketBurst", "ingressPacketBurst", "ingress packet rate", 1, 10**4),
    (_Q + "egressPacketBurst", "egressPacketBurst", "egress packet rate", 1, 10**4),
    (
        _Q + "ingressMaxConnections",
        "ingressMaxConnections",
        "ingress max connections",
        1,
        2**32 - 1,
    ),
    (_Q + "egressMaxConnections", "egressMaxConnections", "egress max connections", 1, 2**32 - 1),
)

#: (dependent control, control it needs, error when the need is unmet).
_NEEDS = (
    ("Burst", "Bandwidth", "{d} bandwidth must be specified when {d} burst is specified"),
    ("Peakrate", "Bandwidth", "{d} peakrate must be greater than {d} bandwidth when specified"),
    ("Minburst", "Peakrate", "{d} peakrate must be specified when {d} minburst is specified"),
    (
        "PacketBurst",
        "PacketRate",
        "{d} packet rate must be specified when {d} packet burst is specified",
    ),
)


def clamped_quantity(text: str, low: int, high: int) -> tuple[int, str | None]:
    """(value, error): 0 for an unparsable quantity, the limit for one outside low..high."""
    try:
        value = quantity_value(text)
    except QuantityError as exc:
        return 0, str(exc)
    if value < low:
        lim = canonical(low)
        return low, f"resource specified is too small (less than {lim}), setting it to {lim}"
    if value > high:
        lim = canonical(high)
        return high, f"resource specified is too large (more than {lim}), setting it to {lim}"
    return value, None


def _dscp(text: str) -> int | str:
    """numorstring.DSCPFromString + Validate: a uint8 decimal string is a code point (at most
    63), anything else a name matched case-insensitively (stored in its canonical spelling)."""
    if text.isascii() and text.isdigit() and int(text) <= 255:
        if int(text) > 63:
            raise ValueError("DSCP must be between 0 and 63")
        return int(text)
    name = text.strip().upper()
    if name not in DSCP_NAMES:
        raise ValueError(f"{text} is not a valid DSCP value")
    return name


def qos_controls(annotations: dict[str, str]) -> tuple[dict[str, Any] | None, list[str]]:
    """(qosControls in JSON form or None when nothing is set, the errors upstream reports)."""
    controls: dict[str, Any] = {}
    errors: list[str] = []
    for key, field, what, low, high in _ANNOTATIONS:
        if key in annotations:
            value, err = clamped_quantity(annotations[key], low, high)
            if err:
                errors.append(f"error parsing {what} annotation: {err}")
            controls[field] = value
    for dep, need, msg in _NEEDS:
        for d in ("ingress", "egress"):
            dv, nv = controls.get(d + dep, 0), controls.get(d + need, 0)
            unmet = nv == 0 or (dep == "Peakrate" and nv >= dv)
            if dv and unmet:
                errors.append(msg.format(d=d))
                controls[d + dep] = 0
    for d in ("ingress", "egress"):
        if controls.get(d + "Bandwidth") and not controls.get(d + "Burst"):
            controls[d + "Burst"] = DEFAULT_BURST
        if controls.get(d + "PacketRate") and not controls.get(d + "PacketBurst"):
            controls[d + "PacketBurst"] = DEFAULT_PACKET_BURST
    if DSCP in annotations:
        try:
            controls["dscp"] = _dscp(annotations[DSCP])
        except ValueError as exc:
            errors.append(f"error parsing DSCP annotation: {exc}")
    controls = {k: val for k, val in controls.items() if val != 0 or k == "dscp"}
    return controls or None, errors


def pod_qos_controls(pod_name: str, annotations: dict[str, str]) -> dict[str, Any] | None:
    """qosControls for a pod, logging (not raising) what upstream only warns about."""
    controls, errors = qos_controls(annotations)
    if errors:
        log.warning(
            "Error parsing QoSControl annotations of pod %s: %s", pod_name, "; ".join(errors)
        )
    return controls
