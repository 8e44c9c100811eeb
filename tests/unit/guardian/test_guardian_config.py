"""Guardian's env config, proxy selection and the management certificate's server name."""

from __future__ import annotations

import pytest

from calico.guardian.config import ConfigError, load_config
from calico.guardian.proxyenv import proxy_for
from calico.guardian.targets import make_target, match


def test_defaults_match_upstream():
    cfg = load_config({"GUARDIAN_VOLTRON_URL": "voltron.example:9449"})
    assert cfg.log_level == "INFO" and cfg.cert_path == "/certs"
    assert cfg.voltron_ca_type == "Tigera" and not cfg.public_ca
    assert (cfg.health_enabled, cfg.health_port) == (True, 8080)
    assert (cfg.keep_alive_enable, cfg.keep_alive_interval) == (True, 0.1)
    assert cfg.k8s_endpoint == "https://kubernetes.default"
    assert cfg.tunnel_dial_retry_attempts == -1
    assert (cfg.tunnel_dial_retry_interval, cfg.tunnel_dial_timeout) == (5.0, 10.0)
    assert cfg.tunnel_dial_recreate_on_tunnel_close is True
    assert (cfg.connection_retry_attempts, cfg.connection_retry_interval) == (25, 5.0)
    assert cfg.goldmane_endpoint == "https://goldmane.calico-system:7443"
    assert cfg.ca_file == "/etc/pki/tls/cert.pem"
    assert (cfg.listen, cfg.listen_host, cfg.listen_port) == (True, "", 8080)
    assert cfg.voltron_host_port == ("voltron.example", 9449)


def test_only_the_tagged_fields_are_read_unprefixed():
    env = {
        "GUARDIAN_VOLTRON_URL": "v:1",
        "HEALTH_PORT": "9000",
        "LISTEN_PORT": "7000",
        "HEALTH_ENABLED": "false",
    }
    cfg = load_config(env)
    assert (cfg.health_port, cfg.health_enabled, cfg.listen_port) == (9000, False, 8080)
    cfg = load_config({**env, "GUARDIAN_HEALTH_PORT": "9100"})
    assert cfg.health_port == 9100


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "required key GUARDIAN_VOLTRON_URL missing value"),
        ({"GUARDIAN_VOLTRON_URL": ""}, "required key GUARDIAN_VOLTRON_URL missing value"),
        ({"GUARDIAN_VOLTRON_URL": "noport"}, "expected host:port"),
        ({"GUARDIAN_VOLTRON_URL": "https://v:9449"}, "expected host:port without a scheme"),
        ({"GUARDIAN_VOLTRON_URL": "::1:9449"}, "too many colons"),
        ({"GUARDIAN_VOLTRON_URL": "h:99999"}, "port 99999 out of range"),
        (
            {"GUARDIAN_VOLTRON_URL": "h:1", "GUARDIAN_LISTEN": "yes"},
            "GUARDIAN_LISTEN: invalid boolean 'yes'",
        ),
        (
            {"GUARDIAN_VOLTRON_URL": "h:1", "GUARDIAN_TUNNEL_DIAL_TIMEOUT": "10"},
            'GUARDIAN_TUNNEL_DIAL_TIMEOUT: missing unit in duration "10"',
        ),
        (
            {"GUARDIAN_VOLTRON_URL": "h:1", "GUARDIAN_KEEP_ALIVE_INTERVAL": "1s"},
            "GUARDIAN_KEEP_ALIVE_INTERVAL: invalid integer '1s'",
        ),
    ],
)
def test_bad_values_name_the_variable(env, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config(env)


def test_go_bool_and_duration_spellings():
    cfg = load_config(
        {
            "GUARDIAN_VOLTRON_URL": "[::1]:9449",
            "GUARDIAN_LISTEN": "F",
            "GUARDIAN_TUNNEL_DIAL_RETRY_INTERVAL": "1m30s",
        }
    )
    assert cfg.voltron_host_port == ("::1", 9449)
    assert cfg.listen is False and cfg.tunnel_dial_retry_interval == 90.0


def test_proxy_selection_follows_go_httpproxy():
    env = {"HTTPS_PROXY": "http://u:p%40ss@proxy:3128"}
    p = proxy_for("voltron.example", 9449, env)
    assert (p.scheme, p.host, p.port, p.username, p.password) == (
        "http",
        "proxy",
        3128,
        "u",
        "p@ss",
    )
    assert p.redacted() == "http://u:xxxxx@proxy:3128"
    assert proxy_for("voltron.example", 1, {"https_proxy": "proxy"}).port == 80
    assert proxy_for("voltron.example", 1, {"HTTPS_PROXY": "https://proxy"}).port == 443
    assert proxy_for("voltron.example", 1, {}) is None
    # Loopback and localhost never use a proxy.
    assert proxy_for("127.0.0.1", 1, env) is None
    assert proxy_for("localhost", 1, env) is None
    for no_proxy, host, bypass in [
        ("*", "voltron.example", True),
        ("example", "voltron.example", True),
        ("voltron.example", "voltron.example", True),
        (".voltron.example", "voltron.example", False),
        ("*.example", "voltron.example", True),
        ("other.example", "voltron.example", False),
        ("ample", "voltron.example", False),
        ("10.0.0.0/8", "10.1.2.3", True),
        ("10.1.2.3", "10.1.2.3", True),
        ("voltron.example:9449", "voltron.example", True),
        ("voltron.example:1", "voltron.example", False),
    ]:
        got = proxy_for(host, 9449, {**env, "NO_PROXY": no_proxy}) is None
        assert got is bypass, (no_proxy, host)
    with pytest.raises(ConfigError, match=r"invalid scheme \(socks5\)"):
        proxy_for("voltron.example", 1, {"HTTPS_PROXY": "socks5://proxy:1080"})


def test_target_matching_is_servemux_like():
    import ssl

    ctx = ssl.create_default_context()
    ts = [
        make_target("/api/", "https://k8s", ctx),
        make_target("/apis/", "https://k8s", ctx),
        make_target("/goldmane.Statistics/List", "https://gm:7443", ctx),
    ]
    assert match(ts, "/api/v1/pods?watch=1").path == "/api/"
    assert match(ts, "/apis/x").path == "/apis/"
    assert match(ts, "/api") is None
    assert match(ts, "/goldmane.Statistics/List").port == 7443
    assert match(ts, "/goldmane.Statistics/ListMore") is None
    with pytest.raises(ConfigError, match="must be an https:// URL"):
        make_target("/x/", "http://plain", ctx)
