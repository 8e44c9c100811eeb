"""``calico node run``'s CNI install: ``calico component cni install`` as a child process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calico.node.errors import NodeError
from calico.node.run import provision
from calico.node.run.layout import CNI_CONFLIST_NAME, NodeSettings


def settings_in(tmp_path: Path, **kw: str) -> NodeSettings:
    return NodeSettings(
        state_dir=str(tmp_path / "state"),
        log_dir=str(tmp_path / "log"),
        name="node-a",
        cni_conf_dir=str(tmp_path / "net.d"),
        cni_bin_dir=str(tmp_path / "bin"),
        **kw,
    )


def test_install_reports_every_file_it_wrote(tmp_path: Path) -> None:
    settings = settings_in(tmp_path, datastore_path=str(tmp_path / "c.db"))
    files = provision.install_cni(settings, "/run/node-a/cni-daemon.sock")
    conflist = tmp_path / "net.d" / CNI_CONFLIST_NAME
    bins = [str(tmp_path / "bin" / name) for name in ("calico", "calico-ipam")]
    assert files == [*bins, str(conflist)]
    plugin = json.loads(conflist.read_text())["plugins"][0]
    assert plugin["nodename"] == "node-a" and plugin["datastore_path"] == str(tmp_path / "c.db")
    assert plugin["log_file_path"] == str(tmp_path / "log" / "cni" / "cni.log")
    assert "etcd_endpoints" not in plugin
    assert "CALICO_CNI_DAEMON_SOCKET=/run/node-a/cni-daemon.sock" in Path(bins[0]).read_text()
    assert provision.install_cni(settings, "/run/node-a/cni-daemon.sock") == files  # unchanged


def test_install_for_etcd_writes_the_endpoints(tmp_path: Path) -> None:
    settings = settings_in(tmp_path, datastore="etcdv3", etcd_endpoints="http://127.0.0.1:2379")
    provision.install_cni(settings, "off")
    plugin = json.loads((tmp_path / "net.d" / CNI_CONFLIST_NAME).read_text())["plugins"][0]
    assert plugin["datastore_type"] == "etcdv3"
    assert plugin["etcd_endpoints"] == "http://127.0.0.1:2379"


def test_install_failure_is_one_node_error(tmp_path: Path) -> None:
    (tmp_path / "bin").write_text("a file where the bin dir should be")
    with pytest.raises(NodeError, match=r"^installing the CNI plugin failed: \[Errno "):
        provision.install_cni(settings_in(tmp_path))
