#!/bin/sh
# Stand-in for the `calico` binary: dump argv and environment, then exit.
# FAKE_CALICO_DUMP: file to write to; FAKE_CALICO_RC: exit code (default 0).
{
    echo "argv: $*"
    env | sort
} >"${FAKE_CALICO_DUMP:?FAKE_CALICO_DUMP not set}"
echo "fake calico ran: $*"
echo "fake calico stderr" >&2
exit "${FAKE_CALICO_RC:-0}"
