"""``BPFEnabled=false``: undo what a BPF-mode run left, so nftables alone decides.

Its own module so that a Felix in nftables mode (every start runs this clean-up) imports only
the detach and bpffs helpers, not the BPF dataplane :mod:`calico.felix.bpf.mode` builds (32
modules, ~12 ms CPU of every start: design/performance.md "Cold start: dataclasses and
imports"). :mod:`calico.felix.bpf.mode` re-exports these names.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any

from calico.felix.bpf import attach, bpffs

log = logging.getLogger(__name__)

BPFFS_ROOT = "/sys/fs/bpf"
PIN_DIR = "/sys/fs/bpf/tc/globals"  # upstream's directory; our maps are named cpy_*
LINK_DIR = "/sys/fs/bpf/tcx"  # upstream's TCX link pins


def clean_up(config: Any) -> None:
    """BPF mode off: detach our programs left on workload interfaces by a BPF-mode run and
    remove our pins, so nftables alone decides. Cheap when there is nothing to do; failures
    are logged (nftables still programs its chains)."""
    prefixes = tuple(config["InterfacePrefix"].split(","))
    try:
        cleaned = attach.detach_all(
            prefixes, data_ifaces=config["BPFDataIfacePattern"], link_dir=LINK_DIR
        )
    except Exception as e:  # netlink trouble must not stop the nftables dataplane
        log.error("Failed to remove BPF programs after BPF mode was turned off: %s", e)
        return
    if cleaned:
        log.info("BPF mode off: detached BPF programs from %s", ", ".join(cleaned))
    if os.path.isdir(PIN_DIR) and bpffs.is_bpffs(BPFFS_ROOT):
        for name in os.listdir(PIN_DIR):
            if name.startswith("cpy_"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(PIN_DIR, name))
