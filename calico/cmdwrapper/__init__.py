"""Restart-on-129 self-supervision for long-running calico components."""

from calico.cmdwrapper.wrapper import RESTART_RETURN_CODE, wrap_self

__all__ = ["RESTART_RETURN_CODE", "wrap_self"]
