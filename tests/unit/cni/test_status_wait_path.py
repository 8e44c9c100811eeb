"""The CNI plugin waits for exactly the file Felix's status writer creates (one name function)."""

from __future__ import annotations

from calico.cni.identity import Identity
from calico.cni.status_wait import status_path
from calico.felix.dataplane.endpoint_status import status_filename
from calico.felix.messages import WorkloadEndpointID
from calico.model.status_files import (
    endpoint_status_filename,
    parse_endpoint_status_filename,
)


def test_cni_and_felix_agree_on_the_status_file() -> None:
    ident = Identity(
        orchestrator="k8s",
        namespace="default",
        workload="nginx 1",
        container_id="c1",
        endpoint="eth0",
        node="n1",
        network="net",
    )
    felix_name = status_filename(WorkloadEndpointID("k8s", "default/nginx 1", "eth0"))
    assert status_path("/run/status", ident) == f"/run/status/{felix_name}"
    assert felix_name == "k8s default%2Fnginx%201 eth0"


def test_names_round_trip() -> None:
    name = endpoint_status_filename("cni", "a b/c", "e~1")
    assert parse_endpoint_status_filename(name) == ("cni", "a b/c", "e~1")
    assert parse_endpoint_status_filename("two fields") is None
