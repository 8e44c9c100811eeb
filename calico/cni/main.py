"""CNI entry point: env + stdin in, one JSON document on stdout, exit code out.

Never a traceback: every failure becomes a CNI error result (``cniVersion``, ``code``, ``msg``,
``details``) with a non-zero exit; the traceback goes to the log at debug level. Logs go to the
netconf's ``log_file_path`` if set, else stderr (stdout belongs to the protocol).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, BinaryIO, TextIO

from calico.cni.errors import PLUGIN_FAILURE, CNIError
from calico.cni.types import CURRENT_VERSION, SUPPORTED_VERSIONS, version_result

log = logging.getLogger("calico.cni")

IPAM_COMPONENT = "calico-ipam"
PLUGIN_COMPONENT = "cni-plugin"


def _requested_version(stdin: bytes) -> str:
    try:
        doc = json.loads(stdin)
        version = doc.get("cniVersion") if isinstance(doc, dict) else None
    except (ValueError, UnicodeDecodeError):
        return CURRENT_VERSION
    return version if isinstance(version, str) and version else CURRENT_VERSION


def _setup_logging(stdin: bytes, component: str, stderr: TextIO) -> None:
    """Level and destination from the netconf (best effort: a bad netconf logs to stderr)."""
    from calico.logutils import CalicoFormatter, LogLevelError, parse_level

    level, path = logging.INFO, ""
    try:
        doc = json.loads(stdin)
        if isinstance(doc, dict):
            if isinstance(doc.get("log_level"), str) and doc["log_level"]:
                level = parse_level(doc["log_level"])
            if isinstance(doc.get("log_file_path"), str):
                path = doc["log_file_path"]
    except (ValueError, UnicodeDecodeError, LogLevelError):
        pass
    handler: logging.Handler
    if path:
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            handler = logging.FileHandler(path)
        except OSError:
            handler = logging.StreamHandler(stderr)
    else:
        handler = logging.StreamHandler(stderr)
    handler.setFormatter(CalicoFormatter(component))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("pyroute2", "asyncio"):  # per-message netlink dumps drown our own lines
        logging.getLogger(noisy).setLevel(max(level, logging.INFO))


def handle(
    is_ipam: bool, stdin: bytes, environ: Mapping[str, str]
) -> tuple[int, dict[str, Any] | None]:
    """Run one invocation; returns (exit code, document to print or None)."""
    version = _requested_version(stdin)
    reply_version = version if version in SUPPORTED_VERSIONS else CURRENT_VERSION
    try:
        from calico.cni.netconf import parse_env

        env = parse_env(environ)
        if env.command == "VERSION":
            return 0, version_result(version)
        if env.command in ("GC", "STATUS"):
            return 0, None  # nothing to collect or report; both are 1.1.0 verbs
        from calico.cni import plugin

        call = plugin.prepare(stdin, environ, need_ipam_type=not is_ipam)
        if is_ipam:
            return _ipam_verb(call)
        if env.command == "ADD":
            return 0, plugin.cmd_add(call).to_dict(call.conf.cni_version)
        if env.command == "DEL":
            plugin.cmd_del(call)
            return 0, None
        plugin.cmd_check(call)
        return 0, None
    except CNIError as exc:
        log.error("%s %s", exc, f"(code {exc.code})")
        return 1, exc.to_dict(reply_version)
    except Exception as exc:
        log.debug("Unexpected failure", exc_info=True)
        log.error("Unexpected failure: %s", exc)
        err = CNIError(PLUGIN_FAILURE, str(exc) or type(exc).__name__, type(exc).__name__)
        return 1, err.to_dict(reply_version)


def _ipam_verb(call: Any) -> tuple[int, dict[str, Any] | None]:
    from calico.cni import ipam_plugin
    from calico.cni.plugin import ready_store

    command = call.env.command
    if command == "CHECK":
        raise CNIError(PLUGIN_FAILURE, "calico-ipam does not implement CHECK")
    with ready_store(call.conf) as store:
        if command == "ADD":
            result = ipam_plugin.add(store, call.conf, call.env, call.ident)
            return 0, result.to_dict(call.conf.cni_version)
        ipam_plugin.delete(store, call.conf, call.ident)
    return 0, None


def run_plugin(
    is_ipam: bool,
    *,
    stdin: BinaryIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Serve one call in this process: the calico-ipam plugin when ``is_ipam``, else calico.

    Returns the exit code; the reply document (if any) is written to ``stdout``.
    """
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    environ = os.environ if environ is None else environ
    try:
        data = stdin.read()
    except OSError:
        data = b""
    _setup_logging(data, IPAM_COMPONENT if is_ipam else PLUGIN_COMPONENT, stderr)
    code, doc = handle(is_ipam, data, environ)
    if doc is not None:
        stdout.write(json.dumps(doc) + "\n")
    stdout.flush()
    return code
