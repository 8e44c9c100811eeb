"""Felix syncing through Typha (``FELIX_TYPHAADDR``) enforces the same policy matrix as Felix
reading the datastore directly, and converges after a Typha restart during which policy changed
(a policy deleted meanwhile must reach Felix as a synthesised delete).

Typha runs in the Felix host's network namespace, over the same embedded datastore file.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "felix" / "dataplane"))
from felix_dp_fixtures import Cluster, need_root
from harness import (
    POOL,
    Datastore,
    Felix,
    eventually,
    host_netns_setup,
    namespace_profile,
    netns,
    servers,
    tcp,
    workload,
)
from typha_helpers import TyphaProcess

pytestmark = pytest.mark.root


def np(name: str, spec: dict[str, Any], namespace: str = "ns1") -> dict[str, Any]:
    return {
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


DENY_SERVER = np("deny-all", {"selector": "app == 'server'", "types": ["Ingress"]})
ALLOW_CLIENT = np(
    "allow-client",
    {
        "order": 10,
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [{"action": "Allow", "source": {"selector": "app == 'client'"}}],
    },
)
ALLOW_NS2_9090 = {
    "kind": "GlobalNetworkPolicy",
    "metadata": {"name": "ns2-to-9090"},
    "spec": {
        "order": 5,
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [
            {
                "action": "Allow",
                "protocol": "TCP",
                "source": {"selector": "app == 'x'"},
                "destination": {"ports": [9090]},
            }
        ],
    },
}
# (resources present) -> verdicts for client->server:8080, other->server:9090, other->server:8080
MATRIX: list[tuple[tuple[dict[str, Any], ...], tuple[str, str, str]]] = [
    ((), ("ok", "ok", "ok")),
    ((DENY_SERVER,), ("timeout", "timeout", "timeout")),
    ((ALLOW_CLIENT,), ("ok", "timeout", "timeout")),
    ((ALLOW_NS2_9090,), ("timeout", "ok", "timeout")),
    ((ALLOW_CLIENT, ALLOW_NS2_9090), ("ok", "ok", "timeout")),
]


def verdicts(c: Cluster) -> tuple[str, str, str]:
    client, server, other = c.w["client"], c.w["server"], c.w["other"]
    return (
        tcp(client, server.ip, 8080),
        tcp(other, server.ip, 9090),
        tcp(other, server.ip, 8080),
    )


def apply(c: Cluster, docs: tuple[dict[str, Any], ...]) -> None:
    for doc in docs:
        c.ds.apply(doc)


def remove(c: Cluster, docs: tuple[dict[str, Any], ...]) -> None:
    for doc in docs:
        meta = doc["metadata"]
        c.ds.delete(doc["kind"], meta["name"], meta.get("namespace"))


@contextlib.contextmanager
def felix_host(workdir: Path, use_typha: bool) -> Iterator[tuple[Cluster, TyphaProcess | None]]:
    """As ``felix_dp_fixtures.cluster``, with Typha started in the host netns first (over the
    same datastore file) and ``FELIX_TYPHAADDR`` pointing Felix at it."""
    with netns("fxhost") as host, netns("fxext") as outside:
        host_netns_setup(host, outside)
        ds = Datastore(str(workdir / "calico.db"))
        typha = None
        env: dict[str, str] = {}
        try:
            ds.apply({"kind": "IPPool", "metadata": {"name": "pool1"}, "spec": {"cidr": POOL}})
            for ns in ("ns1", "ns2"):
                namespace_profile(ds, ns)
            if use_typha:
                ds_env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": ds.path}
                typha = TyphaProcess(workdir, ds_env, netns=host)
                typha.start()
                typha.wait_ready()
                env["FELIX_TYPHAADDR"] = typha.addr
            felix = Felix(host, workdir, env=env)
            try:
                felix.start()
                felix.wait_ready()
                yield Cluster(host, outside, ds, felix, workdir), typha
            finally:
                felix.kill()
        finally:
            if typha is not None:
                typha.kill()
            ds.close()


@pytest.fixture(scope="module", params=["direct", "typha"])
def felix_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, TyphaProcess | None]]:
    need_root()
    workdir = tmp_path_factory.mktemp(f"felix-{request.param}")
    with felix_host(workdir, request.param == "typha") as (c, typha):
        ports = [{"name": "http", "protocol": "TCP", "port": 8080}]
        with (
            workload(c.host, c.ds, "client", "10.65.0.1", labels={"app": "client"}) as w1,
            workload(
                c.host, c.ds, "server", "10.65.0.2", labels={"app": "server"}, ports=ports
            ) as w2,
            workload(
                c.host, c.ds, "other", "10.65.1.3", namespace="ns2", labels={"app": "x"}
            ) as w3,
            servers(w2, "tcp:8080", "tcp:9090"),
        ):
            c.w.update(client=w1, server=w2, other=w3)
            yield c, typha


@pytest.mark.parametrize("case", range(len(MATRIX)))
def test_policy_matrix(felix_cluster: tuple[Cluster, TyphaProcess | None], case: int) -> None:
    c, _ = felix_cluster
    docs, expected = MATRIX[case]
    apply(c, docs)
    try:
        eventually(lambda: verdicts(c), expected, timeout=20)
    finally:
        remove(c, docs)
        eventually(lambda: verdicts(c), MATRIX[0][1], timeout=20)


@pytest.mark.parametrize("felix_cluster", ["typha"], indirect=True)
def test_typha_restart_while_policy_changed(
    felix_cluster: tuple[Cluster, TyphaProcess | None],
) -> None:
    c, typha = felix_cluster
    assert typha is not None
    # Felix really syncs through Typha: one felix-syncer stream, and Felix says so.
    assert typha.metric('typha_connections_streaming{syncer="felix"}') == 1
    assert f"Syncing through Typha at {typha.addr}" in c.felix.log_path.read_text()
    apply(c, (ALLOW_CLIENT,))
    eventually(lambda: verdicts(c), ("ok", "timeout", "timeout"), timeout=20)
    assert typha.stop() == 0
    # While Typha is down: the allow policy goes away and a deny-all arrives. Felix keeps the
    # dataplane it had (workloads keep working) until Typha is back.
    remove(c, (ALLOW_CLIENT,))
    apply(c, (DENY_SERVER, ALLOW_NS2_9090))
    assert verdicts(c) == ("ok", "timeout", "timeout")
    try:
        typha.start()
        typha.wait_ready()
        # allow-client must be deleted (synthesised: it is not in the new snapshot)
        eventually(lambda: verdicts(c), ("timeout", "ok", "timeout"), timeout=30)
        assert c.felix.proc is not None and c.felix.proc.poll() is None  # no restart needed
        assert typha.metric('typha_connections_streaming{syncer="felix"}') == 1
    finally:
        remove(c, (DENY_SERVER, ALLOW_NS2_9090))
        eventually(lambda: verdicts(c), MATRIX[0][1], timeout=20)
