"""Process health: one aggregator per process, served on /liveness and /readiness."""

from calico.health.aggregator import HealthAggregator, HealthSummary, UnknownReporterError
from calico.health.server import HealthServer

__all__ = ["HealthAggregator", "HealthServer", "HealthSummary", "UnknownReporterError"]
