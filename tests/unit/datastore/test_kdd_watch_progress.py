"""The merged bookmark of a multi-collection Kubernetes watch
(``calico.datastore.kubernetes.watch``): never past a revision some served collection has
not reached, never backwards."""

from __future__ import annotations

from calico.datastore.kubernetes.watch import _Progress


def test_merged_bookmark_is_the_slowest_served_collection() -> None:
    p = _Progress(2, 100)
    assert p.bookmark(0, 150) == 100  # collection 1 is still at 100
    assert p.bookmark(1, 120) == 120
    assert p.bookmark(1, 200) == 150  # now collection 0 holds it back
    assert p.bookmark(0, 210) == 200
    assert p.bookmark(0, 210) == 200  # the same again: still sent (a periodic bookmark)


def test_never_backwards() -> None:
    p = _Progress(2, 100)
    assert p.bookmark(0, 300) == 100
    assert p.bookmark(1, 300) == 300
    p.absent(1)
    p.served(1, 250)  # back from 404 at its own (older) revision
    assert p.bookmark(0, 310) is None  # min 250 < 300 sent: nothing
    assert p.bookmark(1, 320) == 310


def test_absent_collections_hold_nothing_back() -> None:
    p = _Progress(3, 100)
    p.absent(2)
    assert p.bookmark(0, 130) == 100
    assert p.bookmark(1, 140) == 130
    p.absent(0)
    p.absent(1)
    assert p.bookmark(2, 90) is None  # the only served collection is below what was sent
    p.served(0, 500)  # back from 404 at 500
    assert p.bookmark(0, 600) is None  # min(600, 90) = 90
