"""Helpers shared by the policy/endpoint/io API tests (kept out of conftest on purpose)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from calico.api import DocumentFormatError, Resource, ResourceValidationError, load_documents

MANIFESTS = Path(__file__).parent / "manifests"


def load_one(text: str) -> Resource:
    (res,) = load_documents(textwrap.dedent(text), source="test.yaml")
    return res


def issues(text: str) -> list[str]:
    """The issues (``path: message``) a document is rejected with."""
    with pytest.raises(ResourceValidationError) as info:
        load_documents(textwrap.dedent(text), source="test.yaml")
    return [str(i) for i in info.value.issues]


def decode_error(text: str) -> str:
    """What upstream's decoder says about a document it refuses (after the location)."""
    with pytest.raises(DocumentFormatError) as info:
        load_documents(textwrap.dedent(text), source="test.yaml")
    return str(info.value).split("): ", 1)[1]


def gnp_with_rule(rule_yaml: str, direction: str = "ingress") -> str:
    """A GlobalNetworkPolicy document with one rule (given as YAML, unindented)."""
    body = textwrap.indent(textwrap.dedent(rule_yaml).strip(), "    ")
    body = "  - " + body.lstrip()
    return (
        "apiVersion: projectcalico.org/v3\n"
        "kind: GlobalNetworkPolicy\n"
        "metadata:\n  name: p\n"
        f"spec:\n  {direction}:\n{body}\n"
    )
