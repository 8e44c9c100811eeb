"""`calicoctl ipam split` on each datastore, following upstream's test_ipam_split.py: the lock
check, lookup by --cidr and by --name, the number checks, the children's names and specs, and
that nothing is written when the split is refused."""

from __future__ import annotations

import pytest
import yaml
from ctl_helpers import Ctl

POOL = """\
apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: ippool-name1
  labels: {team: net}
spec:
  cidr: 10.0.1.0/24
  ipipMode: Always
  vxlanMode: Never
  blockSize: 27
  nodeSelector: foo == 'bar'
"""
NODE = """\
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node4}
spec: {bgp: {ipv4Address: 10.10.10.1/24}}
"""
CHILDREN = ["10.0.1.0/26", "10.0.1.64/26", "10.0.1.128/26", "10.0.1.192/26"]


def pools(ctl: Ctl) -> dict[str, dict]:
    out = yaml.safe_load(ctl("get", "ippool", "-o", "yaml").out)
    return {p["metadata"]["name"]: p for p in out["items"]}


@pytest.fixture
def prepared(ctl: Ctl) -> Ctl:
    for text in (POOL, NODE):
        r = ctl("create", "-f", "-", stdin=text)
        assert r.code == 0, r
    return ctl


def refused(ctl: Ctl, *args: str) -> str:
    r = ctl("ipam", "split", *args)
    assert r.code == 1 and r.out == "", r
    return r.err.strip()


@pytest.mark.parametrize("how", [["--cidr=10.0.1.0/24"], ["--name=ippool-name1"], ["10.0.1.0/24"]])
def test_split_like_upstream(prepared: Ctl, how: list[str]) -> None:
    ctl = prepared
    before = pools(ctl)["ippool-name1"]
    assert refused(ctl, *how, "4") == (
        "datastore is not locked. Run the `calicoctl datastore migrate lock` command in order "
        "split the IP pools"
    )
    assert ctl("datastore", "migrate", "lock").code == 0
    assert refused(ctl, "--cidr=10.0.2.0/24", "4") == (
        "unable to find IP pool  covering the specified CIDR 10.0.2.0/24"
    )
    assert refused(ctl, "--name=ippool-name2", "4").startswith(
        "unable to find IP pool with name ippool-name2: "
    )
    assert refused(ctl, *how, "3") == (
        "error splitting the CIDR 10.0.1.0/24 into 3 CIDRs: number to split CIDR into is not a "
        "valid power of 2: 3"
    )
    assert refused(ctl, *how, "512") == (
        "error splitting the CIDR 10.0.1.0/24 into 512 CIDRs: the CIDR 10.0.1.0/24 is not large "
        "enough to be split into 512 parts"
    )
    # Refusals wrote nothing: the pool is still there, enabled, at the same revision.
    assert pools(ctl) == {"ippool-name1": before}

    r = ctl("ipam", "split", *how, "4")
    assert r.code == 0, r
    assert r.out.splitlines() == [
        "IP Pool ippool-name1 was successfully split into 4 smaller pools.",
        *(f"Created split-ippool-name1-{i} with CIDR {c}." for i, c in enumerate(CHILDREN)),
        "Please refer to the documentation for final steps.",
    ]
    r = ctl("get", "ippool", "ippool-name1")
    assert r.code == 1 and "IPPool(ippool-name1)" in r.err
    after = pools(ctl)
    assert sorted(after) == [f"split-ippool-name1-{i}" for i in range(4)]
    for i, cidr in enumerate(CHILDREN):
        child = after[f"split-ippool-name1-{i}"]
        assert child["spec"] == {**before["spec"], "cidr": cidr}
        assert child["metadata"]["labels"] == {"team": "net"}
        assert child["metadata"]["uid"] != before["metadata"]["uid"]
    assert ctl("datastore", "migrate", "unlock").code == 0
    for name in after:
        assert ctl("delete", "ippool", name).code == 0


def test_split_keeps_ipam_blocks_usable_and_checks_children(prepared: Ctl) -> None:
    ctl = prepared
    assert ctl("datastore", "migrate", "lock").code == 0
    # 16 children would be /28s, smaller than the pool's /27 blocks: refused, nothing written.
    err = refused(ctl, "--cidr=10.0.1.0/24", "16")
    assert err.startswith("error splitting the CIDR 10.0.1.0/24 into 16 CIDRs: spec.blockSize:")
    assert pools(ctl)["ippool-name1"]["spec"].get("disabled") in (None, False)
    assert ctl("ipam", "split", "--cidr=10.0.1.0/24", "8").code == 0
    assert sorted(p["spec"]["cidr"] for p in pools(ctl).values()) == sorted(
        f"10.0.1.{32 * i}/27" for i in range(8)
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["4"], "no name or CIDR provided. Provide a name or CIDR to denote the IP pool to split"),
        (
            ["--cidr=10.0.1.0/24", "four"],
            "error reading number to split IP pools into. four is not a valid number: "
            'strconv.Atoi: parsing "four": invalid syntax',
        ),
        (
            ["--cidr=10.0.1.0/24", "0"],
            "error splitting the CIDR 10.0.1.0/24 into 0 CIDRs: number to split CIDR into is not "
            "a valid power of 2: 0",
        ),
        (
            ["--cidr=10.0.1.0/24", "1"],
            "error splitting the CIDR 10.0.1.0/24 into 1 CIDRs: number to split CIDR into is not "
            "a valid power of 2: 1",
        ),
        (
            ["--cidr=10.0.1.0/24", "--", "-2"],
            "error splitting the CIDR 10.0.1.0/24 into -2 CIDRs: number to split CIDR into is not "
            "a valid power of 2: -2",
        ),
        (
            [],
            "invalid option: 'calicoctl ipam split '. Use flag '--help' to read about a "
            "specific subcommand",
        ),
    ],
)
def test_split_argument_errors(prepared: Ctl, args: list[str], message: str) -> None:
    assert prepared("datastore", "migrate", "lock").code == 0
    assert refused(prepared, *args) == message
    assert list(pools(prepared)) == ["ippool-name1"]


def test_split_ipv6_pool(ctl: Ctl) -> None:
    v6 = (
        "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: v6}\n"
        "spec: {cidr: 'fd00:10::/120', blockSize: 124}\n"
    )
    for text in (v6, NODE):
        assert ctl("create", "-f", "-", stdin=text).code == 0
    assert ctl("datastore", "migrate", "lock").code == 0
    r = ctl("ipam", "split", "--name=v6", "2")
    assert r.code == 0, r
    assert {n: p["spec"]["cidr"] for n, p in pools(ctl).items()} == {
        "split-v6-0": "fd00:10::/121",
        "split-v6-1": "fd00:10::80/121",
    }


def test_split_through_the_calicoctl_script(ctl_bin: Ctl) -> None:
    for text in (POOL, NODE):
        assert ctl_bin("create", "-f", "-", stdin=text).code == 0
    r = ctl_bin("ipam", "split", "--name=ippool-name1", "2")
    assert (r.code, r.out) == (1, "") and r.err.startswith("datastore is not locked.")
    assert ctl_bin("datastore", "migrate", "lock").code == 0
    r = ctl_bin("ipam", "split", "--name=ippool-name1", "2")
    assert (r.code, r.err) == (0, ""), r
    assert "Created split-ippool-name1-1 with CIDR 10.0.1.128/25." in r.out
