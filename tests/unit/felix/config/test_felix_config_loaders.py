"""Raw sources: FELIX_* environment, the INI file, and local_sources."""

from __future__ import annotations

import logging
import os

import pytest

from calico.felix.config import (
    Source,
    load_env,
    load_file,
    local_sources,
    parse_config_text,
    resolve,
)


def test_env_prefix_and_names_case_insensitive() -> None:
    env = {
        "FELIX_HEALTHPORT": "1",
        "felix_LogSeverityScreen": "debug",
        "Felix_IpInIpMtu": "1400",
        "FELIX_": "ignored",
        "NOT_FELIX_X": "ignored",
        "FELIXHOSTNAME": "ignored",
    }
    assert load_env(env) == {"healthport": "1", "logseverityscreen": "debug", "ipinipmtu": "1400"}


def test_env_values_not_logged(caplog) -> None:
    with caplog.at_level(logging.INFO):
        load_env({"FELIX_ETCDKEYFILE": "s3cret"})
    assert "etcdkeyfile" in caplog.text and "s3cret" not in caplog.text


def test_env_default_is_os_environ(monkeypatch) -> None:
    monkeypatch.setenv("FELIX_LOGPREFIX", "from-os")
    assert load_env()["logprefix"] == "from-os"


def test_env_feeds_resolve() -> None:
    c = resolve({Source.ENVIRONMENT: load_env({"FeLiX_HeAlThEnAbLeD": "true"})}, hostname="h")
    assert c.health_enabled is True and c.source("HealthEnabled") is Source.ENVIRONMENT


def test_ini_sections_flattened() -> None:
    text = """
# comment
TopLevel = 1
[global]
MetadataAddr = None
MetadataPort = None
LogFilePath = None
LogSeveritySys = None
; another comment
[log]
LogSeverityScreen: INFO
HealthPort = "9098"
[DEFAULT]
Extra = x
"""
    assert parse_config_text(text) == {
        "TopLevel": "1",
        "MetadataAddr": "None",
        "MetadataPort": "None",
        "LogFilePath": "None",
        "LogSeveritySys": "None",
        "LogSeverityScreen": "INFO",
        "HealthPort": "9098",
        "Extra": "x",
    }


def test_ini_duplicate_key_later_wins(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        out = parse_config_text("[a]\nX = 1\n[b]\nX = 2\n")
    assert out == {"X": "2"}
    assert "Multiple values" in caplog.text


def test_ini_malformed() -> None:
    with pytest.raises(ValueError, match="invalid config file"):
        parse_config_text("[unterminated\nX=1\n")


def test_missing_file_is_empty(tmp_path) -> None:
    assert load_file(str(tmp_path / "felix.cfg")) == {}


def test_unreadable_file_warns(tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        assert load_file(str(tmp_path)) == {}  # a directory: unreadable as a file
    assert "Failed to read config file" in caplog.text


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read mode-000 files")
def test_permission_denied_warns(tmp_path, caplog) -> None:
    path = tmp_path / "felix.cfg"
    path.write_text("[global]\nX=1\n")
    path.chmod(0)
    with caplog.at_level(logging.WARNING):
        assert load_file(str(path)) == {}
    assert "Failed to read" in caplog.text


def test_malformed_file_warns(tmp_path, caplog) -> None:
    path = tmp_path / "felix.cfg"
    path.write_text("[bad\n")
    with caplog.at_level(logging.WARNING):
        assert load_file(str(path)) == {}
    assert "Ignoring config file" in caplog.text


def test_local_sources_env_beats_file(tmp_path) -> None:
    path = tmp_path / "felix.cfg"
    path.write_text("[global]\nHealthPort = 1111\nLogPrefix = file\n")
    sources = local_sources({"FELIX_HEALTHPORT": "2222"}, str(path))
    c = resolve(sources, hostname="h")
    assert (c.health_port, c.source("HealthPort")) == (2222, Source.ENVIRONMENT)
    assert (c.log_prefix, c.source("LogPrefix")) == ("file", Source.CONFIG_FILE)
