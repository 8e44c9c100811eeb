"""How ``make test`` spreads the suite over pytest-xdist workers.

The kernel tiers share host state (nft tables, netns names, runit dirs, ports), so their tests
must run one at a time and in order; tests/unit is pure Python and safe to spread. With
``-n N --dist loadscope`` every kernel-tier test is in one work unit, so a single worker runs
them serially, in collection order, while the others take unit modules (a module is a unit, so
module fixtures are still built once). xdist hands out the largest units first, and the kernel
unit is by far the largest. Marks (``--dist loadgroup``) are not used: they only work if xdist's
nodeid rewriting sees them, which session 7 found a conftest hook does not guarantee.
"""

from __future__ import annotations

from typing import Any

KERNEL_TIERS = ("tests/integration/", "tests/e2e/")
KERNEL_UNIT = "kernel-tiers"


def work_unit_of(nodeid: str) -> str:
    """The xdist work unit of a test: one for every kernel-tier test, else the test's module."""
    if nodeid.startswith(KERNEL_TIERS):
        return KERNEL_UNIT
    return nodeid.split("::", 1)[0]


def make_scheduler(config: Any, log: Any) -> Any | None:
    """The kernel-serial scheduler for ``--dist loadscope``; None (xdist's own) otherwise."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class KernelSerialScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit_of(nodeid)

    return KernelSerialScheduling(config, log)
