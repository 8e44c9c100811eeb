"""calico.backoff.Backoff: the exact delay sequence, the cap, reset and argument checks."""

from __future__ import annotations

import itertools

import pytest

from calico.backoff import Backoff


def take(backoff: Backoff, n: int) -> list[float]:
    return [backoff.next() for _ in range(n)]


def test_doubles_from_initial_and_stops_exactly_at_the_maximum() -> None:
    assert take(Backoff(1.0, 8.0), 6) == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_a_maximum_between_steps_is_reached_not_overshot() -> None:
    assert take(Backoff(1.0, 5.0), 5) == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_the_users_sequences() -> None:
    # Dataplane apply retries (100 ms doubling to 10 s); doubling a float is exact.
    assert take(Backoff(0.1, 10.0), 9) == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]
    # Felix start-up datastore retries (0.5 s to 5 s) and syncer list retries (1 s to 10 s).
    assert take(Backoff(0.5, 5.0), 6) == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert take(Backoff(1.0, 10.0), 6) == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_initial_equal_to_maximum_is_constant() -> None:
    assert take(Backoff(3.0, 3.0), 3) == [3.0, 3.0, 3.0]


def test_multiplier() -> None:
    assert take(Backoff(1.0, 100.0, multiplier=3.0), 6) == [1.0, 3.0, 9.0, 27.0, 81.0, 100.0]
    assert take(Backoff(2.0, 100.0, multiplier=1.0), 3) == [2.0, 2.0, 2.0]
    assert take(Backoff(1.0, 2.0, multiplier=1.5), 4) == [1.0, 1.5, 2.0, 2.0]


def test_reset_starts_again_from_initial() -> None:
    b = Backoff(0.5, 2.0)
    assert take(b, 4) == [0.5, 1.0, 2.0, 2.0]
    b.reset()
    assert take(b, 2) == [0.5, 1.0]
    b.reset()
    b.reset()  # idempotent
    assert b.next() == 0.5


def test_reset_before_first_use_changes_nothing() -> None:
    b = Backoff(0.5, 2.0)
    b.reset()
    assert take(b, 3) == [0.5, 1.0, 2.0]


def test_never_exceeds_the_maximum_over_many_steps() -> None:
    b = Backoff(0.001, 7.0, multiplier=1.7)
    delays = list(itertools.islice(iter(b.next, None), 200))
    assert max(delays) == 7.0 and delays[-1] == 7.0
    assert all(a <= b for a, b in itertools.pairwise(delays))


@pytest.mark.parametrize(
    ("initial", "maximum", "multiplier"),
    [(0.0, 1.0, 2.0), (-1.0, 1.0, 2.0), (2.0, 1.0, 2.0), (1.0, 2.0, 0.5), (1.0, 2.0, 0.0)],
)
def test_bad_arguments_are_refused(initial: float, maximum: float, multiplier: float) -> None:
    with pytest.raises(ValueError):
        Backoff(initial, maximum, multiplier)


def test_repr_shows_the_state() -> None:
    b = Backoff(1.0, 4.0)
    b.next()
    assert repr(b) == "Backoff(initial=1.0, maximum=4.0, multiplier=2.0, next=2.0)"
