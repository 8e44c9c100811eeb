"""Render a golden scenario (base.yaml + <case>/input.yaml [+ env] [+ secrets.yaml]
[+ endpoint-status/]) into a scratch confdir. ``secrets.yaml`` holds Kubernetes Secret
manifests (namespace kube-system) that ``secretKeyRef`` passwords resolve against;
``endpoint-status/`` holds kube-master's endpoint status files (local workload peers);
``k8s.yaml`` the Services and EndpointSlices for per-service advertisement."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from calico.api.io import load_file
from calico.confd import keyspace
from calico.confd.localpeers import LocalWorkload, StatusDir
from calico.confd.peers import PasswordLookup, no_passwords
from calico.confd.renderer import Renderer
from calico.confd.state import BGPState, state_from_resources

ROOT = Path(__file__).resolve().parents[2]
CONFD_FS = ROOT / "node" / "filesystem" / "etc" / "calico" / "confd"
GOLDEN = Path(__file__).resolve().parent / "confd_golden"
FILES = (
    "bird.cfg",
    "bird6.cfg",
    "bird_aggr.cfg",
    "bird6_aggr.cfg",
    "bird_ipam.cfg",
    "bird6_ipam.cfg",
)
NODE = "kube-master"


def scenario_state(case: Path) -> BGPState:
    return state_from_resources(
        load_file(GOLDEN / "base.yaml") + load_file(case / "input.yaml"), NODE
    )


def scenario_env(case: Path) -> dict[str, str]:
    env = {"NODENAME": NODE}
    if (case / "env").exists():
        for line in (case / "env").read_text().splitlines():
            if line.strip():
                k, _, v = line.partition("=")
                env[k.strip()] = v.strip()
    return env


def scenario_passwords(case: Path) -> PasswordLookup:
    import yaml

    from calico.datastore.kubernetes.secrets import DEFAULT_NAMESPACE, secret_data

    path = case / "secrets.yaml"
    if not path.exists():
        return no_passwords
    secrets = {
        doc["metadata"]["name"]: secret_data(doc)
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc["metadata"].get("namespace", DEFAULT_NAMESPACE) == DEFAULT_NAMESPACE
    }
    return lambda name, key: secrets.get(name, {}).get(key)


def scenario_workloads(case: Path) -> list[LocalWorkload]:
    status = StatusDir(case / "endpoint-status")
    status.scan()
    return status.active()


def scenario_k8s(case: Path) -> tuple[dict, dict] | None:
    import yaml

    from calico.datastore.kubernetes.collection import object_key

    path = case / "k8s.yaml"
    if not path.exists():
        return None
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    services = {object_key(d): d for d in docs if d["kind"] == "Service"}
    slices = {object_key(d): d for d in docs if d["kind"] == "EndpointSlice"}
    return services, slices


def make_renderer(confdir: Path, env: dict[str, str], krt_tunnel: bool = False) -> Renderer:
    """A Renderer on a fresh copy of the shipped confdir, with reloads switched off."""
    if confdir.exists():
        shutil.rmtree(confdir)
    shutil.copytree(CONFD_FS, confdir)
    r = Renderer(confdir, NODE, env, krt_tunnel=krt_tunnel)
    r.resources = [dataclasses.replace(res, reload_cmd="") for res in r.resources]
    r.dirty = set(r.resources)
    return r


def render_state(
    state: BGPState,
    confdir: Path,
    env: dict[str, str],
    krt_tunnel: bool = False,
    passwords: PasswordLookup = no_passwords,
    workloads: list[LocalWorkload] | None = None,
    k8s: tuple[dict, dict] | None = None,
) -> Renderer:
    r = make_renderer(confdir, env, krt_tunnel)
    r.update(keyspace.build(state, NODE, env, passwords, workloads, k8s))
    g = state.global_config()
    r.process(g.spec if g else None, state.filters)
    return r
