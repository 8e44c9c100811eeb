"""pydantic's plugin loader: no ``importlib.metadata`` import while every plugin is disabled,
pydantic's own loader (and so its own behaviour) as soon as the switch says otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, os, sys
from calico.api import ResourceValidationError, pydantic_plugins
from calico.api.io import parse_resource

def error(kind, spec):
    doc = {"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": {"name": "x1"},
           "spec": spec}
    try:
        parse_resource(doc)
    except ResourceValidationError as exc:
        return str(exc)

def state():
    loader = sys.modules["pydantic.plugin._loader"]
    return {"metadata": "importlib.metadata" in sys.modules,
            "stand_in": loader.get_plugins is pydantic_plugins.get_plugins,
            "env": os.environ.get("PYDANTIC_DISABLE_PLUGINS")}

out = {"error": error("Tier", {"order": "x"}), **state()}
if len(sys.argv) > 1:  # the switch changes at run time: the next schema build hands over
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = sys.argv[1]
    out["later_error"] = error("Profile", {"labelsToApply": 5})
    out["later"] = state()
print(json.dumps(out))
"""


def probe(*args: str, **env: str | None) -> dict:
    child = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    child.update({k: v for k, v in env.items() if v is not None})
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=child, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("value", [None, "__all__", "1", "true"])
def test_all_disabled_builds_schemas_without_importlib_metadata(value: str | None) -> None:
    got = probe(PYDANTIC_DISABLE_PLUGINS=value)
    assert (got["metadata"], got["stand_in"], got["env"]) == (False, True, value or "__all__")
    assert "order" in got["error"]


def test_a_plugin_list_gets_pydantics_own_loader_and_the_same_errors() -> None:
    mine, theirs = probe(), probe(PYDANTIC_DISABLE_PLUGINS="someplugin")
    assert (theirs["metadata"], theirs["stand_in"], theirs["env"]) == (True, False, "someplugin")
    assert mine["error"] == theirs["error"]


def test_the_stand_in_hands_over_when_the_switch_changes() -> None:
    got = probe("someplugin")
    assert (got["stand_in"], got["metadata"]) == (True, False)
    assert got["later"] == {"metadata": True, "stand_in": False, "env": "someplugin"}
    assert "labelsToApply" in got["later_error"]
    assert got["later_error"] == probe("someplugin", PYDANTIC_DISABLE_PLUGINS="x")["later_error"]
