"""Measurement conditions are part of every series: runs of one pair under another temperature, dtype, draft
length, generation length, prompt set, exactness or model kind never replace or average each other, and a lossy
or overloaded run never feeds pricing or `drafters launch`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest

from dashboard import queries
from registry.calibration import PricingInputError, measured_acceptance
from registry.calibration.launch_inputs import _acceptance, pick_gpu
from registry.domain.conditions import comparable, conditions_of, pricing_problem, series_key
from registry.domain.launch import PairFacts
from registry.domain.measurement import RunSettings
from registry.store import Store, utcnow
from registry.store.read_queries import ReadOnlyQueries
from registry.store.runs import Run
from tests.registry.run_fixtures import measured

TARGET, DRAFTER = "t/target", "o/drafter"
PROVENANCE = {"prompt_sets_digest": "digest-a", "test_model": False, "machine_load": {"contended": False}}


@pytest.fixture
def db(store: Store, database_url: str) -> Iterator[ReadOnlyQueries]:
    opened = ReadOnlyQueries(database_url)
    yield opened
    opened.close()


def _run(*, tau: float = 3.0, speedup: float = 2.0, minutes_ago: int = 0, lossless: bool | None = True,
         provenance: dict | None = None, draft_length: int = 3, **settings: object) -> Run:
    return Run(target=TARGET, drafter=DRAFTER, method="draft-lm", hardware="H200", engine="pytorch",
               draft_length=draft_length, settings=RunSettings(**{"dtype": "bfloat16", **settings}),  # type: ignore[arg-type]
               overall=measured(tau=tau, marginal=(0.9, 0.6, tau - 2.5), speedup=speedup),
               per_set=(measured("code", "d", tau=tau, marginal=(0.9, 0.6, tau - 2.5), speedup=speedup),),
               lossless=lossless, provenance={**PROVENANCE, **(provenance or {})},
               created_at=utcnow() - timedelta(minutes=minutes_ago))


@pytest.mark.parametrize("change", [
    {"temperature": 0.7}, {"dtype": "float32"}, {"draft_length": 5}, {"max_new_tokens": 1024},
    {"provenance": {"prompt_sets_digest": "digest-b"}}, {"lossless": False}, {"provenance": {"test_model": True}},
])
def test_each_condition_makes_another_series(change: dict) -> None:
    base = _run()
    other = _run(**change)
    assert not comparable(base, other) and series_key(base) != series_key(other)
    assert conditions_of(base).label() != conditions_of(other).label()
    assert comparable(base, _run(minutes_ago=5, tau=2.0, speedup=1.0))  # the numbers are not the conditions


def test_the_dashboard_keeps_conditions_apart_and_names_them(store: Store, db: ReadOnlyQueries) -> None:
    store.runs.record_run(_run(speedup=2.0, minutes_ago=10))  # bfloat16
    store.runs.record_run(_run(speedup=1.5, minutes_ago=5, dtype="float32"))
    store.runs.record_run(_run(speedup=1.2, minutes_ago=1, temperature=1.0))
    latest = queries.latest_speedups(db)
    # Three series, each its own row: the newest run did not replace the bf16 or float32 greedy numbers.
    assert sorted(latest["speedup"]) == [1.2, 1.5, 2.0]
    labels = dict(zip(latest["speedup"], latest["conditions"], strict=True))
    assert labels[2.0].startswith("T=0 · bfloat16 · γ=3 · 512 new tokens · prompts digest-a · lossless · checkpoint")
    assert labels[1.5].startswith("T=0 · float32 ·") and labels[1.2].startswith("T=1 · bfloat16 ·")
    summary = queries.benchmark_summary(db, target=TARGET, drafter=DRAFTER)
    assert sorted(summary["speedup_mean"]) == [1.2, 1.5, 2.0] and set(summary["runs"]) == {1}
    history = queries.benchmark_history(db, TARGET, DRAFTER)
    assert history["series"].nunique() == 3


def test_a_regression_alert_compares_within_the_conditions_only(store: Store) -> None:
    store.runs.record_run(_run(tau=4.0, minutes_ago=10, dtype="float32"))
    bf16 = store.runs.record_run(_run(tau=3.0, minutes_ago=5))
    assert store.runs.regression_event(bf16) is None  # 4.0 → 3.0 across dtypes: not compared
    worse = store.runs.record_run(_run(tau=2.6, minutes_ago=1))
    event = store.runs.regression_event(worse)
    assert event is not None and event.payload["previous_run"] == bf16.run_id


@pytest.mark.parametrize("flaw, reason", [
    ({"lossless": False}, "not lossless"),
    ({"provenance": {"machine_load": {"contended": True, "cpus": 2, "load_average": [9.0, 9.0]}}}, "overloaded"),
])
def test_a_lossy_or_overloaded_run_never_feeds_pricing_or_launch(store: Store, flaw: dict, reason: str) -> None:
    good = store.runs.record_run(replace(_run(tau=3.0, minutes_ago=10), engine="vllm"))
    bad = store.runs.record_run(replace(_run(tau=3.4, minutes_ago=1, **flaw), engine="vllm"))
    assert pricing_problem(good) is None and reason in (pricing_problem(bad) or "")
    # The newest run is the flawed one; pricing and launch take the older sound one.
    assert measured_acceptance(store, TARGET, DRAFTER).run_id == good.run_id
    pair = PairFacts(target=TARGET, target_sha=None, drafter=DRAFTER, drafter_sha=None, method="draft-lm",
                     block_size=None, built_in=False, gguf=False, target_family=None, eagle3_layers=None,
                     drafter_config_read=False, layout=None)
    h200 = pick_gpu("H200")
    chosen = _acceptance(store, pair, "vllm", h200, store.runs.list_runs(target=TARGET), None)
    assert chosen is not None and chosen.run_id == good.run_id
    assert _acceptance(store, pair, "vllm", h200,
                       [r for r in store.runs.list_runs(target=TARGET) if r.run_id == bad.run_id], None) is None


def test_pricing_says_why_when_every_run_is_flawed(store: Store) -> None:
    store.runs.record_run(_run(lossless=False))
    with pytest.raises(PricingInputError, match="not lossless"):
        measured_acceptance(store, TARGET, DRAFTER)
