"""The built-in tiers through calicoctl: never deletable, order and defaultAction pinned."""

from __future__ import annotations

import pytest
import yaml
from ctl_helpers import Ctl, invoke


@pytest.fixture
def lctl(local_env: dict[str, str]) -> Ctl:
    return lambda *args, stdin=None: invoke(local_env, *args, stdin=stdin)


def tier(name: str, **spec: object) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": "Tier",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def tier_names(ctl: Ctl) -> list[str]:
    r = ctl("get", "tier", "-o", "yaml")
    assert r.code == 0, r
    return [i["metadata"]["name"] for i in yaml.safe_load(r.out)["items"]]


@pytest.mark.parametrize("name", ["default", "kube-admin", "kube-baseline"])
def test_built_in_tiers_cannot_be_deleted(lctl: Ctl, name: str) -> None:
    assert name in tier_names(lctl)
    r = lctl("delete", "tier", name)
    assert (r.code, r.out) == (1, "")
    assert r.err == (
        f"Failed to delete 'Tier' resource: operation Delete is not supported on {name}: "
        f"Cannot delete {name} tier\n"
    )
    assert name in tier_names(lctl)
    # From a file too, and even when the file names a stale revision.
    r = lctl("delete", "-f", "-", stdin=tier(name))
    assert r.code == 1 and "Cannot delete " + name + " tier" in r.err


def test_other_tiers_delete_once_empty(lctl: Ctl) -> None:
    policy = yaml.safe_dump(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": "GlobalNetworkPolicy",
            "metadata": {"name": "security.p"},
            "spec": {"tier": "security", "selector": "all()"},
        }
    )
    assert lctl("apply", "-f", "-", stdin=tier("security", order=100)).code == 0
    assert lctl("apply", "-f", "-", stdin=policy).code == 0
    r = lctl("delete", "tier", "security")
    assert (r.code, r.err) == (
        1,
        "Failed to delete 'Tier' resource: operation delete is not supported on security: "
        "Cannot delete a non-empty tier\n",
    )
    assert lctl("delete", "globalnetworkpolicy", "security.p").code == 0
    r = lctl("delete", "tier", "security")
    assert (r.code, r.out) == (0, "Successfully deleted 1 'Tier' resource(s)\n")
    assert "security" not in tier_names(lctl)


@pytest.mark.parametrize(
    ("name", "spec", "error"),
    [
        (
            "default",
            {"order": 999999},
            "error with field Order = '999999' (default tier order must be 1000000)",
        ),
        (
            "default",
            {"order": 1000000, "defaultAction": "Pass"},
            "error with field "
            "DefaultAction = 'Pass' (The 'default' tier must have default action 'Deny')",
        ),
        (
            "kube-admin",
            {"order": 1001, "defaultAction": "Pass"},
            "error with field Order = '1001' (kube-admin tier order must be 1000)",
        ),
        (
            "kube-admin",
            {"order": 1000},
            "error with field DefaultAction = '<nil>' "
            "(The 'kube-admin' tier must have default action 'Pass')",
        ),
        (
            "kube-baseline",
            {"defaultAction": "Pass"},
            "error with field Order = '<nil>' (kube-baseline tier order must be 10000000)",
        ),
    ],
)
def test_built_in_tier_order_and_action_are_pinned(
    lctl: Ctl, name: str, spec: dict[str, object], error: str
) -> None:
    before = lctl("get", "tier", name, "-o", "yaml").out
    r = lctl("replace", "-f", "-", stdin=tier(name, **spec))
    assert (r.code, r.out) == (1, "")
    assert r.err == f"failed to replace 'Tier' resource: {error}\n"
    r = lctl("apply", "-f", "-", stdin=tier(name, **spec))
    assert r.code == 1 and error in r.err
    assert lctl("get", "tier", name, "-o", "yaml").out == before


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("default", {"order": 1000000, "defaultAction": "Deny"}),
        ("default", {}),
        ("kube-admin", {"order": 1000, "defaultAction": "Pass"}),
        ("kube-baseline", {"order": 10000000, "defaultAction": "Pass"}),
    ],
)
def test_built_in_tiers_accept_their_own_values(
    lctl: Ctl, name: str, spec: dict[str, object]
) -> None:
    r = lctl("apply", "-f", "-", stdin=tier(name, **spec))
    assert (r.code, r.out) == (0, "Successfully applied 1 'Tier' resource(s)\n")
