"""Netconf and CNI_* environment parsing: every problem maps to the right CNI code."""

from __future__ import annotations

import json

import pytest

from calico.cni.errors import CNIError
from calico.cni.netconf import parse, parse_args, parse_env

BASE = {"cniVersion": "1.0.0", "name": "net1", "type": "calico", "ipam": {"type": "calico-ipam"}}


def conf(**changes: object) -> str:
    return json.dumps({**BASE, **changes})


def code_of(fn, *args, **kwargs) -> int:  # type: ignore[no-untyped-def]
    with pytest.raises(CNIError) as info:
        fn(*args, **kwargs)
    return info.value.code


def test_defaults() -> None:
    c = parse(conf())
    assert c.ipam.assign_ipv4 and not c.ipam.assign_ipv6
    assert c.nodename_file == "/var/lib/calico/nodename"
    assert c.endpoint_status_dir == "/var/run/calico/endpoint-status"
    assert c.ipam_lock_file == "/var/run/calico/ipam.lock"
    assert (c.mtu, c.num_queues, c.policy_setup_timeout_seconds) == (0, 1, 0)
    assert c.log_level == "info" and c.log_file_path == ""


def test_fields() -> None:
    c = parse(
        conf(
            mtu=1410,
            nodename="n1",
            datastore_type="etcdv3",
            etcd_endpoints="http://127.0.0.1:2379",
            policy={"type": "k8s"},
            container_settings={"allow_ip_forwarding": True},
            policy_setup_timeout_seconds=5,
            ipam={
                "type": "calico-ipam",
                "assign_ipv4": "false",
                "assign_ipv6": "true",
                "ipv6_pools": ["fd00::/64", "p6"],
            },
            args={"org.apache.mesos": {"network_info": {"labels": {"labels": [
                {"key": "app", "value": "web"}]}}}},
        )
    )  # fmt: skip
    assert (c.mtu, c.nodename, c.datastore_type, c.policy_type) == (1410, "n1", "etcdv3", "k8s")
    assert c.allow_ip_forwarding and c.policy_setup_timeout_seconds == 5
    assert not c.ipam.assign_ipv4 and c.ipam.assign_ipv6
    assert c.ipam.ipv6_pools == ["fd00::/64", "p6"]
    assert c.mesos_labels == {"app": "web"}


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("{", 6),
        ("null", 6),
        (b"\xff\xfe", 6),
        (json.dumps({k: v for k, v in BASE.items() if k != "cniVersion"}), 1),
        (conf(cniVersion="0.2.0"), 1),
        (conf(cniVersion="1.1.0"), 1),
        (conf(cniVersion=1), 1),
        (conf(name=""), 7),
        (conf(name="has space"), 7),
        (conf(ipam={}), 7),
        (conf(ipam="calico-ipam"), 7),
        (conf(mtu="1500"), 7),
        (conf(mtu=-1), 7),
        (conf(mtu=True), 7),
        (conf(num_queues=0), 7),
        (conf(device_type="netkit"), 7),
        (conf(policy={"type": "opa"}), 7),
        (conf(ipam={"type": "calico-ipam", "assign_ipv6": "yes"}), 7),
        (conf(ipam={"type": "calico-ipam", "ipv4_pools": "p1"}), 7),
        (conf(container_settings={"allow_ip_forwarding": "true"}), 7),
    ],
)
def test_bad_netconf_codes(text: str | bytes, code: int) -> None:
    assert code_of(parse, text) == code


def test_ipam_plugin_does_not_need_ipam_type() -> None:
    assert parse(conf(ipam=None), need_ipam_type=False).ipam.type == ""


def test_supported_versions() -> None:
    for version in ("0.3.0", "0.3.1", "0.4.0", "1.0.0"):
        assert parse(conf(cniVersion=version)).cni_version == version


ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "abc",
    "CNI_NETNS": "/run/netns/x",
    "CNI_IFNAME": "eth0",
    "CNI_PATH": "/opt/cni/bin:/usr/lib/cni",
    "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=pod;X=1",
}


def test_env() -> None:
    env = parse_env(ENV)
    assert env.path == ("/opt/cni/bin", "/usr/lib/cni")
    assert (env.k8s_namespace, env.k8s_pod) == ("ns", "pod")
    assert parse_env({**ENV, "CNI_COMMAND": "DEL", "CNI_NETNS": ""}).netns == ""
    assert parse_env({"CNI_COMMAND": "VERSION"}).command == "VERSION"


@pytest.mark.parametrize(
    "change",
    [
        {"CNI_COMMAND": ""},
        {"CNI_COMMAND": "add"},
        {"CNI_NETNS": ""},
        {"CNI_CONTAINERID": ""},
        {"CNI_CONTAINERID": "-abc"},
        {"CNI_IFNAME": ""},
        {"CNI_IFNAME": "x" * 16},
        {"CNI_IFNAME": "a/b"},
        {"CNI_PATH": ""},
        {"CNI_ARGS": "X=1"},
        {"CNI_ARGS": "K8S_POD_NAME"},
    ],
)
def test_bad_env_is_code_4(change: dict[str, str]) -> None:
    assert code_of(parse_env, {**ENV, **change}) == 4


def test_args() -> None:
    assert parse_args("") == {}
    assert parse_args("IP=10.0.0.1;K8S_POD_NAME=a=b") == {"IP": "10.0.0.1", "K8S_POD_NAME": "a=b"}
