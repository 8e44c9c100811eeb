"""The CNI test world (a host netns with the installed plugin) for the KDD CNI tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cni"))

from cni_fixtures import world  # noqa: F401  (registers the fixture here)
