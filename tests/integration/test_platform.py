"""The set-up `make test` performs: Debian's libnftables binding works inside the venv."""

from __future__ import annotations

import os
import shutil

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for nftables")


def test_nftables_binding_importable() -> None:
    import nftables  # noqa: F401  (linked into the venv by scripts/setup-venv.sh)


@needs_root
def test_nftables_json_round_trip() -> None:
    import nftables

    nft = nftables.Nftables()
    nft.set_json_output(True)
    table = {"family": "inet", "name": "calico_platform_test"}
    rc, _, err = nft.json_cmd({"nftables": [{"add": {"table": table}}]})
    try:
        assert rc == 0, err
        rc, out, err = nft.json_cmd({"nftables": [{"list": {"table": table}}]})
        assert rc == 0, err
        names = [o["table"]["name"] for o in out["nftables"] if "table" in o]
        assert names == ["calico_platform_test"]
    finally:
        nft.json_cmd({"nftables": [{"delete": {"table": table}}]})


def test_runit_installed() -> None:
    for tool in ("runsv", "sv", "svlogd", "runsvdir"):
        assert shutil.which(tool), f"{tool} missing: scripts/setup-system.sh installs runit"
