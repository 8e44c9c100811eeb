"""Keys Felix writes to report its own and its endpoints' status (etcd mode only).

The process-status and workload-status keys live under ``/calico/felix/v2/<region>/`` so that
hosts in different regions never share a subtree; the region string is Felix's
(``no-region`` or ``region-<name>``). Host endpoint status stayed on the older v1 path.
"""

from __future__ import annotations

from dataclasses import dataclass

from calico.model.base import Key, cached_hash, esc, seg

NO_REGION = "no-region"


@cached_hash
@dataclass(frozen=True, slots=True)
class HostEndpointStatusKey(Key):
    """Status of one host endpoint (``/calico/felix/v1/host/<h>/endpoint/<ep>``)."""

    hostname: str
    endpoint_id: str

    def default_path(self) -> str:
        host = seg(self, "hostname", self.hostname)
        return f"/calico/felix/v1/host/{host}/endpoint/{esc(self, 'endpoint_id', self.endpoint_id)}"


@cached_hash
@dataclass(frozen=True, slots=True)
class WorkloadEndpointStatusKey(Key):
    """Status of one workload endpoint, mirroring ``WorkloadEndpointKey``'s fields."""

    hostname: str
    orchestrator_id: str
    workload_id: str
    endpoint_id: str
    region: str = NO_REGION

    def default_path(self) -> str:
        return (
            f"/calico/felix/v2/{seg(self, 'region', self.region)}"
            f"/host/{seg(self, 'hostname', self.hostname)}"
            f"/workload/{esc(self, 'orchestrator_id', self.orchestrator_id)}"
            f"/{esc(self, 'workload_id', self.workload_id)}"
            f"/endpoint/{esc(self, 'endpoint_id', self.endpoint_id)}"
        )


@cached_hash
@dataclass(frozen=True, slots=True)
class ActiveStatusReportKey(Key):
    """Felix's live status report (written with a TTL, so it vanishes when Felix dies)."""

    hostname: str
    region: str = NO_REGION

    def default_path(self) -> str:
        region = seg(self, "region", self.region)
        return f"/calico/felix/v2/{region}/host/{seg(self, 'hostname', self.hostname)}/status"


@cached_hash
@dataclass(frozen=True, slots=True)
class LastStatusReportKey(Key):
    """Felix's most recent status report (no TTL: survives Felix)."""

    hostname: str
    region: str = NO_REGION

    def default_path(self) -> str:
        region = seg(self, "region", self.region)
        host = seg(self, "hostname", self.hostname)
        return f"/calico/felix/v2/{region}/host/{host}/last_reported_status"
