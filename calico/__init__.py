"""calico-py: a Python implementation of Project Calico."""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs the resident CNI helper's client ~5 ms per call
if TYPE_CHECKING:
    from typing import Any


def __getattr__(name: str) -> Any:
    # Resolved on first use: importlib.metadata costs ~45 ms, which every CNI call would pay.
    if name == "__version__":
        from importlib import metadata

        try:
            version = metadata.version("calico")
        except metadata.PackageNotFoundError:  # a source tree that is not installed
            version = "0.0.0+unknown"
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module 'calico' has no attribute {name!r}")
