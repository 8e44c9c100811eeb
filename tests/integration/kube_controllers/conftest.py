"""Fixtures for the kube-controllers tests: the shared real etcd (tests/integration/datastore)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datastore"))

from etcd_fixture import etcd_server  # noqa: F401  (fixture)
