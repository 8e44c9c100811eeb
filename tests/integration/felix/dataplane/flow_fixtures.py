"""Flow-log test helpers shared by the Felix flow tests: a real Goldmane in the host netns
and its ``Flows.List`` as JSON dicts."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness import CALICO, PY, in_ns

LIST = """
import json, sys, grpc
from google.protobuf import json_format
from calico.proto.goldmane import api_pb2 as pb, api_pb2_grpc as pbg
ch = grpc.insecure_channel(sys.argv[1])
res = pbg.FlowsStub(ch).List(pb.FlowListRequest(), timeout=5)
print(json.dumps([json_format.MessageToDict(r.flow, preserving_proto_field_name=True)
                  for r in res.flows]))
"""


@contextlib.contextmanager
def goldmane(host: str, port: int, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        "PORT": str(port),
        "HEALTH_ENABLED": "false",
        "LOG_LEVEL": "info",
        "PATH": "/usr/bin:/bin",
    }
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", host, CALICO, "component", "goldmane"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not re.search(r"gRPC server listening", log_path.read_text()):
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(15)


def listed(host: str, port: int) -> list[dict[str, Any]]:
    out = in_ns(host, PY, "-c", LIST, f"127.0.0.1:{port}").stdout
    return json.loads(out)
