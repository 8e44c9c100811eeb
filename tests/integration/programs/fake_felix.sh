#!/bin/bash
# Stand-in for felix under calico-felix-wrapper.
# FAKE_FELIX_STATE: file to append events to.
# FAKE_FELIX_CODES: space-separated exit codes, one per run (the last repeats).
# FAKE_FELIX_MODE=term: wait for SIGTERM, record it and exit with FAKE_FELIX_CODES;
# record SIGHUP and keep running.
state=${FAKE_FELIX_STATE:?}
echo "run $*" >>"$state"
runs=$(grep -c '^run ' "$state")
read -r -a codes <<<"${FAKE_FELIX_CODES:-0}"
idx=$((runs - 1))
if [ "$idx" -ge "${#codes[@]}" ]; then idx=$((${#codes[@]} - 1)); fi
code=${codes[$idx]}
if [ "${FAKE_FELIX_MODE:-}" = term ]; then
    trap 'echo "got TERM" >>"$state"; exit "$code"' TERM
    trap 'echo "got HUP" >>"$state"' HUP
    echo ready >>"$state"
    while :; do sleep 0.05; done
fi
exit "$code"
