"""whisker-backend's env config: upstream's defaults and the loopback-only rule for plain HTTP."""

from __future__ import annotations

import pytest

from calico.whisker.config import ConfigError, load_config

TLS = {"SERVER_TLS_CERT_PATH": "/c.crt", "SERVER_TLS_KEY_PATH": "/c.key"}


def test_defaults_are_upstreams() -> None:
    cfg = load_config({})
    assert (cfg.goldmane_host, cfg.host, cfg.port, cfg.log_level) == (
        "goldmane.calico-system.svc:7443",
        "",
        8080,
        "info",
    )
    assert cfg.ca_cert_path == "/etc/pki/tls/certs/ca.crt"
    assert not cfg.server_tls and not cfg.goldmane_tls
    assert cfg.bind_host == "127.0.0.1"  # plain HTTP: loopback only


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_hosts_may_serve_plain_http(host: str) -> None:
    assert load_config({"HOST": host}).bind_host == host


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "example.com"])
def test_other_hosts_need_tls(host: str) -> None:
    with pytest.raises(ConfigError, match=f"^HOST: {host} is not a loopback address"):
        load_config({"HOST": host})
    cfg = load_config({"HOST": host, **TLS})
    assert cfg.server_tls and cfg.bind_host == host
    assert load_config(TLS).bind_host == ""  # TLS and no HOST: every address


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PORT": "65536"}, "PORT: port 65536 out of range 0-65535"),
        ({"PORT": "-1"}, "PORT: port -1 out of range"),
        ({"PORT": "8o"}, "PORT: invalid integer '8o'"),
        ({"GOLDMANE_HOST": ""}, "GOLDMANE_HOST: must be host:port"),
        ({"SERVER_TLS_KEY_PATH": "/k"}, "SERVER_TLS_CERT_PATH and SERVER_TLS_KEY_PATH"),
        ({"TLS_CERT_PATH": "/c"}, "TLS_CERT_PATH and TLS_KEY_PATH must be set together"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(env)


def test_port_boundaries() -> None:
    assert load_config({"PORT": "0"}).port == 0
    assert load_config({"PORT": "65535"}).port == 65535
    assert load_config({"TLS_CERT_PATH": "/c", "TLS_KEY_PATH": "/k"}).goldmane_tls
