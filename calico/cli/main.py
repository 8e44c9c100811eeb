"""Entry point of the ``calico`` and ``calicoctl`` console scripts and of the CNI launchers.

The process mode (:mod:`calico.process_mode`) is decided first, from argv[0] and
``CNI_COMMAND``; only then is anything mode-specific imported. The CLI imports the click tree
(:mod:`calico.cli.root`); a CNI call imports only :mod:`calico.cni.launch`, which hands the call
to the resident helper when one listens (standard library only) or runs the plugin in-process.
Keep this module's imports to the standard library and ``calico.process_mode``: every pod
start pays for them.
"""

from __future__ import annotations

import os
import sys

from calico.process_mode import Mode, decide


def main(prog: str | None = None) -> None:
    """Run one process. ``prog`` replaces argv[0]: the CNI launchers name themselves with it,
    since ``python -c`` cannot carry an argv[0] through."""
    if prog is not None:
        sys.argv[0] = prog
    decision = decide(sys.argv, os.environ.get("CNI_COMMAND"))
    if decision.mode is Mode.CLI:
        from calico.codecache import install

        install()  # before the click tree's dataclasses: see calico.codecache
        from calico.gcpause import pause

        pause()  # until the root command's callback: see calico.gcpause
        from calico.cli.root import run_cli

        code = run_cli(list(decision.argv))
        sys.stdout.flush()
        sys.exit(code)
    from calico.cni.launch import run

    run(decision.mode is Mode.CNI_IPAM, decision.argv)


if __name__ == "__main__":  # pragma: no cover
    main()
