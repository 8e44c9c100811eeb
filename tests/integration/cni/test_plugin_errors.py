"""Every error path: a CNI error document on stdout, non-zero exit, no traceback, no leaks."""

from __future__ import annotations

import shutil

import pytest
from cni_fixtures import CNIWorld, Plugin

pytestmark = pytest.mark.root


def assert_error(res: Plugin, code: int, text: str = "") -> dict:
    assert res.returncode != 0, res.stdout
    doc = res.doc
    assert set(doc) <= {"cniVersion", "code", "msg", "details"}
    assert doc["code"] == code, doc
    assert doc["cniVersion"]
    assert text in doc["msg"] + doc.get("details", ""), doc
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    return doc


def assert_nothing_left(world: CNIWorld, expected_in_use: int = 0) -> None:
    assert world.in_use() == expected_in_use
    assert world.weps() == [] if expected_in_use == 0 else True
    assert "cali" not in world.host_ip("link", "show")


@pytest.mark.parametrize(
    ("stdin", "code", "text"),
    [
        ("not json", 6, "decode"),
        ("[1, 2]", 6, "decode"),
        ('{"name": "n", "type": "calico", "ipam": {"type": "calico-ipam"}}', 1, "0.2.0"),
        ('{"cniVersion": "0.2.0", "name": "n", "ipam": {"type": "calico-ipam"}}', 1, "0.2.0"),
        ('{"cniVersion": "2.0.0", "name": "n", "ipam": {"type": "calico-ipam"}}', 1, "2.0.0"),
        ('{"cniVersion": "1.0.0", "type": "calico", "ipam": {"type": "calico-ipam"}}', 7, "name"),
        ('{"cniVersion": "1.0.0", "name": "n", "type": "calico"}', 7, "ipam.type"),
        (
            '{"cniVersion": "1.0.0", "name": "n", "mtu": "x", "ipam": {"type": "calico-ipam"}}',
            7,
            "mtu",
        ),
        (
            '{"cniVersion": "1.0.0", "name": "bad name", "ipam": {"type": "calico-ipam"}}',
            7,
            "network name",
        ),
        (
            '{"cniVersion": "1.0.0", "name": "n", "device_type": "netkit", '
            '"ipam": {"type": "calico-ipam"}}',
            7,
            "device_type",
        ),
    ],
)
def test_bad_netconf(world: CNIWorld, stdin: str, code: int, text: str) -> None:
    ns = world.workload_ns()
    assert_error(world.run("calico", world.env("ADD", "c1", ns), stdin), code, text)
    assert_nothing_left(world)


@pytest.mark.parametrize(
    ("drop", "override", "code", "text"),
    [
        ("CNI_NETNS", {}, 4, "CNI_NETNS"),
        ("CNI_CONTAINERID", {}, 4, "CNI_CONTAINERID"),
        ("CNI_IFNAME", {}, 4, "CNI_IFNAME"),
        ("CNI_PATH", {}, 4, "CNI_PATH"),
        ("", {"CNI_COMMAND": "BOGUS"}, 4, "CNI_COMMAND"),
        ("", {"CNI_CONTAINERID": "bad/id"}, 4, "CNI_CONTAINERID"),
        ("", {"CNI_CONTAINERID": "UpperCase"}, 4, "resource name"),
        ("", {"CNI_ARGS": "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=Web"}, 4, "resource name"),
        ("", {"CNI_IFNAME": "a-very-long-interface-name"}, 4, "CNI_IFNAME"),
        ("", {"CNI_ARGS": "FOO=bar"}, 4, "FOO"),
        ("", {"CNI_ARGS": "novalue"}, 4, "CNI_ARGS"),
        ("", {"CNI_NETNS": "/run/netns/does-not-exist"}, 3, "does-not-exist"),
    ],
)
def test_bad_environment(
    world: CNIWorld, drop: str, override: dict[str, str], code: int, text: str
) -> None:
    ns = world.workload_ns()
    env = world.env("ADD", "c1", ns)
    env.pop(drop, None)
    env.update(override)
    assert_error(world.run("calico", env, world.netconf()), code, text)
    assert_nothing_left(world)  # the missing netns came after IPAM: released again


def test_datastore_not_ready_is_try_again_later(world: CNIWorld) -> None:
    def set_ready(ready: bool) -> None:
        def update(c):  # type: ignore[no-untyped-def]
            info = c.get("ClusterInformation", "default")
            spec = info.spec.model_copy(update={"datastore_ready": ready})
            c.update(info.model_copy(update={"spec": spec}))

        world.with_client(update)

    ns = world.workload_ns()
    set_ready(False)
    assert_error(world.add("c1", ns), 11, "not ready")
    assert_error(world.delete("c1", ns), 11, "not ready")
    assert_nothing_left(world)
    set_ready(True)
    assert world.add("c1", ns).returncode == 0
    assert world.delete("c1", ns).returncode == 0


def test_ipam_exhaustion_leaks_nothing(world: CNIWorld) -> None:
    world.add_pool("tiny", "10.78.0.0/30", block_size=30)
    conf = world.netconf(ipam={"type": "calico-ipam", "ipv4_pools": ["tiny"]})
    namespaces = [world.workload_ns() for _ in range(5)]
    for i, ns in enumerate(namespaces[:4]):
        assert world.add(f"full{i}", ns, conf).returncode == 0
    assert_error(world.add("full4", namespaces[4], conf), 101, "")
    assert world.in_use() == 4
    assert world.handle_ips("testnet.full4") == []
    assert "califull4" not in world.host_ip("link", "show")
    assert len(world.weps()) == 4
    for i, ns in enumerate(namespaces[:4]):
        assert world.delete(f"full{i}", ns, conf).returncode == 0
    assert_nothing_left(world)


def test_dual_stack_without_v6_pool_releases_v4(world: CNIWorld) -> None:
    conf = world.netconf(ipam={"type": "calico-ipam", "assign_ipv6": "true"})
    assert_error(world.add("c1", world.workload_ns(), conf), 101, "IPv6")
    assert_nothing_left(world)


def test_dataplane_failure_after_ipam_releases_addresses(world: CNIWorld) -> None:
    ns = world.workload_ns()
    world.ns_ip(ns, "link", "add", "eth0", "type", "veth", "peer", "name", "x0")
    assert_error(world.add("c1", ns), 102, "already exists")
    assert_nothing_left(world)


def test_host_route_conflict_names_interface_and_releases(world: CNIWorld) -> None:
    world.host_ip("link", "add", "squatter", "type", "veth", "peer", "name", "squatter-p")
    world.host_ip("link", "set", "squatter", "up")
    world.host_ip("route", "add", "10.77.0.50/32", "dev", "squatter")
    ns = world.workload_ns()
    env = world.env("ADD", "c1", ns, CNI_ARGS="IgnoreUnknown=1;IP=10.77.0.50")
    assert_error(world.run("calico", env, world.netconf()), 102, "squatter")
    assert_nothing_left(world)


def test_requested_ip_via_cni_args(world: CNIWorld) -> None:
    ns = world.workload_ns()
    res = world.add("c1", ns, CNI_ARGS="IgnoreUnknown=1;IP=10.77.0.77")
    assert res.returncode == 0, res.stderr
    assert res.doc["ips"][0]["address"] == "10.77.0.77/32"
    # The same address again is refused and nothing extra is held.
    ns2 = world.workload_ns()
    assert_error(world.add("c2", ns2, CNI_ARGS="IgnoreUnknown=1;IP=10.77.0.77"), 101, "10.77.0.77")
    assert world.in_use() == 1
    assert world.delete("c1", ns).returncode == 0


def test_missing_nodename_file(world: CNIWorld) -> None:
    conf = world.netconf(nodename="", nodename_file=str(world.tmp / "nope"))
    assert_error(world.add("c1", world.workload_ns(), conf), 7, "calico/node")
    # Optional: falls back to the hostname.
    conf["nodename_file_optional"] = True
    ns = world.workload_ns()
    assert world.add("c2", ns, conf).returncode == 0
    assert world.delete("c2", ns, conf).returncode == 0


def test_bad_datastore_config(world: CNIWorld) -> None:
    conf = world.netconf(datastore_type="mongodb")
    assert_error(world.add("c1", world.workload_ns(), conf), 7, "mongodb")


def test_check_failures(world: CNIWorld) -> None:
    ns = world.workload_ns()
    assert_error(world.check("c1", ns), 105, "does not exist")
    assert world.add("c1", ns).returncode == 0
    world.ns_ip(ns, "addr", "flush", "dev", "eth0")
    assert_error(world.check("c1", ns), 105, "missing")
    assert world.delete("c1", ns).returncode == 0


def test_external_ipam_is_executed_from_cni_path(world: CNIWorld) -> None:
    # A copy of the calico-ipam launcher under another name: the plugin must exec it.
    shutil.copy(world.bin_dir / "calico-ipam", world.bin_dir / "other-ipam")
    conf = world.netconf(ipam={"type": "other-ipam"})
    ns = world.workload_ns()
    res = world.add("ext1", ns, conf)
    assert res.returncode == 0, res.stdout + res.stderr
    assert world.handle_ips("testnet.ext1") == [res.doc["ips"][0]["address"].split("/")[0]]
    assert world.delete("ext1", ns, conf).returncode == 0
    assert_nothing_left(world)
    # Missing plugin binary: an IPAM error naming it.
    conf = world.netconf(ipam={"type": "no-such-ipam"})
    assert_error(world.add("ext2", world.workload_ns(), conf), 101, "no-such-ipam")


def test_unexpected_ipam_failure_passes_its_error_through(world: CNIWorld) -> None:
    script = world.bin_dir / "broken-ipam"
    script.write_text(
        "#!/bin/sh\n"
        'echo \'{"cniVersion":"1.0.0","code":11,"msg":"busy","details":"come back"}\'\n'
        "exit 1\n"
    )
    script.chmod(0o755)
    conf = world.netconf(ipam={"type": "broken-ipam"})
    doc = assert_error(world.add("c1", world.workload_ns(), conf), 11, "busy")
    assert doc["details"] == "come back"
