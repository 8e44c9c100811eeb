"""What the installed launchers run: ``calico``'s entry point, minus the CLI's imports.

Dispatch is exactly :func:`calico.cli.main.main`'s (argv[0] basename and CNI_COMMAND); only a
CLI invocation pays for importing the click tree. A CNI call first goes to the resident daemon
(:mod:`calico.cni.daemon`) when one is listening, which needs nothing beyond the standard
library's socket and json; otherwise it runs in-process. This module imports nothing heavy at
the top so the daemon path stays an interpreter start plus one round trip.
"""

from __future__ import annotations

import os
import sys


def entry(prog: str) -> None:
    from calico.cli.dispatch import Mode, dispatch

    sys.argv[0] = prog
    decision = dispatch(sys.argv, os.environ.get("CNI_COMMAND"))
    if decision.mode is Mode.CLI:
        from calico.cli.main import main

        main()
        return
    try:
        data = sys.stdin.buffer.read()
    except OSError:
        data = b""
    from calico.cni import daemon_client

    served = daemon_client.call(decision.mode.name, decision.argv, data, os.environ)
    if served is not None:
        code, out, err = served
        sys.stderr.write(err)
        sys.stdout.write(out)
    else:
        import io

        from calico.cni.main import run_plugin
        from calico.cni.netsetup import use_lean_pyroute2

        use_lean_pyroute2()
        code = run_plugin(decision.mode, decision.argv, stdin=io.BytesIO(data))
    # The reply is written; skip interpreter teardown (~60-80 ms of freeing modules), which
    # matters when a node starts many pods at once. Flush everything first.
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
