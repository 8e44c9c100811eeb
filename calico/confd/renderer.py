"""Key space -> files: which templates a change touches, rendering them, installing per BIRD
instance (design/confd.md "Render loop").

The first pass renders everything; afterwards a template renders only when a key under one of
its watched prefixes changed (as upstream's per-prefix revisions). A failed install leaves the
daemon's templates dirty so the caller's retry renders them again.
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from calico.confd import install
from calico.confd.birdconfig import BirdConfig, Builder
from calico.confd.keyspace import KeySpace, changed_keys
from calico.confd.resources import TemplateResource, environment, load_resources

log = logging.getLogger(__name__)
KRT_TUNNEL_ENV = "CALICO_BIRD_KRT_TUNNEL"
_KRT_PROBE = 'router id 1.1.1.1;\nfilter f { krt_tunnel = "tunl0"; accept; }\n'


def bird_has_krt_tunnel(env: Mapping[str, str]) -> bool:
    """Does this BIRD know Calico's ``krt_tunnel`` attribute? ``CALICO_BIRD_KRT_TUNNEL``
    (true/false) decides; otherwise ask ``bird -p`` about a one-line config."""
    forced = env.get(KRT_TUNNEL_ENV, "").lower()
    if forced in ("true", "false"):
        return forced == "true"
    with tempfile.NamedTemporaryFile("w", suffix=".cfg") as f:
        f.write(_KRT_PROBE)
        f.flush()
        try:
            res = subprocess.run(["bird", "-p", "-c", f.name], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return res.returncode == 0


class RenderError(Exception):
    """A template failed to render, or BIRD rejected the result (the old files stay)."""


class Renderer:
    def __init__(
        self,
        confdir: Path,
        nodename: str,
        env: Mapping[str, str],
        keep_stage: bool = False,
        krt_tunnel: bool | None = None,
    ) -> None:
        self.confdir, self.nodename, self.env = confdir, nodename, dict(env)
        self.resources = load_resources(confdir, nodename)
        self.jinja = environment(confdir)
        self.keep_stage = keep_stage
        self.krt_tunnel = bird_has_krt_tunnel(env) if krt_tunnel is None else krt_tunnel
        self.keyspace: KeySpace = {}
        self.dirty: set[TemplateResource] = set(self.resources)
        self.renders = 0  # templates rendered (for tests and the benchmark)
        self.errors: dict[str, str] = {}

    def update(self, ks: KeySpace) -> None:
        """Take a new key space; mark the templates whose watched keys changed."""
        changed = changed_keys(self.keyspace, ks)
        self.keyspace = ks
        for res in self.resources:
            if res not in self.dirty and any(res.watches(k) for k in changed):
                self.dirty.add(res)

    def render(self, res: TemplateResource, state_ctx: dict[str, Any]) -> str:
        self.renders += 1
        try:
            return self.jinja.get_template(res.src).render(**state_ctx)
        except jinja2.TemplateError as exc:
            raise RenderError(f"{res.src}: {exc}") from None

    def context(self, gspec: Any | None, filters: dict[str, Any]) -> dict[str, Any]:
        builder = Builder(self.keyspace, gspec, filters, self.nodename, self.env, self.krt_tunnel)
        cache: dict[int, BirdConfig] = {}

        def get(version: int) -> BirdConfig:
            if version not in cache:
                cache[version] = builder.build(version)
            return cache[version]

        return {
            "getBGPConfig": get,
            "reachableRoutes": lambda v: builder.reachable_routes(get(v)),
            "nodename": self.nodename,
        }

    def process(self, gspec: Any | None, filters: dict[str, Any]) -> list[str]:
        """Render and install every dirty template; the daemons whose files changed.
        RenderError when any daemon's set failed (the others are still installed)."""
        if not self.dirty:
            return []
        ctx = self.context(gspec, filters)
        changed, failures = [], []
        for daemon in sorted({r.daemon for r in self.dirty}):
            todo = [r for r in self.resources if r.daemon == daemon and r in self.dirty]
            others = [r for r in self.resources if r.daemon == daemon and r not in self.dirty]
            try:
                files = [(r, self.render(r, ctx)) for r in todo]
                if install.install_set(files, others, keep_stage=self.keep_stage):
                    changed.append(daemon)
            except (RenderError, install.CheckFailed, OSError) as exc:
                log.error("Not installing the new %s configuration: %s", daemon, exc)
                self.errors[daemon] = str(exc)
                failures.append(str(exc))
                continue
            self.errors.pop(daemon, None)
            self.dirty.difference_update(todo)
        if failures:
            raise RenderError("; ".join(failures))
        return changed
