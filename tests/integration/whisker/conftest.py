"""The goldmane and whisker-backend process fixtures (defined in ``tests/whisker_support.py``)."""

from whisker_support import start_goldmane, start_whisker

__all__ = ["start_goldmane", "start_whisker"]
