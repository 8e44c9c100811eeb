"""Upstream's defaults for the Felix parameters that decide host endpoint traffic, shared by
Felix's parameter table and ``calicoctl explain`` (which must assume what Felix assumes when
no FelixConfiguration sets them). A light module: explain imports it without pydantic."""

FAILSAFE_INBOUND_HOST_PORTS = (
    "tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
)
FAILSAFE_OUTBOUND_HOST_PORTS = (
    "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
)
DEFAULT_ENDPOINT_TO_HOST_ACTION = "DROP"
