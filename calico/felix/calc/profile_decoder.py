"""ProfileDecoder: Kubernetes namespaces and service accounts reach the datastore as Profiles
(``kns.<ns>``, ``ksa.<ns>.<sa>``) whose labels carry a ``pcns.``/``pcsa.`` prefix; the
dataplane wants them back as namespace / service-account objects with the original labels
(for policy ``namespaceSelector``/``serviceAccountSelector`` matching in the dataplane)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from calico.felix.calc.callbacks import PipelineCallbacks
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import NamespaceID, ServiceAccountID
from calico.model import ResourceKey

if TYPE_CHECKING:  # an annotation only: a lean read's value (leanprofile) reads the same
    from calico.api.endpoints import Profile

NAMESPACE_PROFILE_PREFIX = "kns."
SERVICE_ACCOUNT_PROFILE_PREFIX = "ksa."
NAMESPACE_LABEL_PREFIX = "pcns."
SERVICE_ACCOUNT_LABEL_PREFIX = "pcsa."


def classify(profile_name: str) -> NamespaceID | ServiceAccountID | None:
    """``ksa.<ns>.<sa>`` (namespaces have no dots, so the first dot after the prefix ends
    it; the SA name may contain dots), ``kns.<ns>``, or None for any other profile."""
    if profile_name.startswith(SERVICE_ACCOUNT_PROFILE_PREFIX):
        ns, sep, sa = profile_name[len(SERVICE_ACCOUNT_PROFILE_PREFIX) :].partition(".")
        return ServiceAccountID(name=sa, namespace=ns) if sep and ns and sa else None
    if profile_name.startswith(NAMESPACE_PROFILE_PREFIX):
        ns = profile_name[len(NAMESPACE_PROFILE_PREFIX) :]
        return NamespaceID(ns) if ns else None
    return None


def decode_labels(prefix: str, profile: Profile) -> dict[str, str]:
    """``spec.labelsToApply`` with ``prefix`` stripped where present (others kept as is)."""
    labels = profile.spec.labels_to_apply or {}
    return {k.removeprefix(prefix): v for k, v in labels.items()}


class ProfileDecoder:
    """Registers ResourceKey; acts on kind Profile only. Stateless: every update or delete
    of a recognised profile is forwarded (the sequencer coalesces repeats)."""

    def __init__(self, callbacks: PipelineCallbacks) -> None:
        self._cb = callbacks

    def register(self, fanout: TypeFanout) -> None:
        fanout.register(ResourceKey, self.on_resource)

    def on_resource(self, key: ResourceKey, value: Profile | None) -> None:
        if key.kind != "Profile":
            return
        ident = classify(key.name)
        if isinstance(ident, ServiceAccountID):
            if value is None:
                self._cb.on_service_account_remove(ident)
            else:
                labels = decode_labels(SERVICE_ACCOUNT_LABEL_PREFIX, value)
                self._cb.on_service_account_update(ident, labels)
        elif isinstance(ident, NamespaceID):
            if value is None:
                self._cb.on_namespace_remove(ident)
            else:
                self._cb.on_namespace_update(ident, decode_labels(NAMESPACE_LABEL_PREFIX, value))
