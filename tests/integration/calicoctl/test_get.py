"""``calicoctl get``: every output format, namespaces, golden tables and YAML, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ctl_helpers import Ctl
from golden import check

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def populated(ctl: Ctl) -> Ctl:
    for name in ("pools.yaml", "cluster.yaml"):
        r = ctl("create", "-f", str(DATA / name))
        assert r.code == 0, r
    return ctl


@pytest.mark.parametrize(
    ("golden", "args"),
    [
        ("ippool_ps.txt", ["get", "ippool"]),
        ("ippool_wide.txt", ["get", "ippools", "-o", "wide"]),
        ("networkpolicy_all_wide.txt", ["get", "np", "-A", "-o", "wide"]),
        ("networkpolicy_ns.txt", ["get", "policy", "-n", "prod"]),
        ("networkpolicy_default.txt", ["get", "networkpolicies"]),
        ("gnp_wide.txt", ["get", "gnp", "-o", "wide"]),
        ("tier_ps.txt", ["get", "tiers"]),
        ("bgppeer_ps.txt", ["get", "bgpp"]),
        ("bgpconfig_ps.txt", ["get", "bgpconfig"]),
        ("node_wide.txt", ["get", "nodes", "-o", "wide"]),
        ("hostendpoint_wide.txt", ["get", "hep", "-o", "wide"]),
        ("networkset_wide.txt", ["get", "netsets", "-A", "-o", "wide"]),
        ("ippool_named.txt", ["get", "ippool", "pool2", "pool1"]),
        ("ippool_custom.txt", ["get", "pools", "-o", "custom-columns=NAME,NAT,DISABLED"]),
        ("ippool_list.yaml", ["get", "ippool", "-o", "yaml"]),
        ("ippool_one.yaml", ["get", "ipp", "pool1", "-o", "yml"]),
        ("ippool_two.yaml", ["get", "ipp", "pool1", "pool2", "-o", "yaml"]),
        ("ippool_one.json", ["get", "ipp", "pool2", "-o", "json"]),
        ("ippool_list.json", ["get", "ipps", "-o", "json"]),
        ("networkpolicy_export.yaml", ["get", "np", "allow-web", "-o", "yaml", "--export"]),
    ],
)
def test_get_output_matches_golden(populated: Ctl, golden: str, args: list[str]) -> None:
    r = populated(*args)
    assert r.code == 0 and r.err == "", r
    check(golden, r.out)


def test_yaml_and_json_parse_back_to_the_same_resources(populated: Ctl) -> None:
    as_yaml = yaml.safe_load(populated("get", "ippool", "-o", "yaml").out)
    as_json = json.loads(populated("get", "ippool", "-o", "json").out)
    assert as_yaml == as_json
    assert as_yaml["kind"] == "IPPoolList"
    assert [i["metadata"]["name"] for i in as_yaml["items"]] == ["pool1", "pool2"]
    assert as_yaml["metadata"]["resourceVersion"]


def test_export_strips_server_metadata(populated: Ctl) -> None:
    one = yaml.safe_load(populated("get", "ippool", "pool1", "-o", "yaml", "--export").out)
    assert one["metadata"] == {"name": "pool1", "creationTimestamp": None}  # Go's zero time
    listed = yaml.safe_load(populated("get", "ippool", "-o", "yaml", "--export").out)
    keep = {"name", "labels", "creationTimestamp"}
    assert all(set(i["metadata"]) <= keep for i in listed["items"])
    assert all(i["metadata"]["creationTimestamp"] is None for i in listed["items"])


def test_get_from_file(populated: Ctl) -> None:
    r = populated("get", "-f", str(DATA / "pools.yaml"), "-o", "yaml")
    assert r.code == 0, r
    docs = yaml.safe_load(r.out)
    assert [d["metadata"]["name"] for d in docs] == ["pool1", "pool2"]


def test_empty_list_prints_headings_only(ctl: Ctl) -> None:
    r = ctl("get", "ippool")
    assert r.code == 0, r
    assert r.out == "NAME   CIDR   SELECTOR   \n\n"
    assert yaml.safe_load(ctl("get", "ippool", "-o", "yaml").out)["items"] == []


def test_missing_resource_reports_and_prints_the_rest(populated: Ctl) -> None:
    r = populated("get", "ippool", "pool1", "nope")
    assert r.code == 1
    assert r.out.startswith("NAME    CIDR          SELECTOR")
    assert r.err == "resource does not exist: IPPool(nope) with error: <nil>\n"
    r = populated("get", "ippool", "nope", "-o", "yaml")
    assert (r.code, r.out) == (1, "[]\n")
    assert r.err == "resource does not exist: IPPool(nope) with error: <nil>\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["get", "foo"], "failed to get resources: resource type 'foo' is not supported\n"),
        (["get", "ippool", "-o", "xml"], "unrecognized output format 'xml'\n"),
        (["get", "ippool", "-o", "custom-columns="], "need to specify at least one column\n"),
        (
            ["get", "np", "-A", "-n", "prod"],
            "cannot use both --namespace and --all-namespaces flags at the same time\n",
        ),
        (["get", "ippool", "-n", "prod"], "IPPool is not namespaced\n"),
        (["get", "ippool", "-A"], "IPPool is not namespaced\n"),
        (
            ["get", "np", "allow-web", "-A"],
            "cannot use --all-namespace flag for getting a single resource\n",
        ),
        (["get", "ippool", ""], "failed to get resources: resource name may not be empty\n"),
    ],
)
def test_get_errors(populated: Ctl, args: list[str], message: str) -> None:
    r = populated(*args)
    assert (r.code, r.err) == (1, message), r
    assert "Traceback" not in r.err


def test_unknown_custom_column(populated: Ctl) -> None:
    r = populated("get", "ippool", "-o", "custom-columns=NAME,BOGUS")
    assert r.code == 1
    assert r.err.startswith("Unknown heading BOGUS, valid values are: ")
    assert "CIDR" in r.err


def test_kind_aliases_are_case_insensitive(populated: Ctl) -> None:
    outs = {populated("get", k).out for k in ("ippool", "IPPool", "IPPOOLS", "pools", "ipp")}
    assert len(outs) == 1
