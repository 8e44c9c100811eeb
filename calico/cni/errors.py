"""CNI error results: the only way a plugin failure reaches the runtime.

The spec's well-known codes are kept distinct so runtimes can act on them (11 = retry later);
everything else is a plugin-specific code >= 100.
"""

from __future__ import annotations

import json
from typing import Any

# Well-known codes from the CNI specification.
INCOMPATIBLE_VERSION = 1
UNSUPPORTED_FIELD = 2
UNKNOWN_CONTAINER = 3
INVALID_ENV = 4
IO_FAILURE = 5
DECODE_FAILURE = 6
INVALID_NETCONF = 7
TRY_AGAIN_LATER = 11
# Plugin-specific codes.
PLUGIN_FAILURE = 100
IPAM_FAILURE = 101
DATAPLANE_FAILURE = 102
DATASTORE_FAILURE = 103
POLICY_TIMEOUT = 104
CHECK_FAILED = 105


class CNIError(Exception):
    """A failure with its CNI code; ``msg`` is short, ``details`` may be long."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.details = details

    def to_dict(self, cni_version: str) -> dict[str, Any]:
        out: dict[str, Any] = {"cniVersion": cni_version, "code": self.code, "msg": self.msg}
        if self.details:
            out["details"] = self.details
        return out

    def to_json(self, cni_version: str) -> str:
        return json.dumps(self.to_dict(cni_version))

    def __str__(self) -> str:
        return f"{self.msg}: {self.details}" if self.details else self.msg
