"""Golden-file comparison for calicoctl output (set CALICOCTL_UPDATE_GOLDEN=1 to rewrite)."""

from __future__ import annotations

import os
import re
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"
_SERVER_META = re.compile(
    r'^(\s*"?(?:uid|creationTimestamp|resourceVersion|clusterGUID)"?:\s*).*?(,?)$', re.M
)


def normalise(text: str) -> str:
    """Server-set metadata differs per run and per datastore: replace it with placeholders."""
    return _SERVER_META.sub(lambda m: f"{m.group(1)}<server-set>{m.group(2)}", text)


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    text = normalise(text)
    if os.environ.get("CALICOCTL_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text)
        if os.environ.get("CALICOCTL_UPDATE_GOLDEN") != "1":
            raise AssertionError(f"golden file {path.name} was missing and has been written")
    expected = path.read_text()
    assert text == expected, f"output differs from golden/{name}:\n{text}"
