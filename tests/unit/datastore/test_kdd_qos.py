"""Kubernetes quantities and the pod QoS annotations -> qosControls (upstream's rules)."""

from __future__ import annotations

import logging
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.api import parse_resource
from calico.datastore.kubernetes.native import pods
from calico.datastore.kubernetes.native.qos import clamped_quantity, qos_controls
from calico.datastore.kubernetes.quantity import (
    ERR_FORMAT,
    ERR_SUFFIX,
    QuantityError,
    canonical,
    parse_quantity,
    quantity_value,
)

Q = "qos.projectcalico.org/"
GI4 = 4 * 2**30
TOO_SMALL = "resource specified is too small (less than {0}), setting it to {0}"
TOO_LARGE = "resource specified is too large (more than {0}), setting it to {0}"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1k", 1000),
        ("4Gi", GI4),
        ("1Ki", 1024),
        ("1.01k", 1010),
        ("1.01P", 1010 * 10**12),
        ("1e3", 1000),
        ("1E+3", 1000),
        ("1E", 10**18),
        ("1m", 1),  # 0.001 rounds up
        ("1.5", 2),
        ("1.G", 10**9),
        (".5k", 500),
        ("k", 0),
        ("000", 0),
        ("+7", 7),
        ("-1", -1),
        ("-1.5", -2),
    ],
)
def test_quantity_values(text: str, value: int) -> None:
    assert quantity_value(text) == value


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", ERR_FORMAT),
        ("abc", ERR_FORMAT),
        ("1.5.5", ERR_FORMAT),
        ("1 k", ERR_FORMAT),
        ("1kx", ERR_FORMAT),
        ("1K", ERR_SUFFIX),
        ("1e", ERR_SUFFIX),
        ("1kk", ERR_SUFFIX),
        ("--1", ERR_SUFFIX),
    ],
)
def test_bad_quantities(text: str, error: str) -> None:
    with pytest.raises(QuantityError) as exc:
        parse_quantity(text)
    assert str(exc.value) == error


@given(st.integers(min_value=0, max_value=10**20))
def test_canonical_round_trips(value: int) -> None:
    text = canonical(value)
    assert quantity_value(text) == value
    assert text[-1].isdigit() or int(text[:-1]) % 1000 != 0


@given(
    st.integers(min_value=0, max_value=10**9),
    st.integers(min_value=0, max_value=999),
    st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "e2", "e-2", "m"]),
)
def test_parse_matches_arithmetic(whole: int, frac: int, suffix: str) -> None:
    scale = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 1024, "Mi": 2**20}
    mult = scale.get(suffix) or {"e2": Fraction(100), "e-2": Fraction(1, 100)}.get(
        suffix, Fraction(1, 1000)
    )
    expected = (whole + Fraction(frac, 1000)) * mult
    assert parse_quantity(f"{whole}.{frac:03d}{suffix}") == expected


def test_canonical_limits_in_messages() -> None:
    assert canonical(1010) == "1010"
    assert canonical(1010 * 10**12) == "1010T"
    assert canonical(34359738360) == "34359738360"
    assert canonical(10**8) == "100M"


@pytest.mark.parametrize(
    ("text", "low", "high", "result"),
    [
        ("1k", 1000, 10**15, (1000, None)),
        ("999", 1000, 10**15, (1000, TOO_SMALL.format("1k"))),
        ("1P", 1000, 10**15, (10**15, None)),
        ("1000000000000001", 1000, 10**15, (10**15, TOO_LARGE.format("1P"))),
        ("0", 1, 10**4, (1, TOO_SMALL.format("1"))),
        ("10001", 1, 10**4, (10**4, TOO_LARGE.format("10k"))),
        ("1009", 1010, 101 * 10**13, (1010, TOO_SMALL.format("1010"))),
        ("nope", 1, 10, (0, ERR_FORMAT)),
    ],
)
def test_clamped_quantity(text: str, low: int, high: int, result: tuple[int, str | None]) -> None:
    assert clamped_quantity(text, low, high) == result


# (annotations, expected qosControls, expected errors)
CASES: list[tuple[dict[str, str], dict[str, object] | None, list[str]]] = [
    ({}, None, []),
    ({"other": "1"}, None, []),
    (
        {"kubernetes.io/ingress-bandwidth": "10M"},
        {"ingressBandwidth": 10**7, "ingressBurst": GI4},
        [],
    ),
    (  # calico's annotation wins over kubernetes'
        {"kubernetes.io/egress-bandwidth": "10M", Q + "egressBandwidth": "20M"},
        {"egressBandwidth": 2 * 10**7, "egressBurst": GI4},
        [],
    ),
    (
        {Q + "ingressBandwidth": "1P", Q + "ingressBurst": "34359738360"},
        {"ingressBandwidth": 10**15, "ingressBurst": 34359738360},
        [],
    ),
    (
        {Q + "ingressBandwidth": "2P", Q + "ingressBurst": "34359738361"},
        {"ingressBandwidth": 10**15, "ingressBurst": 34359738360},
        [
            "error parsing ingress bandwidth annotation: " + TOO_LARGE.format("1P"),
            "error parsing ingress burst annotation: " + TOO_LARGE.format("34359738360"),
        ],
    ),
    (  # a bad quantity leaves the control unset (and so no default burst)
        {Q + "egressBandwidth": "fast"},
        None,
        ["error parsing egress bandwidth annotation: " + ERR_FORMAT],
    ),
    (
        {Q + "ingressBurst": "1M"},
        None,
        ["ingress bandwidth must be specified when ingress burst is specified"],
    ),
    (  # peakrate must exceed bandwidth: equal is refused
        {Q + "egressBandwidth": "2k", Q + "egressPeakrate": "2k", Q + "egressMinburst": "1500"},
        {"egressBandwidth": 2000, "egressBurst": GI4},
        [
            "egress peakrate must be greater than egress bandwidth when specified",
            "egress peakrate must be specified when egress minburst is specified",
        ],
    ),
    (
        {
            Q + "ingressBandwidth": "1k",
            Q + "ingressPeakrate": "1.01k",
            Q + "ingressMinburst": "100M",
        },
        {
            "ingressBandwidth": 1000,
            "ingressBurst": GI4,
            "ingressPeakrate": 1010,
            "ingressMinburst": 10**8,
        },
        [],
    ),
    (
        {Q + "ingressPacketRate": "10k", Q + "egressPacketRate": "1", Q + "egressPacketBurst": "0"},
        {
            "ingressPacketRate": 10**4,
            "ingressPacketBurst": 5,
            "egressPacketRate": 1,
            "egressPacketBurst": 1,
        },
        ["error parsing egress packet rate annotation: " + TOO_SMALL.format("1")],
    ),
    (
        {Q + "ingressPacketBurst": "3"},
        None,
        ["ingress packet rate must be specified when ingress packet burst is specified"],
    ),
    (
        {Q + "ingressMaxConnections": "4294967295", Q + "egressMaxConnections": "4294967296"},
        {"ingressMaxConnections": 2**32 - 1, "egressMaxConnections": 2**32 - 1},
        ["error parsing egress max connections annotation: " + TOO_LARGE.format("4294967295")],
    ),
    ({Q + "dscp": "0"}, {"dscp": 0}, []),
    ({Q + "dscp": "63"}, {"dscp": 63}, []),
    ({Q + "dscp": "af11"}, {"dscp": "AF11"}, []),
    ({Q + "dscp": "64"}, None, ["error parsing DSCP annotation: DSCP must be between 0 and 63"]),
    ({Q + "dscp": "256"}, None, ["error parsing DSCP annotation: 256 is not a valid DSCP value"]),
    ({Q + "dscp": "XX"}, None, ["error parsing DSCP annotation: XX is not a valid DSCP value"]),
]


@pytest.mark.parametrize(("annotations", "expected", "errors"), CASES)
def test_qos_controls(
    annotations: dict[str, str], expected: dict[str, object] | None, errors: list[str]
) -> None:
    assert qos_controls(annotations) == (expected, errors)


def _pod(annotations: dict[str, str]) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"podIP": "10.0.0.5"},
    }


def test_pod_to_wep_carries_valid_qos_controls() -> None:
    wep = pods.pod_to_wep(
        _pod({Q + "ingressBandwidth": "10M", Q + "egressPacketRate": "100", Q + "dscp": "EF"})
    )
    assert wep is not None
    assert wep["spec"]["qosControls"] == {
        "ingressBandwidth": 10**7,
        "ingressBurst": GI4,
        "egressPacketRate": 100,
        "egressPacketBurst": 5,
        "dscp": "EF",
    }
    parsed = parse_resource(wep)
    assert parsed.spec.qos_controls.ingress_burst == GI4


def test_bad_qos_annotations_only_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        wep = pods.pod_to_wep(_pod({Q + "ingressBurst": "1M", Q + "egressBandwidth": "x"}))
    assert wep is not None and "qosControls" not in wep["spec"]
    assert "ns/p" in caplog.text
    assert "ingress bandwidth must be specified when ingress burst is specified" in caplog.text


@pytest.mark.parametrize("case", CASES)
def test_every_result_is_a_valid_wep(case: tuple[dict[str, str], object, object]) -> None:
    wep = pods.pod_to_wep(_pod(case[0]))
    assert wep is not None
    parse_resource(wep)
