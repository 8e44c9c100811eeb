"""The plugin's common ADD and DEL load no pydantic, pyroute2, click, typed client or allocator.

Runs the real entry (``calico.cli.main.main``, as the launchers do) in a fresh interpreter in
the test's host namespace, and records ``sys.modules`` at the moment the plugin exits. The
first ADD on a node claims a block through the typed allocator, so the probed calls come
after a warm-up ADD.
"""

from __future__ import annotations

import json
import subprocess
import sys

from cni_fixtures import CNIWorld

from calico.cni.install import package_paths

HEAVY = (
    "pydantic",
    "pydantic_core",
    "pyroute2",
    "click",
    "calico.api.base",
    "calico.datastore.client",
    "calico.ipam.allocator",
    "calico.cli.root",
)

PROBE = """
import json, os, sys
real_exit = os._exit
def probe_exit(code):
    with open(sys.argv[1], "w") as f:
        json.dump(sorted(sys.modules), f)
    real_exit(code)
os._exit = probe_exit
from calico.cli.main import main
main("calico")
"""


def _modules(
    world: CNIWorld, command: str, cid: str, ns: str, daemon_socket: str = "off"
) -> list[str]:
    """sys.modules of one call, started as the launchers start it (-S -P, probed paths)."""
    out = world.tmp / f"modules-{command}-{cid}.json"
    env = world.env(command, cid, ns, CALICO_CNI_DAEMON_SOCKET=daemon_socket)
    prelude = f"import sys; sys.path += {json.dumps(package_paths(sys.executable))}\n"
    res = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            world.host_ns,
            sys.executable,
            "-S",
            "-P",
            "-c",
            prelude + PROBE,
            str(out),
        ],
        input=json.dumps(world.netconf(log_level="info")).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, (res.stdout, res.stderr)
    return json.loads(out.read_text())


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_common_add_and_del_stay_lean(world: CNIWorld) -> None:
    first = world.workload_ns()
    assert world.add("warm1", first).returncode == 0  # claims this node's block (typed)
    ns = world.workload_ns()
    added = _modules(world, "ADD", "lean1", ns)
    assert "calico.cni.lean" in added and "calico.cni.rtnl" in added  # it did the work
    assert _heavy(added) == []
    assert world.handle_ips("testnet.lean1")  # and the address really is held
    deleted = _modules(world, "DEL", "lean1", ns)
    assert _heavy(deleted) == []
    assert world.handle_ips("testnet.lean1") == []
    assert [w.metadata.name for w in world.weps()] == ["node1-cni-warm1-eth0"]


def _warm_modules() -> set[str]:
    code = "import json, sys; from calico.cni.daemon import warm_up; warm_up(); "
    code += "print(json.dumps(sorted(sys.modules)))"
    res = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, timeout=120,
                         check=True, cwd="/")  # fmt: skip
    return set(json.loads(res.stdout))


def test_daemon_warm_up_covers_the_lean_path(world: CNIWorld) -> None:
    """A forked worker should import nothing: everything the lean ADD and DEL load is warm."""
    assert world.add("warm1", world.workload_ns()).returncode == 0
    ns = world.workload_ns()
    used = set(_modules(world, "ADD", "lean2", ns)) | set(_modules(world, "DEL", "lean2", ns))
    missing = sorted(m for m in used - _warm_modules() if m.startswith("calico"))
    # The entry's own modules run in the plugin process, before it hands the call over.
    assert missing == ["calico.cli", "calico.cli.main", "calico.cni.launch", "calico.process_mode"]


def test_first_add_on_a_node_falls_back_to_typed(world: CNIWorld) -> None:
    ns = world.workload_ns()
    added = _modules(world, "ADD", "first1", ns)
    assert "calico.ipam.allocator" in added  # no block yet: the typed allocator claimed one
    assert "pyroute2" not in added
    assert world.handle_ips("testnet.first1")


def test_a_call_the_helper_serves_loads_only_the_client(world: CNIWorld) -> None:
    """Handing a call to the resident helper needs json and a socket: no typing, logging,
    dataclasses or plugin modules in the plugin process."""
    from test_daemon import _start_daemon, _stop

    sock = world.tmp / "cni-daemon.sock"
    proc = _start_daemon(sock, world.host_ns)
    try:
        ns = world.workload_ns()
        used = _modules(world, "ADD", "served1", ns, daemon_socket=str(sock))
    finally:
        _stop(proc)
    assert world.handle_ips("testnet.served1")  # the worker did the ADD
    assert "calico.cni.daemon_client" in used
    for heavy in ("typing", "dataclasses", "logging", "calico.cni.main", "calico.cni.netconf"):
        assert heavy not in used
    assert _heavy(used) == []
