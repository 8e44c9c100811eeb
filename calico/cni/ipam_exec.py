"""Delegate to an IPAM plugin binary found on CNI_PATH, as the CNI spec describes."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping

from calico.cni.errors import IPAM_FAILURE, CNIError
from calico.cni.netconf import CNIEnv
from calico.cni.types import Result

TIMEOUT = 90.0


def find_plugin(name: str, path: tuple[str, ...]) -> str:
    for directory in path:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise CNIError(IPAM_FAILURE, f"failed to find plugin {name!r} in path {list(path)}")


def exec_ipam(
    name: str, command: str, stdin: bytes, env: CNIEnv, environ: Mapping[str, str]
) -> Result | None:
    """Run ``name`` with ``CNI_COMMAND=command``; its error result is passed through as-is."""
    binary = find_plugin(name, env.path)
    child_env = dict(environ, CNI_COMMAND=command)
    try:
        proc = subprocess.run(
            [binary], input=stdin, capture_output=True, env=child_env, timeout=TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CNIError(IPAM_FAILURE, f"IPAM plugin {name} failed", str(exc)) from None
    out = proc.stdout.decode(errors="replace").strip()
    if proc.returncode != 0:
        try:
            doc = json.loads(out)
            code = int(doc.get("code", IPAM_FAILURE))
            raise CNIError(code, str(doc.get("msg", "")), str(doc.get("details", "")))
        except (ValueError, AttributeError, TypeError):
            detail = out or proc.stderr.decode(errors="replace").strip()
            raise CNIError(
                IPAM_FAILURE, f"IPAM plugin {name} exited {proc.returncode}", detail
            ) from None
    if command != "ADD":
        return None
    try:
        return Result.from_dict(json.loads(out))
    except (ValueError, KeyError, TypeError) as exc:
        raise CNIError(
            IPAM_FAILURE, f"IPAM plugin {name} returned a bad result", str(exc)
        ) from None
