"""A CNI-mode process after :func:`calico.cli.main.main` has decided it is one.

The call first goes to the resident daemon (:mod:`calico.cni.daemon`) when one is listening,
which needs nothing beyond the standard library's socket and json; otherwise it runs
in-process (:func:`calico.cni.main.run_plugin`). This module imports nothing heavy at the top
so the daemon path stays an interpreter start plus one round trip.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: typing is not imported on the helper's path
if TYPE_CHECKING:
    from typing import NoReturn


def run(is_ipam: bool, argv: tuple[str, ...] | list[str]) -> NoReturn:
    """Serve one CNI call (``is_ipam``: the calico-ipam plugin) and exit with its code."""
    try:
        data = sys.stdin.buffer.read()
    except OSError:
        data = b""
    from calico.cni import daemon_client

    served = daemon_client.call(daemon_client.wire_mode(is_ipam), argv, data, os.environ)
    if served is not None:
        code, out, err = served
        sys.stderr.write(err)
        sys.stdout.write(out)
    else:
        import io

        from calico.cni.main import run_plugin

        code = run_plugin(is_ipam, stdin=io.BytesIO(data))
    # The reply is written; skip interpreter teardown (~60-80 ms of freeing modules), which
    # matters when a node starts many pods at once. Flush everything first.
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
