"""The TLS contexts: the tunnel's client side, the server side of tunnelled streams, targets.

Tunnel: present ``<CertPath>/managed-cluster.crt/.key``; trust only
``<CertPath>/management-cluster.crt`` and expect its single DNS SAN as the server name, unless
``VOLTRON_CA_TYPE`` is ``Public`` (system roots, server name = the URL's host). Streams the
management side opens are served with the same tunnel certificate, ALPN ``h2``. Targets trust
the system roots plus their CA file and speak only HTTP/2.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtensionOID

from calico.guardian.config import GuardianConfig


class TLSConfigError(ValueError):
    """A certificate or key that cannot be used; the message names the file."""


@dataclass(frozen=True)
class TunnelTLS:
    context: ssl.SSLContext
    server_name: str


def _base(purpose: ssl.Purpose) -> ssl.SSLContext:
    proto = (
        ssl.PROTOCOL_TLS_CLIENT if purpose is ssl.Purpose.SERVER_AUTH else ssl.PROTOCOL_TLS_SERVER
    )
    ctx = ssl.SSLContext(proto)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _load_pair(ctx: ssl.SSLContext, cert: str, key: str, what: str) -> None:
    for path in (cert, key):
        if not Path(path).is_file():
            raise TLSConfigError(f"failed to load {what} from path {path}: no such file")
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise TLSConfigError(
            f"failed to create X509 key pair from {cert} and {key}: {exc}"
        ) from exc


def single_dns_name(pem: bytes, path: str) -> str:
    """The one DNS SAN the management certificate must carry (upstream insists on one)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise TLSConfigError(f"cannot decode pem block for server certificate {path}") from exc
    try:
        san = cert.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
        names = san.value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    if len(names) != 1:
        raise TLSConfigError(
            f"expected a single DNS name registered on the certificate {path}, found {len(names)}"
        )
    return names[0]


def tunnel_client_tls(cfg: GuardianConfig) -> TunnelTLS:
    ctx = _base(ssl.Purpose.SERVER_AUTH)
    base = Path(cfg.cert_path)
    _load_pair(
        ctx, str(base / "managed-cluster.crt"), str(base / "managed-cluster.key"), "tunnel cert"
    )
    if cfg.public_ca:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return TunnelTLS(ctx, cfg.voltron_host_port[0])
    ca_path = base / "management-cluster.crt"
    try:
        pem = ca_path.read_bytes()
    except OSError as exc:
        raise TLSConfigError(f"failed to read server cert from path {ca_path}: {exc}") from exc
    server_name = single_dns_name(pem, str(ca_path))
    try:
        ctx.load_verify_locations(cadata=pem.decode("ascii", "replace"))
    except ssl.SSLError as exc:
        raise TLSConfigError(
            f"failed to append the server cert {ca_path} to the pool: {exc}"
        ) from exc
    return TunnelTLS(ctx, server_name)


def stream_server_tls(cfg: GuardianConfig) -> ssl.SSLContext:
    ctx = _base(ssl.Purpose.CLIENT_AUTH)
    base = Path(cfg.cert_path)
    _load_pair(
        ctx, str(base / "managed-cluster.crt"), str(base / "managed-cluster.key"), "tunnel cert"
    )
    ctx.set_alpn_protocols(["h2"])
    return ctx


def target_client_tls(ca_file: str, client_cert: str = "", client_key: str = "") -> ssl.SSLContext:
    """System roots plus ``ca_file``; a client certificate when both halves are given."""
    if not ca_file:
        raise TLSConfigError("ca bundle was empty")
    ctx = _base(ssl.Purpose.SERVER_AUTH)
    ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    try:
        ctx.load_verify_locations(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise TLSConfigError(f"could not read cert from file {ca_file}: {exc}") from exc
    if client_cert and client_key:
        _load_pair(ctx, client_cert, client_key, "client cert")
    ctx.set_alpn_protocols(["h2"])
    return ctx
