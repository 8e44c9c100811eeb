"""Fixtures for guardian's tunnel tests: certificates, fake targets and a guardian process."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from component_process import ComponentProcess
from guardian_peer import CertSet, FakeKubeAPI, free_port, make_cert


class GuardianProcess(ComponentProcess):
    WAIT_TIMEOUT = 20.0

    def __init__(self, calico_bin: str, env: dict[str, str], log_path: Path) -> None:
        super().__init__(calico_bin, "guardian", env, log_path)

    def wait_log(self, text: str, timeout: float | None = None) -> re.Match[str]:  # type: ignore[override]
        """Guardian's tests wait for literal log texts."""
        return super().wait_log(re.escape(text), timeout)


@pytest.fixture
def certs(tmp_path: Path) -> CertSet:
    return CertSet(tmp_path / "pki")


@pytest.fixture
def kube_api(tmp_path: Path) -> Iterator[FakeKubeAPI]:
    ca = make_cert("kube-ca", ca=True)
    server = make_cert("kube-apiserver", dns=("localhost",), ips=("127.0.0.1",), issuer=ca)
    (tmp_path / "sa").mkdir()
    (tmp_path / "sa" / "ca.crt").write_bytes(ca.cert)
    (tmp_path / "sa" / "token").write_text("tok-123\n")
    api = FakeKubeAPI(server, tmp_path)
    yield api
    api.close()


@pytest.fixture
def guardian_env(tmp_path: Path, certs: CertSet, kube_api: FakeKubeAPI) -> dict[str, str]:
    gm_ca = make_cert("goldmane-ca", ca=True)
    gm_ca_path = tmp_path / "goldmane-ca.crt"
    gm_ca_path.write_bytes(gm_ca.cert)
    env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
    env.update(
        GUARDIAN_CERT_PATH=certs.files["cert_path"],
        GUARDIAN_K8S_ENDPOINT=f"https://localhost:{kube_api.port}",
        GUARDIAN_K8S_TOKEN_FILE=str(tmp_path / "sa" / "token"),
        GUARDIAN_K8S_CA_FILE=str(tmp_path / "sa" / "ca.crt"),
        GUARDIAN_CA_FILE=str(gm_ca_path),
        GUARDIAN_GOLDMANE_ENDPOINT="https://localhost:1",
        GUARDIAN_TUNNEL_DIAL_RETRY_INTERVAL="200ms",
        GUARDIAN_TUNNEL_DIAL_TIMEOUT="2s",
        GUARDIAN_CONNECTION_RETRY_INTERVAL="200ms",
        GUARDIAN_LISTEN_HOST="127.0.0.1",
        GUARDIAN_LISTEN_PORT=str(free_port()),
        HEALTH_PORT=str(free_port()),
    )
    env["_GM_CA_CERT"] = gm_ca.cert.decode()
    env["_GM_CA_KEY"] = gm_ca.key.decode()
    return env


@pytest.fixture
def start_guardian(calico_bin: str, tmp_path: Path) -> Iterator:
    procs: list[GuardianProcess] = []

    def start(env: dict[str, str]) -> GuardianProcess:
        env = {k: v for k, v in env.items() if not k.startswith("_GM_")}
        proc = GuardianProcess(calico_bin, env, tmp_path / f"guardian-{len(procs)}.log")
        procs.append(proc)
        return proc

    yield start
    for p in procs:
        p.stop()
