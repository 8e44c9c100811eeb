"""ClusterInformation merging and the Felix/BGP/IPAM defaults."""

from __future__ import annotations

from calico.api import parse_resource, resource_to_wire
from calico.datastore.client import Client
from calico.node.defaults import (
    ensure_cluster_information,
    ensure_default_config,
    merge_cluster_types,
)


def test_merge_cluster_types() -> None:
    assert merge_cluster_types("", "k8s,bgp") == "k8s,bgp"
    assert merge_cluster_types("k8s,bgp", "bgp,kubeadm") == "k8s,bgp,kubeadm"
    assert merge_cluster_types("k8s", "") == "k8s"


def test_cluster_information_created_then_updated(client: Client) -> None:
    first = ensure_cluster_information(client, "v1", "k8s")
    assert first.spec.datastore_ready is True and first.spec.cluster_type == "k8s"
    second = ensure_cluster_information(client, "v2", "bgp")
    assert second.spec.calico_version == "v2" and second.spec.cluster_type == "k8s,bgp"
    assert second.spec.cluster_guid == first.spec.cluster_guid


def test_cluster_information_keeps_cleared_ready_flag(client: Client) -> None:
    cur = ensure_cluster_information(client, "v1", "")
    wire = resource_to_wire(cur)
    wire["spec"]["datastoreReady"] = False
    client.update(parse_resource(wire))
    assert ensure_cluster_information(client, "v1", "").spec.datastore_ready is False


def test_defaults_created(client: Client) -> None:
    ensure_default_config(client, "n1", "local")
    felix = client.get("FelixConfiguration", "default").spec
    assert felix.reporting_interval == "0s" and felix.log_severity_screen == "Info"
    assert client.get("FelixConfiguration", "node.n1").spec.default_endpoint_to_host_action == (
        "Return"
    )
    client.get("BGPConfiguration", "default")
    ipam = client.get("IPAMConfiguration", "default").spec
    assert ipam.auto_allocate_blocks is True and ipam.strict_affinity is False


def test_defaults_never_overwrite(client: Client) -> None:
    client.create(
        parse_resource(
            {
                "apiVersion": "projectcalico.org/v3",
                "kind": "FelixConfiguration",
                "metadata": {"name": "default"},
                "spec": {"logSeverityScreen": "Debug"},
            }
        )
    )
    ensure_default_config(client, "n1", "kubernetes")
    felix = client.get("FelixConfiguration", "default").spec
    assert felix.log_severity_screen == "Debug" and felix.reporting_interval == "0s"
    names = [f.metadata.name for f in client.list("FelixConfiguration").items]
    assert names == ["default"]  # no per-node config with the Kubernetes datastore
