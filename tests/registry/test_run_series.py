"""A τ regression is found against the previous comparable run only: never across metric definitions."""

from __future__ import annotations

from datetime import timedelta

from registry.store import Store, utcnow
from registry.store.runs import Run
from tests.registry.run_fixtures import measured

SETS = (measured("code", "d"),)


def _run(store: Store, tau: float, minutes_ago: int, version: int) -> Run:
    # Version 1: the definitions before versions existed (migration 0007 gives unversioned rows 1).
    return store.runs.record_run(Run(target="t/target", drafter="o/drafter", hardware="H200", overall=measured(tau=tau),
                                     metric_version=version, per_set=SETS,
                                     created_at=utcnow() - timedelta(minutes=minutes_ago)))


def test_regression_is_found_within_a_metric_version_only(store: Store) -> None:
    old = _run(store, 4.0, minutes_ago=10, version=1)
    first_v2 = _run(store, 3.0, minutes_ago=5, version=2)
    assert (old.metric_version, first_v2.metric_version) == (1, 2)
    assert (old.tau, first_v2.tau) == (4.0, 3.0)
    # 4.0 → 3.0 is a 25 % fall, but across metric definitions: no comparison, no alert.
    assert store.runs.regression_event(first_v2) is None

    second_v2 = _run(store, 2.0, minutes_ago=1, version=2)
    event = store.runs.regression_event(second_v2)
    assert event is not None and event.payload["previous_run"] == first_v2.run_id
