"""The upstream log line shape, parsed back with a regular expression."""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator

import pytest

from calico.logutils import (
    FATAL,
    PANIC,
    TRACE,
    CalicoFormatter,
    LogLevelError,
    configure_early_logging_from_env,
    configure_formatter,
    fields,
    format_value,
    go_quote,
    level_name,
    parse_level,
)

LINE = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2}\.\d{3}) "
    r"\[(?P<level>[A-Z]+)\]\[(?P<pid>\d+)\] "
    r"(?:(?P<component>[a-z-]+)/)?(?P<file>[^ ]+) (?P<line>\d+|<nil>)?: ?"
    r"(?P<msg>.*)$"
)


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    buf = io.StringIO()
    root.handlers = []
    configure_formatter("felix", buf)
    root.setLevel(logging.DEBUG)
    yield buf
    root.handlers = saved_handlers
    root.setLevel(saved_level)


def test_line_shape(captured: io.StringIO) -> None:
    logging.getLogger("t").info(
        "Applying dataplane updates", extra=fields(ifaceName="cali1234", count=3)
    )
    line = captured.getvalue().rstrip("\n")
    m = LINE.match(line)
    assert m, line
    assert m["level"] == "INFO"
    assert int(m["pid"]) == os.getpid()
    assert m["component"] == "felix"
    assert m["file"] == "test_logutils.py"
    assert m["msg"] == 'Applying dataplane updates count=3 ifaceName="cali1234"'


def test_fields_sorted_and_flush_skipped(captured: io.StringIO) -> None:
    logging.getLogger("t").warning("m", extra=fields(zeta=1, alpha="a", __flush__=True, mid=None))
    line = captured.getvalue().strip()
    assert line.endswith(' m alpha="a" mid=<nil> zeta=1')
    assert "[WARNING]" in line


def test_no_component_omits_prefix() -> None:
    rec = logging.LogRecord("x", logging.ERROR, "/a/b/daemon.py", 42, "boom", None, None)
    out = CalicoFormatter("").format(rec)
    assert re.search(r"\[ERROR\]\[\d+\] daemon\.py 42: boom$", out), out


def test_unknown_caller_is_nil() -> None:
    rec = logging.LogRecord("x", logging.INFO, "", 0, "hi", None, None)
    assert CalicoFormatter("typha").format(rec).endswith("typha/<nil>: hi")


def test_milliseconds_are_truncated_and_padded() -> None:
    rec = logging.LogRecord("x", logging.INFO, "f.py", 1, "m", None, None)
    rec.created = 1_700_000_000.0079
    rec.msecs = 7.9
    assert ".007 [INFO]" in CalicoFormatter("c").format(rec)


def test_exception_becomes_error_field(captured: io.StringIO) -> None:
    try:
        raise ValueError("bad thing")
    except ValueError:
        logging.getLogger("t").exception("failed")
    first = captured.getvalue().splitlines()[0]
    assert first.endswith("failed error=bad thing")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("cali1", '"cali1"'),
        ('a"b', '"a\\"b"'),
        ("tab\there", '"tab\\there"'),
        ("\x01", '"\\x01"'),
        ("héllo", '"héllo"'),
        (3, "3"),
        (2.5, "2.5"),
        (True, "true"),
        (None, "<nil>"),
        (ValueError("raw error"), "raw error"),
        ([1, 2], "[1, 2]"),
    ],
)
def test_format_value(value: object, text: str) -> None:
    assert format_value(value) == text


def test_stringer_is_raw() -> None:
    import ipaddress

    assert format_value(ipaddress.ip_address("10.0.0.1")) == "10.0.0.1"
    assert go_quote("") == '""'


@pytest.mark.parametrize(
    ("level", "name"),
    [
        (TRACE, "TRACE"),
        (logging.DEBUG, "DEBUG"),
        (logging.INFO, "INFO"),
        (logging.WARNING, "WARNING"),
        (logging.ERROR, "ERROR"),
        (FATAL, "FATAL"),
        (PANIC, "PANIC"),
        (25, "INFO"),
    ],
)
def test_level_names(level: int, name: str) -> None:
    assert level_name(level) == name


def test_parse_level() -> None:
    assert parse_level("Info") == logging.INFO
    assert parse_level("DEBUG") == logging.DEBUG
    assert parse_level("warn") == logging.WARNING
    assert parse_level("none") > PANIC
    with pytest.raises(LogLevelError, match='invalid log level "loud"'):
        parse_level("loud")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, logging.ERROR),
        ({"FELIX_LOGSEVERITYSCREEN": "info"}, logging.INFO),
        (
            {"FELIX_EARLYLOGSEVERITYSCREEN": "debug", "FELIX_LOGSEVERITYSCREEN": "info"},
            logging.DEBUG,
        ),
        (
            {"FELIX_EARLYLOGSEVERITYSCREEN": "bogus", "FELIX_LOGSEVERITYSCREEN": "warning"},
            logging.WARNING,
        ),
        ({"TYPHA_LOGSEVERITYSCREEN": "debug"}, logging.ERROR),
    ],
)
def test_early_level_from_env(captured: io.StringIO, env: dict[str, str], expected: int) -> None:
    assert configure_early_logging_from_env("felix", environ=env, stream=captured) == expected
    assert logging.getLogger().level == expected


def test_configure_formatter_is_idempotent(captured: io.StringIO) -> None:
    configure_formatter("typha", captured)
    configure_formatter("typha", captured)
    logging.getLogger("t").error("once")
    assert captured.getvalue().count("once") == 1
    assert "typha/test_logutils.py" in captured.getvalue()
