"""Go's ``strconv.ParseBool`` spellings, which upstream's env-var and flag parsing accept
(goldmane, guardian, whisker-backend, the datastore's ``CALICO_*`` settings, calicoctl ipam),
kept in one place so every component accepts exactly the same words. Felix's and Typha's own
config parsers accept a different, case-insensitive set (yes/no too) and do not use this.
"""

from __future__ import annotations

GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def go_bool(text: str) -> bool | None:
    """``text`` as Go parses a bool, or None when Go would refuse it (the caller words the
    error, naming its setting)."""
    if text in GO_TRUE:
        return True
    if text in GO_FALSE:
        return False
    return None


__all__ = ["GO_FALSE", "GO_TRUE", "go_bool"]
