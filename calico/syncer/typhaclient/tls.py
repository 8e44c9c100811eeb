"""mTLS between Typha and its clients: contexts and the CN / URI SAN peer check.

Both sides verify the peer's chain against their CA file; neither checks host names. The peer's
leaf must then carry the required CN or one of its URI SANs must equal the required URI SAN —
either match is enough when both are configured (upstream's rule). TLS 1.2 is the minimum
(``TLS_MIN_VERSION=1.3`` raises it). TLS is all-or-nothing: some but not all settings is a
configuration error (``check_settings``).
"""

from __future__ import annotations

import os
import ssl
from typing import Any


class TLSConfigError(ValueError):
    pass


def check_settings(
    key_file: str, cert_file: str, ca_file: str, cn: str, uri_san: str, who: str
) -> bool:
    """True when TLS is configured, False when entirely unset; TLSConfigError for a partial
    configuration (``who`` names the parameters in the message)."""
    if not any((key_file, cert_file, ca_file, cn, uri_san)):
        return False
    if not (key_file and cert_file and ca_file):
        raise TLSConfigError(f"{who}: TLS needs the key file, the certificate file and the CA file")
    if not (cn or uri_san):
        raise TLSConfigError(f"{who}: TLS needs a required peer CN or URI SAN")
    return True


def _min_version() -> ssl.TLSVersion:
    wanted = os.environ.get("TLS_MIN_VERSION", "1.2").strip()
    return ssl.TLSVersion.TLSv1_3 if wanted == "1.3" else ssl.TLSVersion.TLSv1_2


def server_context(key_file: str, cert_file: str, ca_file: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _min_version()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(cert_file, key_file)
    ctx.load_verify_locations(ca_file)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(key_file: str, cert_file: str, ca_file: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = _min_version()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False  # the CN / URI SAN check below replaces it, as upstream
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_cert_chain(cert_file, key_file)
    ctx.load_verify_locations(ca_file)
    return ctx


def peer_identity_error(peercert: dict[str, Any] | None, cn: str, uri_san: str) -> str | None:
    """None when the (already chain-verified) peer certificate has the required identity,
    else upstream's error text."""
    if not peercert:
        return "peer did not present a certificate"
    cns = [v for rdn in peercert.get("subject", ()) for (k, v) in rdn if k == "commonName"]
    uris = [v for (k, v) in peercert.get("subjectAltName", ()) if k == "URI"]
    if cn and cn in cns:
        return None
    if uri_san and uri_san in uris:
        return None
    if cn and uri_san:
        return "peer certificate does not have required CN or URI SAN"
    if cn:
        return "peer certificate does not have required CN"
    return "peer certificate does not have required URI SAN"
