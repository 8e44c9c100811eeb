"""The tunnel's TLS settings: server name from the management certificate's one DNS SAN."""

from __future__ import annotations

import pytest
from guardian_peer import CertSet, make_cert

from calico.guardian.config import load_config
from calico.guardian.tlsconfig import TLSConfigError, single_dns_name, tunnel_client_tls


def test_server_name_is_the_single_dns_san(tmp_path):
    certs = CertSet(tmp_path)
    cfg = load_config(
        {"GUARDIAN_VOLTRON_URL": "10.0.0.1:9449", "GUARDIAN_CERT_PATH": certs.files["cert_path"]}
    )
    assert tunnel_client_tls(cfg).server_name == "voltron.test"
    public = load_config(
        {
            "GUARDIAN_VOLTRON_URL": "mgmt.example.com:9449",
            "GUARDIAN_CERT_PATH": certs.files["cert_path"],
            "GUARDIAN_VOLTRON_CA_TYPE": "Public",
        }
    )
    assert tunnel_client_tls(public).server_name == "mgmt.example.com"


@pytest.mark.parametrize("dns", [(), ("a.test", "b.test")])
def test_not_exactly_one_dns_name_is_refused(dns):
    pem = make_cert("voltron", dns=dns).cert
    with pytest.raises(TLSConfigError, match=f"expected a single DNS name .* found {len(dns)}"):
        single_dns_name(pem, "x.crt")


def test_missing_files_are_named(tmp_path):
    cfg = load_config({"GUARDIAN_VOLTRON_URL": "v:1", "GUARDIAN_CERT_PATH": str(tmp_path)})
    with pytest.raises(TLSConfigError, match=r"managed-cluster\.crt: no such file"):
        tunnel_client_tls(cfg)
