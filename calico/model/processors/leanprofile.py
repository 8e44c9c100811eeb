"""A stored Profile read without pydantic, for Felix's syncer (design/performance.md "Cold
start: no pydantic on a clean start"): every Kubernetes namespace has a ``kns.<ns>`` profile
(allow-all rules and the namespace's labels), and validating it through the model imported
pydantic at every start.

The contract is ``leanpolicy``'s: a plain Profile (plain ObjectMeta; ``ingress``/``egress``
rules of ``leanpolicy``'s plain shape; ``labelsToApply``) is checked with the validators the
model runs and converted by the processor's own ``endpoints.profile_output``; anything else
answers None and the processor decides. The value under the Profile's ``ResourceKey`` is a
``leanview.LeanResource``: ``spec.labels_to_apply`` (what Felix's ProfileDecoder reads) and
the plain metadata fields are views, anything else (the rules as models, Typha's encoding)
comes from the model, built on first need. ``tests/unit/model/test_lean_node_profile.py``
checks the outputs and the attributes over generated documents.
"""

from __future__ import annotations

from typing import Any

from calico.api import validators as v
from calico.model.processors.common import Output
from calico.model.processors.endpoints import profile_output
from calico.model.processors.leanmeta import Decline, name_of, top
from calico.model.processors.leanpolicy import _rules
from calico.model.processors.leanview import LeanResource, LeanView
from calico.model.resources import ResourceKey

_SPEC = frozenset({"ingress", "egress", "labelsToApply"})
_META_ATTRS = (
    ("labels", "labels"),
    ("annotations", "annotations"),
    ("resourceVersion", "resource_version"),
    ("uid", "uid"),
    ("creationTimestamp", "creation_timestamp"),
)


def _profile_class() -> type:
    from calico.api.endpoints import Profile

    return Profile


def lean_profile(key: ResourceKey, value: Any) -> Output | None:
    """The Profile processor's output for a plain stored Profile, or None."""
    try:
        meta, spec = top(key, value, "Profile", namespaced=False)
        name = name_of(key, meta)
        v.dns1123_subdomain(name)
        if not spec.keys() <= _SPEC:
            return None
        ingress = _rules(spec, "ingress")
        egress = _rules(spec, "egress")
        labels = spec.get("labelsToApply")
        if labels is None:
            if "labelsToApply" in spec:
                return None
        elif type(labels) is not dict or any(type(t) is not str for t in labels.values()):
            return None
        else:
            v.label_map(labels)
    except (Decline, ValueError):
        return None
    res = LeanResource(key, value, _profile_class, {})
    model = res.model
    res.__dict__.update(
        api_version="projectcalico.org/v3",
        kind="Profile",
        metadata=LeanView(
            {attr: meta.get(js) for js, attr in _META_ATTRS} | {"name": name, "namespace": None},
            lambda: model().metadata,
        ),
        spec=LeanView({"labels_to_apply": labels}, lambda: model().spec),
    )
    return profile_output(key, res, ingress, egress)
