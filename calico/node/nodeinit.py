"""``calico component node init``: host preparation that must happen before the daemons.

Without the eBPF dataplane that is only the state directories. The BPF filesystem is mounted
only when asked (``--bpffs`` or ``FELIX_BPFENABLED=true``), since nothing here uses it
otherwise; a failed mount exits 2 (upstream's code) unless ``--best-effort``.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from pathlib import Path

from calico.node.errors import NodeError

log = logging.getLogger(__name__)

STATE_DIRS = ("/var/lib/calico", "/var/run/calico")
BPFFS = "/sys/fs/bpf"
EXIT_BPFFS = 2


class BPFMountError(NodeError):
    exit_code = EXIT_BPFFS


def ensure_dirs(dirs: Sequence[str]) -> None:
    for d in dirs:
        try:
            Path(d).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise NodeError(f"Unable to create '{d}': {exc.strerror}") from None


def is_mounted(path: str, fstype: str, mounts: str = "/proc/mounts") -> bool:
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return False
    return any(
        len(f) >= 3 and f[1] == path and f[2] == fstype for f in (ln.split() for ln in lines)
    )


def mount_bpffs(path: str = BPFFS) -> None:
    if is_mounted(path, "bpf"):
        log.info("BPF filesystem already mounted at %s", path)
        return
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        res = subprocess.run(
            ["mount", "-t", "bpf", "bpffs", path], capture_output=True, text=True, timeout=10
        )
    except OSError as exc:
        raise BPFMountError(f"failed to mount the BPF filesystem at {path}: {exc}") from None
    if res.returncode != 0:
        raise BPFMountError(f"failed to mount the BPF filesystem at {path}: {res.stderr.strip()}")
    log.info("Mounted the BPF filesystem at %s", path)


def run_init(dirs: Sequence[str], bpffs: bool, best_effort: bool) -> None:
    ensure_dirs(dirs)
    if not bpffs:
        return
    try:
        mount_bpffs()
    except BPFMountError as exc:
        if not best_effort:
            raise
        log.warning("Continuing without the BPF filesystem (--best-effort): %s", exc)
