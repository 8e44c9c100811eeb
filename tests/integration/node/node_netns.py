"""Helpers to run node commands inside a test network namespace against a temp datastore."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import netns_support

from calico.datastore.client import Client
from calico.datastore.local import LocalBackend

NODE_IP = "10.55.0.7"
NODE_CIDR = f"{NODE_IP}/24"


def ip(*args: str) -> None:
    netns_support.ip(*args)


@dataclass
class NodeHost:
    ns: str
    tmp: Path
    calico: str

    @property
    def db(self) -> Path:
        return self.tmp / "calico.db"

    @property
    def nodename_file(self) -> Path:
        return self.tmp / "nodename"

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CALICO_", "IP", "NODENAME", "NO_DEFAULT", "FELIX_", "AS"))
        }
        env.update(
            DATASTORE_TYPE="local",
            CALICO_DATASTORE_PATH=str(self.db),
            NODENAME="node-a",
            CALICO_NODENAME_FILE=str(self.nodename_file),
        )
        env.update(extra)
        return env

    def argv(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, self.calico, "component", "node", *args]

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), env=self.env(**extra), capture_output=True, text=True, timeout=60
        )

    def query(self, fn: Any) -> Any:
        backend = LocalBackend(str(self.db))
        try:
            return fn(Client(backend))
        finally:
            backend.close()
