"""whisker-backend against a real goldmane process: REST shapes, SSE, hints, TLS, errors."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from guardian_peer import make_cert
from whisker_support import (
    GoldmaneProc,
    WhiskerProc,
    allowed_flow,
    denied_flow,
    push,
)

from calico.proto.goldmane import api_pb2 as pb

Start = Callable[..., Any]


@pytest.fixture
def goldmane(start_goldmane: Start) -> GoldmaneProc:
    return start_goldmane()


@pytest.fixture
def whisker(goldmane: GoldmaneProc, start_whisker: Start) -> WhiskerProc:
    return start_whisker(f"127.0.0.1:{goldmane.port}")


@pytest.fixture
def fed(goldmane: GoldmaneProc, whisker: WhiskerProc) -> str:
    assert push(goldmane.port, [allowed_flow(), denied_flow()]) == 2
    return whisker.url


def get(url: str, path: str, **params: Any) -> requests.Response:
    return requests.get(url + path, params=params, timeout=10)


def test_list_returns_upstreams_flow_response_shape(fed: str) -> None:
    rsp = get(fed, "/flows", filters=json.dumps({"actions": ["Deny"]}))
    assert rsp.status_code == 200
    body = rsp.json()
    assert body["total"] == {"totalPages": 1, "totalResults": 1}
    (flow,) = body["items"]
    assert flow["start_time"].endswith("Z") and flow["end_time"] > flow["start_time"]
    del flow["start_time"], flow["end_time"]
    assert flow == {
        "action": "Deny",
        "source_name": "client-*",
        "source_namespace": "demo",
        "source_labels": "app=client | env=demo",
        "dest_name": "server-*",
        "dest_namespace": "demo",
        "dest_labels": "app=server",
        "protocol": "tcp",
        "dest_port": 81,
        "reporter": "Dst",
        "policies": {
            "enforced": [
                {
                    "kind": "EndOfTier",
                    "name": "",
                    "namespace": "",
                    "tier": "default",
                    "action": "Deny",
                    "policy_index": 1,
                    "rule_index": -1,
                    "trigger": {
                        "kind": "CalicoNetworkPolicy",
                        "name": "allow-http",
                        "namespace": "demo",
                        "tier": "default",
                        "action": "ActionUnspecified",
                        "policy_index": 0,
                        "rule_index": -1,
                        "trigger": None,
                    },
                }
            ],
            "pending": [],
        },
        "packets_in": 3,
        "packets_out": 6,
        "bytes_in": 300,
        "bytes_out": 600,
        # Ours beyond upstream's shape (design/whisker.md): an endpoint source, no samples sent.
        "source_ip": "",
        "source_ips": [],
        "source_ports": [],
    }


def test_list_filters_sorting_and_paging(fed: str) -> None:
    everything = get(fed, "/flows").json()
    assert everything["total"]["totalResults"] == 2
    by_port = {f["dest_port"]: f for f in everything["items"]}
    assert by_port[80]["policies"]["pending"][0]["kind"] == "StagedNetworkPolicy"
    cases: list[tuple[dict[str, Any], list[int]]] = [
        ({"dest_ports": [{"value": 80, "type": "Exact"}]}, [80]),
        ({"actions": ["Allow", "Deny"]}, [80, 81]),
        ({"pending_actions": ["Deny"]}, [80]),
        ({"source_names": [{"value": "client", "type": "Fuzzy"}]}, [80, 81]),
        ({"source_names": [{"value": "client", "type": "Exact"}]}, []),
        ({"policies": [{"name": {"value": "staged-lockdown", "type": "Exact"}}]}, [80]),
        ({"policies": [{"kind": "EndOfTier", "action": "Deny"}]}, [81]),
        ({"reporter": "Src"}, []),
        ({"protocols": [{"value": "udp"}]}, []),
    ]
    for filters, ports in cases:
        items = get(fed, "/flows", filters=json.dumps(filters)).json()["items"]
        assert sorted(f["dest_port"] for f in items) == ports, filters
    page = get(fed, "/flows", page=1, pageSize=1, sortBy="DestName").json()
    assert page["total"] == {"totalPages": 2, "totalResults": 2}
    assert len(page["items"]) == 1
    # The upstream UI's proxy prefix reaches the same API.
    assert get(fed, "/whisker-backend/flows").json()["total"]["totalResults"] == 2


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"filters": "{not json"}, "filters: invalid JSON"),
        ({"filters": '{"colour": []}'}, "filters: unknown field 'colour'"),
        ({"filters": '{"actions": ["Maybe"]}'}, "filters.actions: unknown value 'Maybe'"),
        ({"filters": '{"dest_ports": [{"value": 70000}]}'}, "filters.dest_ports: expected"),
        ({"filters": '{"source_names": [{"value": "a", "type": "Glob"}]}'}, "type: unknown"),
        ({"sortBy": "Colour"}, "sortBy: unknown value 'Colour'"),
        ({"pageSize": "-1"}, "pageSize: must not be negative"),
        ({"startTimeGte": "yesterday"}, "startTimeGte: expected unix seconds or RFC 3339"),
        ({"watch": "perhaps"}, "watch: invalid boolean"),
        ({"startTimeGte": "200", "startTimeLt": "100"}, "must be less than startTimeLt"),
        ({"sortBy": ["DestName", "SourceName"]}, ""),
    ],
)
def test_bad_queries_are_400_with_the_reason(
    whisker: WhiskerProc, params: dict[str, Any], message: str
) -> None:
    rsp = get(whisker.url, "/flows", **params)
    assert rsp.status_code == 400, rsp.text
    assert message in rsp.json()["error"]


def test_filter_hints(fed: str) -> None:
    rsp = get(fed, "/flows-filter-hints", type="PolicyName")
    assert rsp.json() == {
        "total": {"totalPages": 1, "totalResults": 2},
        "items": [{"value": "allow-http"}, {"value": "staged-lockdown"}],
    }
    kinds = get(fed, "/flows-filter-hints", type="PolicyKind").json()["items"]
    assert [k["value"] for k in kinds] == ["CalicoNetworkPolicy", "StagedNetworkPolicy"]
    deny_only = json.dumps({"actions": ["Deny"]})
    rsp = get(fed, "/flows-filter-hints", type="DestNamespace", filters=deny_only)
    assert rsp.json()["items"] == [{"value": "demo"}]
    for params, message in (({}, "type: required"), ({"type": "Colour"}, "unknown filter type")):
        rsp = get(fed, "/flows-filter-hints", **params)
        assert rsp.status_code == 400 and message in rsp.json()["error"]


def sse_events(url: str, params: dict[str, str], want: int) -> Iterator[dict[str, Any]]:
    with requests.get(url + "/flows", params=params, stream=True, timeout=30) as rsp:
        assert rsp.status_code == 200
        assert rsp.headers["Content-Type"] == "text/event-stream"
        seen = 0
        for line in rsp.iter_lines(chunk_size=1, decode_unicode=True):
            if line.startswith("data: "):
                yield json.loads(line[len("data: ") :])
                seen += 1
                if seen == want:
                    return
            assert not line.startswith("error:"), line


@pytest.mark.timeout(90)
def test_watch_streams_backfill_then_new_flows_as_server_sent_events(
    fed: str, goldmane: GoldmaneProc
) -> None:
    params = {"watch": "true", "startTimeGte": "-60"}
    events = sse_events(fed, params, want=3)
    first = [next(events), next(events)]
    assert sorted(f["dest_port"] for f in first) == [80, 81]
    later = allowed_flow()
    later.Key.dest_port = 8080
    assert push(goldmane.port, [later]) == 1
    assert next(events)["dest_port"] == 8080  # 80 and 81 were in one bucket: streamed once
    denied_only = {**params, "filters": json.dumps({"actions": ["Deny"]})}
    assert [f["dest_port"] for f in sse_events(fed, denied_only, want=1)] == [81]


def test_health_ui_and_unknown_paths(whisker: WhiskerProc) -> None:
    assert get(whisker.url, "/health").json() == {"status": "ok"}
    page = get(whisker.url, "/")
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert '<script src="app.js">' in page.text
    for asset, kind in (("/app.js", "text/javascript"), ("/style.css", "text/css")):
        rsp = get(whisker.url, asset)
        assert rsp.status_code == 200 and rsp.headers["Content-Type"].startswith(kind)
    assert get(whisker.url, "/nope").status_code == 404


def test_goldmane_down_is_500_internal_server_error(
    start_whisker: Start, start_goldmane: Start
) -> None:
    gone = start_goldmane()
    port = gone.port
    assert gone.stop() == 0
    w = start_whisker(f"127.0.0.1:{port}")
    rsp = get(w.url, "/flows")
    assert rsp.status_code == 500
    assert rsp.json() == {"error": "Internal Server Error"}
    w.wait_log(r"Goldmane call failed: StatusCode.UNAVAILABLE")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PORT": "eighty"}, "Error: PORT: invalid integer 'eighty'"),
        ({"HOST": "0.0.0.0"}, "Error: HOST: 0.0.0.0 is not a loopback address"),
        ({"SERVER_TLS_CERT_PATH": "/x.crt"}, "must be set together"),
        ({"TLS_CERT_PATH": "/nope.crt", "TLS_KEY_PATH": "/nope.key"}, "cannot read"),
        ({"LOG_LEVEL": "chatty"}, "Error: LOG_LEVEL: unknown level 'chatty'"),
    ],
)
def test_bad_config_is_one_error_line_and_exit_1(
    start_whisker: Start, env: dict[str, str], message: str
) -> None:
    p = start_whisker("127.0.0.1:1", env)
    assert p.proc.wait(30) == 1
    lines = p.log().strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_https_and_mtls_to_goldmane(
    start_goldmane: Start, start_whisker: Start, tmp_path: Path
) -> None:
    ca = make_cert("whisker-ca", ca=True)
    ca_crt, _ = ca.write(tmp_path, "ca")
    gm_crt, gm_key = make_cert("goldmane", ips=("127.0.0.1",), issuer=ca).write(tmp_path, "gm")
    cl_crt, cl_key = make_cert("whisker-backend", issuer=ca).write(tmp_path, "client")
    web_crt, web_key = make_cert("whisker", ips=("127.0.0.1",), issuer=ca).write(tmp_path, "web")
    gm = start_goldmane(
        {"SERVER_CERT_PATH": gm_crt, "SERVER_KEY_PATH": gm_key, "CA_CERT_PATH": ca_crt}
    )
    common = {"SERVER_TLS_CERT_PATH": web_crt, "SERVER_TLS_KEY_PATH": web_key, "HOST": "127.0.0.1"}
    w = start_whisker(
        f"127.0.0.1:{gm.port}",
        {**common, "TLS_CERT_PATH": cl_crt, "TLS_KEY_PATH": cl_key, "CA_CERT_PATH": ca_crt},
    )
    assert w.url.startswith("https://127.0.0.1:")
    w.wait_log(r"mTLS\)")
    rsp = requests.get(w.url + "/flows", verify=ca_crt, timeout=10)
    assert rsp.status_code == 200 and rsp.json()["items"] == []
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(w.url.replace("https:", "http:") + "/flows", timeout=10)
    # Without a client certificate Goldmane refuses the backend: a 500, not a hang or a crash.
    plain = start_whisker(f"127.0.0.1:{gm.port}", {**common, "CA_CERT_PATH": ca_crt})
    assert requests.get(plain.url + "/flows", verify=ca_crt, timeout=20).status_code == 500


def test_sigterm_with_an_open_stream_exits_zero(whisker: WhiskerProc) -> None:
    with requests.get(
        whisker.url + "/flows", params={"watch": "true"}, stream=True, timeout=30
    ) as rsp:
        assert next(rsp.iter_lines(chunk_size=1, decode_unicode=True)) == ": stream open"
        whisker.proc.send_signal(signal.SIGTERM)
        try:
            assert whisker.proc.wait(20) == 0
        except subprocess.TimeoutExpired:
            pytest.fail(f"whisker-backend did not stop:\n{whisker.log()}")
    whisker.wait_log("Received shutdown signal")


def test_source_address_extension_travels_goldmane_to_json(
    goldmane: GoldmaneProc, whisker: WhiskerProc
) -> None:
    external = denied_flow()
    external.Key.source_name, external.Key.source_type = "pub", pb.Network
    external.Key.source_ip = "198.51.100.7"
    external.source_ips[:] = ["198.51.100.7"]
    external.source_ports[:] = [40001, 40000]
    same_but_other_ip = pb.Flow()
    same_but_other_ip.CopyFrom(external)
    same_but_other_ip.Key.source_ip = "198.51.100.8"
    same_but_other_ip.source_ips[:] = ["198.51.100.8"]
    assert push(goldmane.port, [external, same_but_other_ip]) == 2
    items = get(whisker.url, "/flows", filters=json.dumps({"actions": ["Deny"]})).json()["items"]
    by_ip = {f["source_ip"]: f for f in items}
    assert set(by_ip) == {"198.51.100.7", "198.51.100.8"}  # part of the key: two flows
    assert by_ip["198.51.100.7"]["source_ips"] == ["198.51.100.7"]
    assert by_ip["198.51.100.7"]["source_ports"] == [40000, 40001]  # ascending
    assert by_ip["198.51.100.7"]["source_name"] == "PUBLIC NETWORK"
