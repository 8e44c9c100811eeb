"""Resolution: precedence and source tracking, none, local-only, invalid fallback, restarts."""

from __future__ import annotations

import logging

import pytest

from calico.felix.config import (
    HOT_RELOADABLE,
    LOCAL_ONLY,
    PARAMS,
    Source,
    datastore_sources,
    diff,
    needs_restart,
    resolve,
)
from calico.felix.config.netparsers import ProtoPort

ALL_SOURCES = [
    Source.DATASTORE_GLOBAL,
    Source.DATASTORE_SELECTOR,
    Source.DATASTORE_PER_HOST,
    Source.CONFIG_FILE,
    Source.ENVIRONMENT,
    Source.INTERNAL_OVERRIDE,
]


def res(**by_source: dict[str, str]):
    return resolve({Source[k.upper()]: v for k, v in by_source.items()}, hostname="node-1")


def test_defaults() -> None:
    c = resolve({}, hostname="Node-1".lower())
    assert c.datastore_type == "local"
    assert c.felix_hostname == "node-1"
    assert c.health_enabled is False
    assert (c.health_host, c.health_port) == ("localhost", 9099)
    assert c.prometheus_metrics_enabled is False
    assert c.prometheus_metrics_port == 9091
    assert c.reporting_interval_secs == 30.0
    assert c.reporting_ttl_secs == 90.0
    assert c.endpoint_status_path_prefix == "/var/run/calico"
    assert c.default_endpoint_to_host_action == "DROP"
    assert c.failsafe_inbound_host_ports[:2] == (ProtoPort("tcp", 22), ProtoPort("udp", 68))
    assert c.text("FailsafeOutboundHostPorts") == (
        "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
    )
    assert c.nftables_refresh_interval == 180.0
    assert c.nftables_mark_mask == c.iptables_mark_mask == 0xFFFF0000
    assert c.route_refresh_interval == 90.0
    assert c.device_route_protocol == 3
    assert c.remove_external_routes is True
    assert c.interface_prefix == "cali"
    assert c.log_prefix == "calico-packet"
    assert c.ip_in_ip_enabled is None and c.vxlan_enabled is None
    assert (c.vxlan_port, c.vxlan_vni) == (4789, 4096)
    assert (c.metadata_addr, c.metadata_port) == ("127.0.0.1", 8775)
    assert c.cluster_guid == "baddecaf"
    assert c.calico_datastore_path == "/var/lib/calico/calico.db"
    assert c.log_severity_screen == "INFO"
    assert c.errors == []
    assert all(c.source(name) is Source.DEFAULT for name in PARAMS)


def test_detected_hostname_is_lowercase(monkeypatch) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "MyHost")
    assert resolve({}).felix_hostname == "myhost"


def test_access_forms() -> None:
    c = res(environment={"healthport": "1234"})
    assert c.health_port == c.HealthPort == c["HealthPort"] == c["HEALTHPORT"] == 1234
    assert c.vxlan_mtu == c["VXLANMTU"] == 0
    assert "ipInIpMtu" in c and "nope" not in c
    with pytest.raises(AttributeError):
        _ = c.no_such_param
    with pytest.raises(KeyError):
        _ = c["NoSuchParam"]


@pytest.mark.parametrize("top", range(len(ALL_SOURCES)))
def test_precedence_each_level(top: int) -> None:
    """With a value at every level up to ``top``, the highest one wins and is tracked."""
    sources = {s: {"LogPrefix": f"from-{s.name}"} for s in ALL_SOURCES[: top + 1]}
    c = resolve(sources, hostname="h")
    winner = ALL_SOURCES[top]
    assert c.log_prefix == f"from-{winner.name}"
    assert c.source("LogPrefix") is winner
    assert c.raw("LogPrefix") == f"from-{winner.name}"


def test_precedence_per_parameter() -> None:
    c = res(
        datastore_global={"HealthPort": "1001", "LogPrefix": "g", "IpInIpMtu": "1400"},
        datastore_selector={"HealthPort": "1002", "LogPrefix": "s"},
        datastore_per_host={"HealthPort": "1003"},
        config_file={"HealthHost": "0.0.0.0"},
        environment={"healthhost": "127.0.0.1"},
    )
    assert (c.health_port, c.source("HealthPort")) == (1003, Source.DATASTORE_PER_HOST)
    assert (c.log_prefix, c.source("LogPrefix")) == ("s", Source.DATASTORE_SELECTOR)
    assert (c.ip_in_ip_mtu, c.source("IpInIpMtu")) == (1400, Source.DATASTORE_GLOBAL)
    assert (c.health_host, c.source("HealthHost")) == ("127.0.0.1", Source.ENVIRONMENT)
    assert c.source("HealthEnabled") is Source.DEFAULT and c.raw("HealthEnabled") is None


def test_empty_values_are_ignored() -> None:
    c = res(environment={"logprefix": ""}, config_file={"LogPrefix": "file"})
    assert (c.log_prefix, c.source("LogPrefix")) == ("file", Source.CONFIG_FILE)


def test_none_selects_zero_value() -> None:
    c = res(
        config_file={"MetadataAddr": "None", "MetadataPort": "none", "LogFilePath": "none"},
        environment={"logseverityscreen": "NONE", "failsafeinboundhostports": "none"},
        datastore_global={"EndpointStatusPathPrefix": "none", "IpInIpEnabled": "none"},
    )
    assert (c.metadata_addr, c.metadata_port, c.log_file_path) == ("", 0, "")
    assert c.log_severity_screen == ""
    assert c.failsafe_inbound_host_ports == ()
    assert c.endpoint_status_path_prefix == ""
    assert c.ip_in_ip_enabled is None
    assert c.source("MetadataAddr") is Source.CONFIG_FILE
    assert c.errors == []


def test_none_refused_for_non_zero_param(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        c = res(environment={"interfaceprefix": "none"}, config_file={"InterfacePrefix": "tap"})
    assert c.interface_prefix == "cali"
    assert c.source("InterfacePrefix") is Source.DEFAULT
    assert any("InterfacePrefix" in e and "none" in e for e in c.errors)
    assert "InterfacePrefix" in caplog.text


def test_invalid_value_falls_back_to_default_with_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="calico.felix.config"):
        c = res(
            environment={"healthport": "99999"},
            datastore_global={"HealthPort": "1234"},
        )
    assert c.health_port == 9099
    assert c.source("HealthPort") is Source.DEFAULT
    assert c.invalid["HealthPort"] == (Source.ENVIRONMENT, "99999", "value must be at most 65535")
    record = next(r for r in caplog.records if "HealthPort" in r.getMessage())
    assert record.levelno == logging.WARNING
    msg = record.getMessage()
    assert "environment variable" in msg and "99999" in msg and "at most 65535" in msg
    assert c.errors == []  # HealthPort is not die-on-fail


def test_invalid_die_on_fail_value_is_an_error() -> None:
    c = res(datastore_global={"DefaultEndpointToHostAction": "ALLOW"})
    assert c.default_endpoint_to_host_action == "DROP"
    assert c.errors and "DefaultEndpointToHostAction" in c.errors[0]


def test_invalid_lower_source_does_not_matter() -> None:
    c = res(environment={"healthport": "1"}, datastore_global={"HealthPort": "junk"})
    assert c.health_port == 1 and not c.invalid


@pytest.mark.parametrize("name", sorted(LOCAL_ONLY))
def test_local_only_ignored_from_datastore(name: str, caplog) -> None:
    sources = {s: {name: "x:1"} for s in (Source.DATASTORE_GLOBAL, Source.DATASTORE_PER_HOST)}
    with caplog.at_level(logging.WARNING):
        c = resolve(sources, hostname="h")
    assert c.source(name) is Source.DEFAULT
    assert f"local-only configuration {name}" in caplog.text


def test_local_only_list_covers_upstream() -> None:
    assert {"DatastoreType", "FelixHostname", "EtcdEndpoints", "EtcdAddr", "EtcdScheme",
            "EtcdKeyFile", "EtcdCertFile", "EtcdCaFile", "TyphaAddr",
            "CalicoDatastorePath"} <= LOCAL_ONLY  # fmt: skip
    assert "HealthPort" not in LOCAL_ONLY


def test_local_only_from_local_sources() -> None:
    c = res(
        datastore_per_host={"DatastoreType": "kubernetes", "FelixHostname": "evil"},
        config_file={"DatastoreType": "etcdv3"},
        environment={"felixhostname": "node-a"},
    )
    assert (c.datastore_type, c.source("DatastoreType")) == ("etcdv3", Source.CONFIG_FILE)
    assert (c.felix_hostname, c.source("FelixHostname")) == ("node-a", Source.ENVIRONMENT)


def test_unknown_params_kept_raw() -> None:
    c = res(environment={"somethingnew": "1"}, config_file={"SomethingNew": "2", "Other": "x"})
    assert c.unknown == {"somethingnew": "1", "Other": "x"}


def test_datastore_type_values() -> None:
    for value in ("local", "ETCDV3", "Kubernetes"):
        assert res(environment={"datastoretype": value}).datastore_type == value.lower()
    c = res(environment={"datastoretype": "consul"})
    assert c.datastore_type == "local" and c.errors


def test_cross_field_validation() -> None:
    c = res(environment={"datastoretype": "etcdv3", "etcdaddr": "none"})
    assert "both EtcdEndpoints and EtcdAddr are missing" in c.errors
    c = res(environment={"typhacn": "typha"})
    assert any("Typha TLS" in e for e in c.errors)
    assert resolve({}, hostname="").errors == ["failed to determine hostname"]


def test_with_datastore_keeps_local_sources() -> None:
    c = res(environment={"logprefix": "env"})
    c2 = c.with_datastore({"HealthPort": "1"}, {"HealthPort": "2"}, {"LogPrefix": "host"})
    assert (c2.health_port, c2.source("HealthPort")) == (2, Source.DATASTORE_SELECTOR)
    assert c2.log_prefix == "env"
    assert c2.felix_hostname == "node-1"
    assert c2.inputs[Source.ENVIRONMENT] == {"logprefix": "env"}
    assert set(datastore_sources({}, {}, {})) == {
        Source.DATASTORE_GLOBAL,
        Source.DATASTORE_SELECTOR,
        Source.DATASTORE_PER_HOST,
    }


def test_source_names() -> None:
    assert str(Source.DEFAULT) == "<default>"
    assert str(Source.ENVIRONMENT) == "environment variable"
    assert Source.CONFIG_FILE.local and not Source.DATASTORE_PER_HOST.local


def test_hot_reloadable_set_is_upstreams() -> None:
    expected = {"CalicoVersion", "ClusterGUID", "ClusterType", "HealthTimeoutOverrides"}
    assert expected == HOT_RELOADABLE


def test_diff_and_restart() -> None:
    base = res(datastore_global={"ClusterGUID": "abc", "LogSeverityScreen": "Info"})
    same = base.with_datastore({"ClusterGUID": "abc", "LogSeverityScreen": "INFO"}, {}, {})
    assert diff(base, same) == set() and not needs_restart(base, same)

    hot = base.with_datastore(
        {"ClusterGUID": "def", "CalicoVersion": "v3.31", "HealthTimeoutOverrides": "A=5s"}, {}, {}
    )
    assert diff(base, hot) == {"ClusterGUID", "CalicoVersion", "HealthTimeoutOverrides"}
    assert not needs_restart(base, hot)

    cold = base.with_datastore({"ClusterGUID": "abc", "LogSeverityScreen": "debug"}, {}, {})
    assert diff(base, cold) == {"LogSeverityScreen"}
    assert needs_restart(base, cold)


def test_source_change_without_value_change_is_not_a_restart() -> None:
    a = res(datastore_global={"HealthPort": "1234"})
    b = res(environment={"healthport": "1234"})
    assert diff(a, b) == set()


def test_unknown_param_change_is_not_a_restart() -> None:
    a = res(datastore_global={"Whatever": "1"})
    b = res(datastore_global={"Whatever": "2"})
    assert not needs_restart(a, b)


def test_regex_and_list_values_compare_by_content() -> None:
    a = res(datastore_global={"InterfaceExclude": "kube-ipvs0,/^veth/", "MTUIfacePattern": "^e"})
    b = res(datastore_per_host={"InterfaceExclude": "kube-ipvs0,/^veth/", "MTUIfacePattern": "^e"})
    assert diff(a, b) == set()
