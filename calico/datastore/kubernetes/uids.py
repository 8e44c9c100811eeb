"""Upstream's UID conversion between a v3 object and the CR that stores it.

Calico never exposes a CR's own uid: it bit-reverses each of the 16 bytes except byte 6
(version) and byte 8 (variant), so the result is still a valid UUID and the mapping is its own
inverse. Used for v1 CRs, owner references, Profiles and converted
Kubernetes policies; never for pods (WorkloadEndpoints) or Nodes.
"""

from __future__ import annotations

import uuid

from calico.datastore.errors import InvalidValueError

_REVERSED = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


def convert_uid(uid: str) -> str:
    """Self-inverse; raises InvalidValueError for a non-UUID."""
    try:
        raw = uuid.UUID(uid).bytes
    except ValueError:
        raise InvalidValueError(f"uid {uid!r} is not a UUID") from None
    out = bytes(b if i in (6, 8) else _REVERSED[b] for i, b in enumerate(raw))
    return str(uuid.UUID(bytes=out))
