#!/bin/sh
# Service body for the runit test: count a run, then ask to be restarted.
echo "run $$" >>"${EXIT129_STATE:?}"
exit 129
