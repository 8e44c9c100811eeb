"""Every value parser: valid forms, invalid forms and edge cases."""

from __future__ import annotations

import ipaddress
import os
import re

import pytest

from calico.felix.config import netparsers as n
from calico.felix.config import parsers as p
from calico.felix.config.parsers import ParseError
from calico.logutils.levels import DISABLED


@pytest.mark.parametrize("raw", ["true", "TRUE", "1", "yes", "Y", "t"])
def test_bool_true(raw: str) -> None:
    assert p.BoolParser().parse(raw) is True


@pytest.mark.parametrize("raw", ["false", "False", "0", "no", "N", "f"])
def test_bool_false(raw: str) -> None:
    assert p.BoolParser().parse(raw) is False


@pytest.mark.parametrize("raw", ["", "on", "2", " true", "enabled"])
def test_bool_invalid(raw: str) -> None:
    with pytest.raises(ParseError, match="invalid boolean"):
        p.BoolParser().parse(raw)


def test_optional_bool_zero_is_none() -> None:
    assert p.BoolParser(optional=True).zero is None
    assert p.BoolParser().zero is False


@pytest.mark.parametrize(
    ("raw", "value"),
    [("0", 0), ("42", 42), ("-7", -7), ("+3", 3), ("0x10", 16), ("0o17", 15), ("017", 15),
     ("0b101", 5), ("1_000", 1000)],
)  # fmt: skip
def test_int_go_forms(raw: str, value: int) -> None:
    assert p.IntParser().parse(raw) == value


@pytest.mark.parametrize("raw", ["", "1.5", "abc", " 1", "08", "1e3"])
def test_int_invalid(raw: str) -> None:
    with pytest.raises(ParseError, match="invalid int"):
        p.IntParser().parse(raw)


def test_int_range() -> None:
    parser = p.IntParser(lo=0, hi=65535)
    assert parser.parse("0") == 0
    assert parser.parse("65535") == 65535
    with pytest.raises(ParseError, match="at most 65535"):
        parser.parse("65536")
    with pytest.raises(ParseError, match="at least 0"):
        parser.parse("-1")


def test_float() -> None:
    assert p.FloatParser().parse("1.25") == 1.25
    assert p.FloatParser().parse("1e3") == 1000.0
    for bad in ("x", "nan", "inf", ""):
        with pytest.raises(ParseError):
            p.FloatParser().parse(bad)


def test_float_unit_and_bounds_on_the_written_number() -> None:
    parser = p.FloatParser(unit=0.5, lo=1, hi=3)
    assert parser.parse("2") == 1.0
    assert parser.parse("3.9") == 1.95  # bounds compare the integer part, as for seconds
    with pytest.raises(ParseError, match="at most 3"):
        parser.parse("4")
    with pytest.raises(ParseError, match="at least 1"):
        parser.parse("0.9")
    assert parser.format(1.25) == "2.5"


def test_mark_mask_messages() -> None:
    with pytest.raises(ParseError, match=r"^invalid mark: should be 32-bit int$"):
        p.MarkMaskParser().parse("0x100000000")
    with pytest.raises(ParseError, match=r"^invalid mark: should be 32-bit int$"):
        p.MarkMaskParser().parse("ffff")
    with pytest.raises(ParseError, match=r"^invalid mark: needs to have 2 bits set$"):
        p.MarkMaskParser().parse("0x10")


def test_seconds_are_numbers_not_go_durations() -> None:
    seconds = p.SecondsParser()
    assert seconds.parse("90") == 90.0
    assert seconds.parse("0.5") == 0.5
    with pytest.raises(ParseError, match="invalid float"):
        seconds.parse("90s")
    assert p.SecondsParser(unit=0.001).parse("50") == pytest.approx(0.05)
    bounded = p.SecondsParser(lo=1, hi=10)
    with pytest.raises(ParseError, match="at most 10"):
        bounded.parse("11")
    with pytest.raises(ParseError, match="at least 1"):
        bounded.parse("0")


def test_seconds_format() -> None:
    assert p.SecondsParser().format(90.0) == "90"
    assert p.SecondsParser().format(0.25) == "0.25"
    assert p.SecondsParser(unit=0.001).format(0.05) == "50"


def test_choice_is_case_insensitive_and_canonical() -> None:
    parser = p.ChoiceParser(options=("DROP", "RETURN", "ACCEPT"))
    assert parser.parse("drop") == "DROP"
    assert parser.parse("Accept") == "ACCEPT"
    with pytest.raises(ParseError, match="unknown option"):
        parser.parse("REJECT")


def test_pattern() -> None:
    parser = p.PatternParser(regex=re.compile(r"[^:/]+:\d+"), message="invalid URL authority")
    assert parser.parse("127.0.0.1:2379") == "127.0.0.1:2379"
    for bad in ("127.0.0.1", "http://x:1", "x:1\n"):
        with pytest.raises(ParseError, match="invalid URL authority"):
            parser.parse(bad)
    with pytest.raises(ParseError):
        p.PatternParser().parse("two\nlines")


def test_severity_level() -> None:
    assert p.severity_level("") == DISABLED
    assert p.severity_level("WARNING") == 30


def test_regex() -> None:
    assert p.RegexParser().parse("^eth.*").pattern == "^eth.*"
    assert p.RegexParser().parse("").pattern == ""
    assert p.RegexParser(nil_on_empty=True).parse("") is None
    with pytest.raises(ParseError, match="invalid regexp"):
        p.RegexParser().parse("(")


def test_file(tmp_path) -> None:
    existing = tmp_path / "ca.pem"
    existing.write_text("x")
    assert p.FileParser().parse("/no/such/file") == "/no/such/file"
    assert p.FileParser(must_exist=True).parse(str(existing)) == str(existing)
    with pytest.raises(ParseError, match="failed to access"):
        p.FileParser(must_exist=True).parse(str(tmp_path / "missing"))


def test_executable_file(tmp_path, monkeypatch) -> None:
    exe = tmp_path / "plugin"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    parser = p.FileParser(must_exist=True, executable=True)
    assert parser.parse("plugin") == str(exe)
    with pytest.raises(ParseError, match="missing file"):
        parser.parse("no-such-plugin-xyz")


@pytest.mark.parametrize(
    ("raw", "value"), [("0xffff0000", 0xFFFF0000), ("0x3", 3), ("4294967295", 0xFFFFFFFF)]
)
def test_mark_mask(raw: str, value: int) -> None:
    assert p.MarkMaskParser().parse(raw) == value


@pytest.mark.parametrize("raw", ["0x1", "0", "0x100000000", "-3", "ffff"])
def test_mark_mask_invalid(raw: str) -> None:
    with pytest.raises(ParseError, match="invalid mark"):
        p.MarkMaskParser().parse(raw)


def test_mark_mask_format() -> None:
    assert p.MarkMaskParser().format(0xFFFF0000) == "0xffff0000"
    assert p.MarkMaskParser().format(3) == "0x00000003"


def test_key_value_list() -> None:
    parser = p.KeyValueListParser()
    assert parser.parse("a=1, b = two,,c=") == {"a": "1", "b": "two", "c": ""}
    with pytest.raises(ParseError):
        parser.parse("novalue")


def test_key_duration_list() -> None:
    parser = p.KeyDurationListParser()
    assert parser.parse("CalculationGraph=1m30s,InternalDataplaneMainLoop=500ms") == {
        "CalculationGraph": 90.0,
        "InternalDataplaneMainLoop": 0.5,
    }
    with pytest.raises(ParseError, match="CalculationGraph"):
        parser.parse("CalculationGraph=30")
    assert parser.format({"A": 90.0}) == "A=1m30s"


def test_ip() -> None:
    assert n.IPParser().parse("10.0.0.1") == ipaddress.IPv4Address("10.0.0.1")
    assert n.IPParser(version=6).parse("fd00::1") == ipaddress.IPv6Address("fd00::1")
    with pytest.raises(ParseError, match="not an IPv4"):
        n.IPParser().parse("fd00::1")
    with pytest.raises(ParseError, match="invalid IP"):
        n.IPParser().parse("10.0.0.300")


def test_cidr_list() -> None:
    parser = n.CIDRListParser()
    assert parser.parse("10.0.0.1, 192.168.3.7/24,,") == ("10.0.0.1/32", "192.168.3.0/24")
    with pytest.raises(ParseError, match="not v4"):
        parser.parse("fd00::/8")
    with pytest.raises(ParseError, match="invalid CIDR"):
        parser.parse("10.0.0.0/33")


def test_endpoint_list() -> None:
    parser = n.EndpointListParser()
    assert parser.parse("http://a:2379,http://b:2379/") == ("http://a:2379/", "http://b:2379/")
    with pytest.raises(ParseError, match="same scheme"):
        parser.parse("http://a:2379,https://b:2379")
    with pytest.raises(ParseError, match="unsupported URL part"):
        parser.parse("http://a:2379/path")
    with pytest.raises(ParseError, match="unsupported URL part"):
        parser.parse("http://user@a:2379")
    with pytest.raises(ParseError, match="not a valid URL"):
        parser.parse("http://a:99999")


def test_port_list_forms() -> None:
    parser = n.PortListParser()
    assert parser.parse("22, udp:68,TCP:0.0.0.0/0:179,tcp:[fd00::/8]:22,[fd00::1]:80") == (
        n.ProtoPort("tcp", 22),
        n.ProtoPort("udp", 68),
        n.ProtoPort("tcp", 179, "0.0.0.0/0"),
        n.ProtoPort("tcp", 22, "fd00::/8"),
        n.ProtoPort("tcp", 80, "fd00::1/128"),
    )
    assert parser.parse("tcp:10.1.2.3:22") == (n.ProtoPort("tcp", 22, "10.1.2.3/32"),)
    assert parser.parse(",") == ()


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("sctp:22", "unknown protocol"), ("tcp:http", "integers"), ("tcp:70000", "0-65535"),
     ("a:b:c:d", "should be"), ("tcp:300.0.0.0/8:22", "invalid CIDR")],
)  # fmt: skip
def test_port_list_invalid(raw: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        n.PortListParser().parse(raw)


def test_port_list_format() -> None:
    value = (n.ProtoPort("tcp", 22), n.ProtoPort("udp", 53, "10.0.0.0/8"))
    assert n.PortListParser().format(value) == "tcp:22,udp:10.0.0.0/8:53"
    assert n.PortListParser().format((n.ProtoPort("tcp", 1, "fd00::/8"),)) == "tcp:[fd00::/8]:1"
    assert n.PortListParser().format(()) == "none"


def test_port_range() -> None:
    parser = n.PortRangeParser()
    assert parser.parse("8080") == n.PortRange(8080, 8080)
    assert parser.parse("30000:32767") == n.PortRange(30000, 32767)
    for bad in ("http", "10:5", "1:70000", "1-2"):
        with pytest.raises(ParseError, match="not a valid port range"):
            parser.parse(bad)
    assert n.PortRangeListParser().parse("1:2,80") == (n.PortRange(1, 2), n.PortRange(80, 80))
    assert str(n.PortRange(80, 80)) == "80"


def test_route_table_range() -> None:
    assert n.RouteTableRangeParser().parse("1-250") == n.IndexRange(1, 250)
    for bad in ("0-10", "10-5", "1-251", "5"):
        with pytest.raises(ParseError, match="1-250"):
            n.RouteTableRangeParser().parse(bad)


def test_route_table_ranges() -> None:
    parser = n.RouteTableRangesParser()
    assert parser.parse("1-250, 300-400") == (n.IndexRange(1, 250), n.IndexRange(300, 400))
    assert parser.parse("1-10 20-30") == (n.IndexRange(1, 10), n.IndexRange(20, 30))
    with pytest.raises(ParseError, match="greater than max"):
        parser.parse("10-1")
    with pytest.raises(ParseError, match="too many"):
        parser.parse("1-70000")
    with pytest.raises(ParseError, match="list of route-table ranges"):
        parser.parse("junk")


def test_iface_regex_list() -> None:
    parser = n.IfaceRegexListParser()
    pats = parser.parse("kube-ipvs0,/^veth.*/")
    assert [bool(x.search("kube-ipvs0")) for x in pats] == [True, False]
    assert not pats[0].search("kube-ipvs01")
    assert pats[1].search("veth123")
    assert parser.format(pats) == "kube-ipvs0,/^veth.*/"
    for bad in ("bad name", "/(/", "", "a" * 16):
        with pytest.raises(ParseError, match="invalid Linux interface"):
            parser.parse(bad)
