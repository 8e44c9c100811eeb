"""calico-py: a Python implementation of Project Calico."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("calico")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
