"""Test program for calico.cmdwrapper.wrap_self (driven by environment variables).

WRAPPED_STATE: file the inner process appends one line per event to.
WRAPPED_MODE:  restart (exit 129 on runs 1-2, then 0) | exit (exit WRAPPED_CODE)
               | term (wait for SIGTERM, record it, exit WRAPPED_CODE)
               | selfkill (SIGKILL itself) | sleep (write pid, sleep forever).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path

from calico.cmdwrapper import RESTART_RETURN_CODE, wrap_self

INNER_VAR = "TEST_WRAP_INNER"


def record(line: str) -> None:
    with open(os.environ["WRAPPED_STATE"], "a") as f:
        f.write(line + "\n")


def inner() -> int:
    state = Path(os.environ["WRAPPED_STATE"])
    mode = os.environ.get("WRAPPED_MODE", "restart")
    code = int(os.environ.get("WRAPPED_CODE", "0"))
    record(f"run {INNER_VAR}={os.environ.get(INNER_VAR)} pid={os.getpid()} argv={sys.argv[1:]}")
    if mode == "restart":
        runs = sum(1 for ln in state.read_text().splitlines() if ln.startswith("run "))
        return RESTART_RETURN_CODE if runs <= 2 else 0
    if mode == "exit":
        return code
    if mode == "term":

        def on_term(signum: int, _frame: object) -> None:
            record(f"got signal {signum}")
            sys.stdout.flush()
            os._exit(code)

        signal.signal(signal.SIGTERM, on_term)
        record("ready")
        while True:
            time.sleep(1)
    if mode == "selfkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "sleep":
        record("ready")
        while True:
            time.sleep(1)
    raise SystemExit(f"unknown mode {mode}")


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s"
    )
    sys.exit(wrap_self(INNER_VAR, inner))


if __name__ == "__main__":
    main()
