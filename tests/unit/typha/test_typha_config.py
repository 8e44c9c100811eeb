"""Typha's parameters (env > file > default, none, invalid values), datastore settings, and
the TLS all-or-nothing rule and peer identity check."""

from __future__ import annotations

from pathlib import Path

import pytest

from calico.syncer.typhaclient import tls
from calico.typha import config as cfg
from calico.typha.daemon import server_config


def test_defaults_are_upstreams(tmp_path: Path) -> None:
    c = cfg.load(str(tmp_path / "missing.cfg"), env={})
    assert c.errors == []
    assert (c.listen_port, c.health_host, c.health_port, c.prometheus_metrics_port) == (
        5473,
        "localhost",
        9098,
        9093,
    )
    assert c.health_enabled is False and c.prometheus_metrics_enabled is False
    assert (c.server_ping_interval_secs, c.server_pong_timeout_secs) == (10.0, 60.0)
    assert (c.server_handshake_timeout_secs, c.server_write_timeout_secs) == (10.0, 120.0)
    assert (c.server_max_fall_behind_secs, c.server_new_client_fall_behind_grace_period) == (
        300.0,
        300.0,
    )
    assert (c.max_connections_upper_limit, c.connection_drop_interval_secs) == (10000, 1.0)
    assert (c.snapshot_cache_max_batch_size, c.server_max_message_size) == (100, 100)
    assert c.shutdown_timeout_secs == 300.0


def test_env_beats_file_beats_default_and_sections_merge(tmp_path: Path) -> None:
    f = tmp_path / "typha.cfg"
    f.write_text("[global]\nHealthPort = 9100\nServerPort = 1234\n[other]\nhealthenabled=true\n")
    c = cfg.load(str(f), env={"TYPHA_SERVERPORT": "2345", "TYPHA_HEALTHHOST": ""})
    assert (c.health_port, c.listen_port, c.health_enabled, c.health_host) == (
        9100,
        2345,
        True,
        "localhost",  # empty values are ignored
    )
    assert cfg.load(str(f), env={"typha_serverport": "-1"}).listen_port == 0  # random port


def test_none_invalid_and_die_on_fail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = str(tmp_path / "none.cfg")
    c = cfg.load(missing, env={"TYPHA_HEALTHHOST": "none", "TYPHA_HEALTHPORT": "99999"})
    assert c.health_host == "" and c.health_port == 9098 and c.errors == []
    assert "invalid HealthPort='99999' from TYPHA_* environment" in caplog.text
    c = cfg.load(missing, env={"TYPHA_MAXCONNECTIONSUPPERLIMIT": "none"})
    assert c.errors == ["MaxConnectionsUpperLimit: 'none' is not allowed"]
    c = cfg.load(missing, env={"TYPHA_DATASTORETYPE": "zookeeper"})
    assert len(c.errors) == 1 and "invalid DatastoreType='zookeeper'" in c.errors[0]


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cfg"
    bad.write_text("no section header\n")
    with pytest.raises(cfg.TyphaConfigError, match="cannot read Typha config file"):
        cfg.load(str(bad), env={})


def test_datastore_settings_layer_typha_params_over_the_shared_env(tmp_path: Path) -> None:
    missing = str(tmp_path / "x.cfg")
    env = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://10.0.0.1:2379"}
    ds = cfg.datastore_settings(cfg.load(missing, env=env), env)
    assert (ds.datastore_type, ds.etcd_endpoints) == ("etcdv3", ("http://10.0.0.1:2379",))
    env2 = {**env, "TYPHA_ETCDADDR": "10.0.0.2:2379", "TYPHA_ETCDSCHEME": "https"}
    ds = cfg.datastore_settings(cfg.load(missing, env=env2), env2)
    assert ds.etcd_endpoints == ("https://10.0.0.2:2379",)
    env3 = {"TYPHA_DATASTORETYPE": "local", "TYPHA_CALICODATASTOREPATH": "/tmp/x.db"}
    ds = cfg.datastore_settings(cfg.load(missing, env=env3), env3)
    assert (ds.datastore_type, ds.local_path) == ("local", "/tmp/x.db")


def test_tls_is_all_or_nothing() -> None:
    assert tls.check_settings("", "", "", "", "", "x") is False
    assert tls.check_settings("k", "c", "ca", "", "spiffe://a", "x") is True
    with pytest.raises(tls.TLSConfigError, match="x: TLS needs the key file"):
        tls.check_settings("k", "", "ca", "cn", "", "x")
    with pytest.raises(tls.TLSConfigError, match="needs a required peer CN or URI SAN"):
        tls.check_settings("k", "c", "ca", "", "", "x")


def test_server_config_refuses_partial_tls(tmp_path: Path) -> None:
    c = cfg.load(str(tmp_path / "x.cfg"), env={"TYPHA_CLIENTCN": "felix"})
    with pytest.raises(tls.TLSConfigError, match="ServerKeyFile"):
        server_config(c)


CERT = {
    "subject": ((("commonName", "typha-client"),),),
    "subjectAltName": (("DNS", "x"), ("URI", "spiffe://cluster/felix")),
}


@pytest.mark.parametrize(
    ("cn", "uri", "error"),
    [
        ("typha-client", "", None),
        ("", "spiffe://cluster/felix", None),
        ("wrong", "spiffe://cluster/felix", None),  # either match is enough
        ("typha-client", "spiffe://other", None),
        ("wrong", "", "peer certificate does not have required CN"),
        ("", "spiffe://other", "peer certificate does not have required URI SAN"),
        ("wrong", "spiffe://other", "peer certificate does not have required CN or URI SAN"),
    ],
)
def test_peer_identity(cn: str, uri: str, error: str | None) -> None:
    assert tls.peer_identity_error(CERT, cn, uri) == error


def test_no_peer_certificate() -> None:
    assert tls.peer_identity_error({}, "cn", "") == "peer did not present a certificate"


def test_component_client_settings_from_prefixed_env(caplog: pytest.LogCaptureFixture) -> None:
    from calico.syncer.typhaclient.env import settings_from_env

    assert settings_from_env("CONFD_", "bgp", env={}) is None
    assert settings_from_env("CONFD_", "bgp", env={"CONFD_TYPHAK8SSERVICENAME": "t"}) is None
    assert "CONFD_TYPHAK8SSERVICENAME ignored" in caplog.text
    s = settings_from_env(
        "CONFD_",
        "bgp",
        "node1",
        env={"CONFD_TYPHAADDR": "10.0.0.1:5473", "CONFD_TYPHAREADTIMEOUT": "2.5"},
    )
    assert s is not None
    assert (s.addr, s.syncer_type, s.hostname, s.read_timeout, s.write_timeout) == (
        "10.0.0.1:5473",
        "bgp",
        "node1",
        2.5,
        10.0,
    )
    with pytest.raises(ValueError, match="CONFD_TYPHAWRITETIMEOUT='x' is not a number"):
        settings_from_env(
            "CONFD_", "bgp", env={"CONFD_TYPHAADDR": "a:1", "CONFD_TYPHAWRITETIMEOUT": "x"}
        )
    with pytest.raises(ValueError, match="is not host:port"):
        settings_from_env("CONFD_", "bgp", env={"CONFD_TYPHAADDR": "nohost"})
    with pytest.raises(tls.TLSConfigError):
        settings_from_env("CONFD_", "bgp", env={"CONFD_TYPHAADDR": "a:1", "CONFD_TYPHACN": "x"})


def test_bad_datastore_parameter_names_itself_and_its_layer(tmp_path: Path) -> None:
    from calico.datastore.errors import DatastoreConfigError

    env = {"TYPHA_ETCDADDR": "not-an-authority"}
    with pytest.raises(
        DatastoreConfigError, match=r"invalid EtcdAddr 'not-an-authority' \(TYPHA_\* environment\)"
    ):
        cfg.datastore_settings(cfg.load(str(tmp_path / "x.cfg"), env=env), env)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TYPHA_CLIENTCN": "x"}, "TLS needs the key file"),
        ({"TYPHA_DATASTORETYPE": "zookeeper"}, "invalid DatastoreType='zookeeper'"),
        ({"TYPHA_ETCDADDR": "nope"}, "invalid EtcdAddr 'nope'"),
        ({"TYPHA_LOGSEVERITYSCREEN": "loud"}, 'invalid log level "loud"'),
    ],
)
def test_typha_command_refuses_bad_config_without_a_traceback(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    from click.testing import CliRunner

    from calico.typha.daemon import typha_command

    result = CliRunner().invoke(typha_command, ["-c", str(tmp_path / "none.cfg")], env=env)
    assert result.exit_code == 1
    assert "Error: invalid Typha configuration: " in result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_several_prefixes_first_with_a_value_wins_per_field() -> None:
    from calico.syncer.typhaclient.env import settings_from_env

    prefixes = ("CONFD_", "FELIX_", "CALICO_")
    env = {
        "CONFD_TYPHAADDR": "none",  # "none" counts as unset, as upstream
        "FELIX_TYPHAADDR": "10.0.0.2:5473",
        "CALICO_TYPHAADDR": "10.0.0.3:5473",
        "CALICO_TYPHAREADTIMEOUT": "7",
        "CONFD_TYPHAWRITETIMEOUT": "3",
        "FELIX_TYPHAWRITETIMEOUT": "4",
    }
    s = settings_from_env(prefixes, "bgp", "n", env=env)
    assert s is not None
    assert (s.addr, s.read_timeout, s.write_timeout, s.info) == ("10.0.0.2:5473", 7.0, 3.0, "confd")
    assert settings_from_env(prefixes, "bgp", env={"CALICO_TYPHAADDR": "none"}) is None
    with pytest.raises(ValueError, match="CALICO_TYPHAREADTIMEOUT must be positive"):
        settings_from_env(prefixes, "bgp", env={**env, "CALICO_TYPHAREADTIMEOUT": "0"})
