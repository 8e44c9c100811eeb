"""``calico.model.processors`` imports a processor's module (and its API models) only when that
kind is first converted (design/performance.md "Imports"). Checked in a fresh interpreter,
since this test process has long imported everything."""

from __future__ import annotations

import json
import subprocess
import sys

from calico.model import processors as p
from calico.model.processors import affinity, config, endpoints, ipam, policy

PROBE = """
import json, sys
import calico.model.processors as p
PREFIXES = ("calico.api.", "calico.model.processors.")
loaded = lambda: sorted(m for m in sys.modules if m.startswith(PREFIXES) or m == "pydantic")
after_import = loaded()
from calico.model.resources import ResourceKey
out = p.process(ResourceKey("Tier", "t1"), {"spec": {"order": 5}})
print(json.dumps({"after_import": after_import, "after_tier": loaded(), "out": repr(out)}))
"""


def test_import_is_light_and_a_kind_loads_only_its_module() -> None:
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    got = json.loads(run.stdout)
    assert "pydantic" not in got["after_import"]
    assert not any(m.startswith("calico.api.") and m != "calico.api.kind_table"
                   for m in got["after_import"])  # fmt: skip
    after = set(got["after_tier"])
    assert {"calico.model.processors.policy", "calico.api.policy", "pydantic"} <= after
    for heavy in ("calico.api.felixconfig", "calico.api.ipam", "calico.api.cluster",
                  "calico.model.processors.config", "calico.model.processors.ipam"):  # fmt: skip
        assert heavy not in after, heavy
    assert "TierKey(name='t1')" in got["out"] and "order=5.0" in got["out"]


def test_lazy_table_is_the_modules_own_functions() -> None:
    assert len(p.PROCESSORS) == 17 and set(p.PROCESSORS) == set(iter(p.PROCESSORS))
    assert p.PROCESSORS["Tier"] is policy.tier
    assert p.PROCESSORS["WorkloadEndpoint"] is endpoints.workload_endpoint
    assert p.PROCESSORS["FelixConfiguration"] is config.felix_configuration
    assert p.PROCESSORS["BlockAffinity"] is affinity.block_affinity
    assert p.PROCESSORS["IPAMBlock"] is ipam.ipam_block
    assert p.rules_v1 is p.PROCESSORS["Profile"].__globals__["rules_v1"]
    for name in p.__all__:
        assert getattr(p, name) is not None, name
    assert "IPPool" in p.PROCESSORS and "BGPPeer" not in p.PROCESSORS
    try:
        p.no_such_processor  # noqa: B018
    except AttributeError as exc:
        assert "no_such_processor" in str(exc)
    else:
        raise AssertionError("unknown names must raise AttributeError")
