"""EtcdBackend over TLS with client certificates (openssl-generated CA and cert)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from calico.datastore import ConnectionFailedError, DatastoreConfigError
from calico.datastore.config import from_env
from calico.datastore.etcd import EtcdBackend
from calico.datastore.etcd.server import EtcdServer, TLSFiles
from calico.datastore.factory import open_backend

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None or shutil.which("etcd") is None, reason="needs openssl, etcd"
)


def make_certs(d: Path) -> TLSFiles:
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=etcd", "-keyout", "key.pem",
        "-out", "req.csr")  # fmt: skip
    (d / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
    )
    run("x509", "-req", "-in", "req.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "1", "-extfile", "ext.cnf", "-out", "cert.pem")  # fmt: skip
    return TLSFiles(str(d / "ca.pem"), str(d / "cert.pem"), str(d / "key.pem"))


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    tls = make_certs(tmp_path_factory.mktemp("certs"))
    with EtcdServer(tls=tls) as server:
        yield server


def test_tls_with_client_cert(tls_server: EtcdServer) -> None:
    tls = tls_server.tls
    assert tls is not None
    env = {
        "DATASTORE_TYPE": "etcdv3",
        "ETCD_ENDPOINTS": tls_server.endpoints,
        "ETCD_KEY_FILE": tls.key_file,
        "ETCD_CERT_FILE": tls.cert_file,
        "ETCD_CA_CERT_FILE": tls.ca_file,
    }
    b = open_backend(from_env(env))
    try:
        rev = b.apply("/tls/k", "1").revision
        w = b.watch("/tls/", rev - 1)
        ev = w.next(5)
        assert ev is not None and ev.value == "1"
        w.stop()
    finally:
        b.close()


def test_tls_without_client_cert_fails(tls_server: EtcdServer) -> None:
    tls = tls_server.tls
    assert tls is not None
    b = EtcdBackend(tls_server.endpoints, ca_file=tls.ca_file, timeout=3)
    try:
        with pytest.raises(ConnectionFailedError):
            b.get("/tls/k")
    finally:
        b.close()


def test_unreadable_tls_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(DatastoreConfigError, match=r"missing\.pem"):
        EtcdBackend("https://127.0.0.1:2379", ca_file=str(tmp_path / "missing.pem"))
