"""A τ regression is found against the previous comparable run only: never across metric definitions."""

from __future__ import annotations

from datetime import timedelta

from registry.domain.regression import metric_version
from registry.store import Store, utcnow
from registry.store.records import RunSpec, SetResult
from registry.store.runs import record_run, regression_event

SETS = (SetResult(prompt_set="code", prompt_set_digest="d"),)


def _run(store: Store, tau: float, minutes_ago: int, version: int | None) -> RunSpec:
    metrics = {} if version is None else {"metric_version": version}
    return record_run(store, RunSpec(target="t/target", drafter="o/drafter", hardware="H200", tau=tau,
                                     metrics=metrics, sets=SETS, created_at=utcnow() - timedelta(minutes=minutes_ago)))


def test_regression_is_found_within_a_metric_version_only(store: Store) -> None:
    old = _run(store, 4.0, minutes_ago=10, version=None)
    first_v2 = _run(store, 3.0, minutes_ago=5, version=2)
    assert (metric_version(old), metric_version(first_v2)) == (1, 2)
    # 4.0 → 3.0 is a 25 % fall, but across metric definitions: no comparison, no alert.
    assert regression_event(store, first_v2) is None

    second_v2 = _run(store, 2.0, minutes_ago=1, version=2)
    event = regression_event(store, second_v2)
    assert event is not None and event.payload["previous_run"] == first_v2.run_id
