"""The resident CNI helper's pure parts: socket selection, refusals, the raw readiness keys."""

from __future__ import annotations

import os

from calico.api.policy import BUILT_IN_TIERS
from calico.cni import daemon, daemon_client
from calico.datastore.client import resource_path
from calico.datastore.factory import BUILT_IN_TIER_KEYS, CLUSTER_INFO_KEY


def test_socket_path_default_override_and_off() -> None:
    assert daemon_client.socket_path({}) == daemon_client.DEFAULT_SOCKET
    assert daemon_client.socket_path({daemon_client.SOCKET_ENV: "/x.sock"}) == "/x.sock"
    assert daemon_client.socket_path({daemon_client.SOCKET_ENV: ""}) is None
    assert daemon_client.socket_path({daemon_client.SOCKET_ENV: "OFF"}) is None


def test_call_without_socket_is_none(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {daemon_client.SOCKET_ENV: str(tmp_path / "none.sock")}
    assert daemon_client.call("CNI_PLUGIN", ["calico"], b"{}", env) is None
    assert (
        daemon_client.call("CNI_PLUGIN", ["calico"], b"{}", {daemon_client.SOCKET_ENV: "off"})
        is None
    )


def test_refusal() -> None:
    ok = {"mode": "CNI_PLUGIN", "ns": daemon_client.namespace_ids()}
    assert daemon.refusal(ok, os.geteuid()) is None
    assert daemon.refusal(ok, os.geteuid() + 1) is not None
    assert daemon.refusal({**ok, "mode": "CLI"}, os.geteuid()) is not None
    assert daemon.refusal({**ok, "ns": {"net": [0, 1], "root": [0, 2]}}, os.geteuid()) is not None


def test_readiness_keys_match_resource_paths() -> None:
    assert resource_path("ClusterInformation", "default") == CLUSTER_INFO_KEY
    assert tuple(resource_path("Tier", name) for name in BUILT_IN_TIERS) == BUILT_IN_TIER_KEYS
