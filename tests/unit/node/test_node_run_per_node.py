"""Several ``calico node run`` on one machine: every per-node file under the state dir, and the
node's flags (not the caller's stray variables) choosing datastore and paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from calico.cni import install as inst
from calico.datastore.config import DatastoreConfig
from calico.node.run import environ, provision, service_dir
from calico.node.run.cli import node_group
from calico.node.run.layout import Layout, NodeSettings, layout_for

STRAY = {
    "CALICO_DATASTORE_TYPE": "etcdv3",
    "DATASTORE_TYPE": "etcdv3",
    "CALICO_ETCD_ENDPOINTS": "http://192.0.2.1:2379",
    "FELIX_ETCDENDPOINTS": "http://192.0.2.1:2379",
    "felix_datastoretype": "etcdv3",
    "CALICO_CNI_DAEMON_SOCKET": "/run/other-node.sock",
    "CALICO_NETWORKING_BACKEND": "bird",
    "FELIX_ENDPOINTSTATUSPATHPREFIX": "/var/run/calico",
    "CALICO_IPV4POOL_CIDR": "10.10.0.0/16",
    "FELIX_LOGSEVERITYSCREEN": "Debug",
    "PATH": "/usr/bin:/bin",
}
# The Kubernetes client settings confd's Secret client reads (as calico-node's pod env).
KUBE_CLIENT = {
    "KUBECONFIG": "/etc/calico/kubeconfig",
    "CALICO_KUBECONFIG": "/etc/calico/kubeconfig",
    "K8S_API_ENDPOINT": "https://192.0.2.9:6443",
    "K8S_API_TOKEN": "t0ken",
    "K8S_CA_FILE": "/etc/ca.pem",
    "K8S_CERT_FILE": "/etc/c.pem",
    "K8S_KEY_FILE": "/etc/k.pem",
    "K8S_CURRENT_CONTEXT": "ctx",
    "K8S_INSECURE_SKIP_TLS_VERIFY": "false",
    "K8S_DISABLE_NODE_POLL": "true",
}


def settings_for(tmp_path: Path, **kw: str) -> tuple[NodeSettings, Layout]:
    layout = layout_for(tmp_path / "state")
    settings = NodeSettings(
        state_dir=str(layout.state_dir),
        log_dir=str(tmp_path / "log"),
        name="n1",
        datastore_path=str(tmp_path / "calico.db"),
        **kw,
    )
    return settings, layout


def test_inherited_drops_exactly_the_node_owned_variables() -> None:
    kept = environ.inherited(STRAY)
    assert kept == {
        "CALICO_IPV4POOL_CIDR": "10.10.0.0/16",
        "FELIX_LOGSEVERITYSCREEN": "Debug",
        "PATH": "/usr/bin:/bin",
    }


def test_kubernetes_client_settings_pass_to_every_child() -> None:
    assert environ.inherited({**STRAY, **KUBE_CLIENT}) == {
        "CALICO_IPV4POOL_CIDR": "10.10.0.0/16",
        "FELIX_LOGSEVERITYSCREEN": "Debug",
        "PATH": "/usr/bin:/bin",
        **KUBE_CLIENT,
    }
    # The datastore-selecting neighbours still do not.
    for name in ("USE_POD_CIDR", "CALICO_API_GROUP", "DATASTORE_TYPE", "CALICO_DATASTORE_PATH"):
        assert environ.is_node_owned(name), name


def test_kubernetes_client_settings_never_change_the_nodes_datastore(tmp_path: Path) -> None:
    settings, layout = settings_for(tmp_path)
    env = provision.startup_env(settings, layout, {**STRAY, **KUBE_CLIENT})
    assert env["KUBECONFIG"] == "/etc/calico/kubeconfig"
    config = DatastoreConfig.from_env(env)
    assert (config.datastore_type, config.local_path) == ("local", str(tmp_path / "calico.db"))


def test_explicit_datastore_wins_over_a_stray_calico_datastore_type(tmp_path: Path) -> None:
    settings, layout = settings_for(tmp_path)
    env = provision.startup_env(settings, layout, STRAY)
    config = DatastoreConfig.from_env(env)
    assert (config.datastore_type, config.local_path) == ("local", str(tmp_path / "calico.db"))
    assert env["CALICO_NETWORKING_BACKEND"] == "vxlan"
    assert env["CALICO_IPV4POOL_CIDR"] == "10.10.0.0/16"  # upstream settings still pass


def test_services_get_per_node_paths_and_vxlan_only_with_that_backend(tmp_path: Path) -> None:
    settings, layout = settings_for(tmp_path)
    env = service_dir.service_env(settings, layout)
    state = str(tmp_path / "state")
    assert env["FELIX_ENDPOINTSTATUSPATHPREFIX"] == state
    assert env["FELIX_MTUFILEPATH"] == f"{state}/mtu"
    assert env["FELIX_VXLANENABLED"] == "true"
    assert env["CALICO_NETWORKING_BACKEND"] == "vxlan"
    none, layout = settings_for(tmp_path, networking_backend="none")
    env = service_dir.service_env(none, layout)
    assert "FELIX_VXLANENABLED" not in env
    assert env["CALICO_NETWORKING_BACKEND"] == "none"


def test_conflist_names_the_nodes_own_status_dir_lock_and_mtu_file(tmp_path: Path) -> None:
    settings, layout = settings_for(tmp_path)
    args = provision.cni_install_args(settings, None, layout)
    state = tmp_path / "state"
    pairs = dict(zip(args[2::2], args[3::2], strict=False))
    assert pairs["--mtu"] == "0"
    assert pairs["--mtu-file"] == str(state / "mtu")
    assert pairs["--endpoint-status-dir"] == str(state / "endpoint-status")
    assert pairs["--ipam-lock-file"] == str(state / "ipam.lock")
    opts = inst.InstallOptions(
        mtu=0,
        endpoint_status_dir=pairs["--endpoint-status-dir"],
        ipam_lock_file=pairs["--ipam-lock-file"],
        mtu_file=pairs["--mtu-file"],
        nodename="n1",
    )
    plugin = json.loads(inst.render_conflist(opts))["plugins"][0]
    assert plugin["mtu"] == 0
    assert plugin["endpoint_status_dir"] == str(state / "endpoint-status")
    assert plugin["ipam_lock_file"] == str(state / "ipam.lock")
    assert plugin["mtu_file"] == str(state / "mtu")


def test_default_conflist_keeps_upstream_paths() -> None:
    plugin = json.loads(inst.render_conflist(inst.InstallOptions(nodename="n")))["plugins"][0]
    assert plugin["endpoint_status_dir"] == "/var/run/calico/endpoint-status"
    assert plugin["mtu"] == 1500
    assert "ipam_lock_file" not in plugin and "mtu_file" not in plugin


def test_calicoctl_config_names_the_nodes_datastore(tmp_path: Path) -> None:
    settings, layout = settings_for(tmp_path)
    layout.state_dir.mkdir(parents=True)
    provision.write_calicoctl_config(settings, layout)
    config = DatastoreConfig.from_file(tmp_path / "state" / "calicoctl.cfg")
    assert (config.datastore_type, config.local_path) == ("local", str(tmp_path / "calico.db"))
    etcd = NodeSettings(
        state_dir=settings.state_dir, datastore="etcdv3", etcd_endpoints="http://10.0.0.1:2379"
    )
    provision.write_calicoctl_config(etcd, layout)
    config = DatastoreConfig.from_file(tmp_path / "state" / "calicoctl.cfg")
    assert config.etcd_endpoints == ("http://10.0.0.1:2379",)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_bird_backend_without_bird_is_refused_clearly(how: str, tmp_path: Path) -> None:
    args = ["run", "--networking-backend", "bird"] if how == "flag" else ["run"]
    env = {"PATH": str(tmp_path)}  # no bird, no bird6
    if how == "env":
        env["CALICO_NETWORKING_BACKEND"] = "bird"
    result = CliRunner().invoke(node_group, args, env=env)
    assert result.exit_code == 1
    assert "networking backend bird needs BIRD 1.x (bird and bird6 on PATH" in result.output


def test_default_backend_is_bird_only_when_both_daemons_are_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from calico.node.run.layout import default_networking_backend

    monkeypatch.setenv("PATH", str(tmp_path))
    assert default_networking_backend() == "vxlan"
    for daemon in ("bird", "bird6"):
        exe = tmp_path / daemon
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        assert default_networking_backend() == ("bird" if daemon == "bird6" else "vxlan")


def test_unknown_backend_is_a_usage_error() -> None:
    result = CliRunner().invoke(node_group, ["run", "--networking-backend", "ipip"])
    assert result.exit_code == 2
    assert "'ipip' is not one of 'vxlan', 'bird', 'none'" in result.output


def test_plugin_reads_the_mtu_from_the_conflists_mtu_file(tmp_path: Path) -> None:
    from calico.cni import netconf as nc
    from calico.cni.plugin import resolve_mtu

    _settings, layout = settings_for(tmp_path)
    opts = inst.InstallOptions(mtu=0, mtu_file=str(layout.mtu_file), nodename="n1")
    conflist = json.loads(inst.render_conflist(opts))
    plugin = {**conflist["plugins"][0], "name": "net", "cniVersion": "1.0.0"}
    conf = nc.parse(json.dumps(plugin))
    assert conf.mtu_file == str(layout.mtu_file)
    assert resolve_mtu(conf) == 0  # no file yet: the kernel default
    layout.mtu_file.parent.mkdir(parents=True)
    layout.mtu_file.write_text("1430")  # as Felix writes it: no newline
    assert resolve_mtu(conf) == 1430
    default = nc.parse(json.dumps({**plugin, "mtu_file": ""}))
    assert default.mtu_file == nc.DEFAULT_MTU_FILE
