"""Fixtures for this folder live in cni_fixtures.py so test modules can import its helpers by a
unique module name (pytest keeps only one module called ``conftest`` in sys.modules)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from cni_fixtures import *  # noqa: E402, F403
