"""BGP passwords (``secretKeyRef``) for the render loop (design/confd.md "Passwords").

Each key-space build resolves passwords through :meth:`SecretPasswords.lookup`, which starts
a watch for every Secret named and remembers which were used; :meth:`SecretPasswords.end`
stops the watches nothing uses any more (upstream's MarkStale/SweepStale) and says whether
to hold the render back: a referenced Secret that has not been listed yet delays rendering by
up to ``wait`` seconds, so BIRD is not given a password-less session that flips a moment
later. After that the peering renders without ``password`` (as upstream, which waits 0.5 s)
and picks it up when the watch delivers it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)
SYNC_WAIT = 3.0


class NoSecretSource:
    """No Kubernetes API to read Secrets from: every referenced password is missing."""

    def begin(self) -> None:
        pass

    def lookup(self, name: str, key: str) -> str | None:
        log.warning(
            "BGP password from Secret %s (key %s) not rendered: no Kubernetes API to read "
            "Secrets from (set KUBECONFIG, or use the Kubernetes datastore)",
            name,
            key,
        )
        return None

    def end(self) -> float | None:
        return None

    def stop(self) -> None:
        pass


class SecretPasswords:
    def __init__(
        self,
        watcher: Any,
        wait: float = SYNC_WAIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``watcher``: a :class:`calico.datastore.kubernetes.secrets.SecretWatcher`."""
        self.watcher, self.wait, self.clock = watcher, wait, clock
        self._first_seen: dict[str, float] = {}
        self._used: set[str] = set()
        self._hold_until: float | None = None

    def begin(self) -> None:
        self._used = set()
        self._hold_until = None

    def lookup(self, name: str, key: str) -> str | None:
        self._used.add(name)
        self.watcher.ensure(name)
        now = self.clock()
        first = self._first_seen.setdefault(name, now)
        synced, data = self.watcher.get(name)
        ns = self.watcher.namespace
        if not synced:
            deadline = first + self.wait
            if now < deadline:
                self._hold_until = min(self._hold_until or deadline, deadline)
            else:
                log.warning("Secret %s/%s not read yet; rendering without its password", ns, name)
            return None
        if data is None:
            log.warning("Can't read BGP password: Secret %s/%s does not exist", ns, name)
            return None
        if key not in data:
            log.warning("Can't read BGP password: Secret %s/%s has no key %s", ns, name, key)
            return None
        return data[key]

    def end(self) -> float | None:
        """Drop unused watches; the monotonic time to hold rendering until, or None."""
        self.watcher.retain(self._used)
        for name in list(self._first_seen):
            if name not in self._used:
                del self._first_seen[name]
        return self._hold_until

    def stop(self) -> None:
        self.watcher.stop()
