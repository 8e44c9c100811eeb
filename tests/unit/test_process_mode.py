"""The argv[0] / CNI_COMMAND process-mode table, one test row per upstream rule."""

from __future__ import annotations

import pytest

from calico.process_mode import Decision, Mode, decide

CASES = [
    # (argv, CNI_COMMAND, expected mode, expected argv)
    (["/opt/cni/bin/calico-ipam"], "ADD", Mode.CNI_IPAM, ["/opt/cni/bin/calico-ipam"]),
    (["calico-ipam"], None, Mode.CNI_IPAM, ["calico-ipam"]),
    (["calico-ipam", "version"], "", Mode.CNI_IPAM, ["calico-ipam", "version"]),
    (
        ["/usr/bin/calicoctl", "get", "nodes"],
        None,
        Mode.CLI,
        ["/usr/bin/calicoctl", "ctl", "get", "nodes"],
    ),
    (["calicoctl"], None, Mode.CLI, ["calicoctl", "ctl"]),
    (["calicoctl", "version"], "ADD", Mode.CLI, ["calicoctl", "ctl", "version"]),
    (["/opt/cni/bin/calico"], "ADD", Mode.CNI_PLUGIN, ["/opt/cni/bin/calico"]),
    (["calico"], "DEL", Mode.CNI_PLUGIN, ["calico"]),
    (["calico", "whatever"], "CHECK", Mode.CNI_PLUGIN, ["calico", "whatever"]),
    (["calico", "component", "felix"], "ADD", Mode.CLI, ["calico", "component", "felix"]),
    (["calico", "ctl", "get", "nodes"], "ADD", Mode.CLI, ["calico", "ctl", "get", "nodes"]),
    (["calico", "health", "--port", "1"], "ADD", Mode.CLI, ["calico", "health", "--port", "1"]),
    (["calico", "version"], "VERSION", Mode.CLI, ["calico", "version"]),
    (["calico", "help"], "ADD", Mode.CLI, ["calico", "help"]),
    (["calico", "node", "run"], "ADD", Mode.CLI, ["calico", "node", "run"]),
    (["calico", "bpf", "ifstate", "dump"], "ADD", Mode.CLI, ["calico", "bpf", "ifstate", "dump"]),
    (["calico", "health"], None, Mode.CLI, ["calico", "health"]),
    (["calico", "health"], "", Mode.CLI, ["calico", "health"]),
    (["calico"], None, Mode.CLI, ["calico"]),
    (
        ["/usr/local/bin/calico-node", "component", "felix"],
        None,
        Mode.CLI,
        ["/usr/local/bin/calico-node", "component", "felix"],
    ),
    ([], None, Mode.CLI, []),
]


@pytest.mark.parametrize(("argv", "cni", "mode", "out"), CASES)
def test_mode_table(argv: list[str], cni: str | None, mode: Mode, out: list[str]) -> None:
    assert decide(argv, cni) == Decision(mode, tuple(out))


def test_decide_does_not_mutate_argv() -> None:
    argv = ["calicoctl", "get"]
    decide(argv, None)
    assert argv == ["calicoctl", "get"]
