"""Optionally hold ADD until Felix reports the endpoint's policy programmed.

Felix writes ``<endpoint_status_dir>/<orchestrator> <workload> <endpoint>`` (the name is
:func:`calico.model.status_files.endpoint_status_filename`'s, shared with Felix's writer) once
the endpoint is up with policy in place. Upstream only warns when the wait times out: the pod starts
anyway, it just may see a moment without policy.
"""

from __future__ import annotations

import logging
import os
import time

from calico.cni.identity import Identity
from calico.model.status_files import endpoint_status_filename

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.02


def status_path(status_dir: str, ident: Identity) -> str:
    name = endpoint_status_filename(ident.orchestrator, ident.workload_id, ident.endpoint)
    return os.path.join(status_dir, name)


def wait_for_policy(status_dir: str, ident: Identity, timeout: float) -> bool:
    """True once the status file exists; False (logged) when ``timeout`` passes first."""
    if timeout <= 0:
        return True
    path = status_path(status_dir, ident)
    deadline = time.monotonic() + timeout
    while True:
        if os.path.exists(path):
            log.info("Felix reports policy programmed for %s", ident.wep_name)
            return True
        if time.monotonic() >= deadline:
            log.warning(
                "Timed out after %ss waiting for Felix to program policy (%s); continuing",
                timeout,
                path,
            )
            return False
        time.sleep(POLL_INTERVAL)
