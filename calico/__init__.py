"""calico-py: a Python implementation of Project Calico."""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs the resident CNI helper's client ~5 ms per call
if TYPE_CHECKING:
    from typing import Any


def _dist_info_version() -> str | None:
    """The Version header of the first ``calico-*.dist-info/METADATA`` on ``sys.path``: the
    distribution ``importlib.metadata`` would find, read without importing it (~15 ms of
    email, zipfile and csv parsers that a calicoctl command paid for one string)."""
    import os
    import sys

    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("calico-") and name.endswith(".dist-info"):
                try:
                    with open(os.path.join(entry, name, "METADATA"), encoding="utf-8") as f:
                        for line in f:
                            if line.startswith("Version:"):
                                return line.partition(":")[2].strip()
                            if not line.strip():
                                break
                except OSError:
                    pass
                return None  # found but unreadable: let importlib.metadata decide
            if name.endswith(".egg-info") and name.partition("-")[0] in ("calico", "calico.egg"):
                return None  # an egg's metadata: importlib.metadata reads that format
    return None


def __getattr__(name: str) -> Any:
    # Resolved on first use: importlib.metadata costs ~45 ms, which every CNI call would pay.
    if name == "__version__":
        version = _dist_info_version()
        if version is None:
            from importlib import metadata

            try:
                version = metadata.version("calico")
            except metadata.PackageNotFoundError:  # a source tree that is not installed
                version = "0.0.0+unknown"
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module 'calico' has no attribute {name!r}")
