"""``calico component node startup`` end to end, in a network namespace."""

from __future__ import annotations

import ipaddress

import pytest
from node_netns import NODE_CIDR, NODE_IP, NodeHost

pytestmark = pytest.mark.root


def _names(host: NodeHost, kind: str) -> list[str]:
    return host.query(lambda c: sorted(r.metadata.name for r in c.list(kind).items))


def test_startup_provisions_everything_and_is_idempotent(host: NodeHost) -> None:
    res = host.run("startup", CLUSTER_TYPE="k8s,bgp", AS="64512")
    assert res.returncode == 0, res.stderr
    assert host.nodename_file.read_text() == "node-a"

    node = host.query(lambda c: c.get("Node", "node-a"))
    assert node.spec.bgp.ipv4_address == NODE_CIDR
    assert node.spec.bgp.as_number == 64512

    pools = host.query(lambda c: {p.metadata.name: p.spec for p in c.list("IPPool").items})
    v4 = pools["default-ipv4-ippool"]
    assert (v4.cidr, v4.block_size, v4.nat_outgoing, v4.ipip_mode) == (
        "192.168.0.0/16",
        26,
        True,
        "Never",
    )
    v6 = pools.get("default-ipv6-ippool")
    if v6 is not None:  # created only where the kernel has IPv6
        assert ipaddress.ip_network(v6.cidr).prefixlen == 48 and v6.block_size == 122

    info = host.query(lambda c: c.get("ClusterInformation", "default")).spec
    assert info.datastore_ready is True and info.cluster_type == "k8s,bgp"
    assert info.calico_version and info.cluster_guid

    felix = host.query(lambda c: c.get("FelixConfiguration", "default")).spec
    assert felix.reporting_interval == "0s" and felix.log_severity_screen == "Info"
    per_node = host.query(lambda c: c.get("FelixConfiguration", "node.node-a")).spec
    assert per_node.default_endpoint_to_host_action == "Return"
    assert _names(host, "BGPConfiguration") == ["default"]
    ipam = host.query(lambda c: c.get("IPAMConfiguration", "default")).spec
    assert ipam.auto_allocate_blocks is True and ipam.strict_affinity is False

    def versions() -> dict[str, str]:
        kinds = ("Node", "IPPool", "ClusterInformation", "FelixConfiguration")
        return host.query(
            lambda c: {
                f"{k}/{r.metadata.name}": r.metadata.resource_version
                for k in kinds
                for r in c.list(k).items
            }
        )

    before = versions()
    again = host.run("startup", CLUSTER_TYPE="k8s,bgp", AS="64512")
    assert again.returncode == 0, again.stderr
    assert versions() == before  # nothing rewritten on a second boot


def test_nodename_file_is_used_when_nodename_unset(host: NodeHost) -> None:
    host.nodename_file.write_text("stored-name")
    res = host.run("startup", NODENAME="")
    assert res.returncode == 0, res.stderr
    assert _names(host, "Node") == ["stored-name"]


def test_no_default_pools(host: NodeHost) -> None:
    res = host.run("startup", NO_DEFAULT_POOLS="true")
    assert res.returncode == 0, res.stderr
    assert _names(host, "IPPool") == []
    assert _names(host, "Node") == ["node-a"]


def test_explicit_pool_settings(host: NodeHost) -> None:
    res = host.run(
        "startup",
        CALICO_IPV4POOL_CIDR="10.200.0.0/16",
        CALICO_IPV4POOL_BLOCK_SIZE="24",
        CALICO_IPV4POOL_VXLAN="Always",
        CALICO_IPV6POOL_CIDR="none",
        IP=NODE_IP,
    )
    assert res.returncode == 0, res.stderr
    pools = host.query(lambda c: c.list("IPPool").items)
    assert [(p.spec.cidr, p.spec.block_size, p.spec.vxlan_mode) for p in pools] == [
        ("10.200.0.0/16", 24, "Always")
    ]
    node = host.query(lambda c: c.get("Node", "node-a"))
    assert node.spec.bgp.ipv4_address == NODE_CIDR
    # Every non-excluded interface is listed, with or without addresses (as upstream).
    assert [(i.name, i.addresses) for i in node.spec.interfaces] == [
        ("eth9", [NODE_IP]),
        ("peer9", None),
    ]


def test_invalid_autodetection_method(host: NodeHost) -> None:
    res = host.run("startup", IP_AUTODETECTION_METHOD="bogus")
    assert res.returncode == 1
    assert "Invalid IP autodetection method: bogus" in res.stderr
    assert "Traceback" not in res.stderr
    assert not host.nodename_file.exists()


def test_interface_method_without_match_fails(host: NodeHost) -> None:
    res = host.run("startup", IP_AUTODETECTION_METHOD="interface=wlan.*")
    assert res.returncode == 1
    assert "failed to autodetect an IPv4 address" in res.stderr


def test_ip_conflict_with_another_node(host: NodeHost) -> None:
    assert host.run("startup", NODENAME="other").returncode == 0
    res = host.run("startup")
    assert res.returncode == 1
    assert "Calico node 'other' is already using the IPv4 address 10.55.0.7" in res.stderr
    ok = host.run("startup", DISABLE_NODE_IP_CHECK="true")
    assert ok.returncode == 0, ok.stderr


def test_bad_pool_setting_writes_nothing(host: NodeHost) -> None:
    res = host.run("startup", CALICO_IPV4POOL_BLOCK_SIZE="40")
    assert res.returncode == 1
    assert "Invalid blocksize 40 for version 4" in res.stderr
    assert _names(host, "Node") == []
