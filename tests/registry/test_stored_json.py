"""The one JSON encoding of runs: a round trip gives the same typed values back, stored history written before a
field existed still reads, and what JSON cannot hold is written as null."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from registry.domain.measurement import Acceptance, ForwardCosts, RunSettings, spread
from registry.domain.run import Run
from registry.domain.stored_json import from_json, to_json
from tests.registry.run_fixtures import full_run


def test_a_full_run_round_trips_through_json_text() -> None:
    run = full_run(run_id="r1")
    text = json.dumps(to_json(run), allow_nan=False)
    back = from_json(Run, json.loads(text))
    assert back == run
    assert isinstance(back.per_set, tuple) and isinstance(back.overall.acceptance.marginal, tuple)  # type: ignore[union-attr]
    assert back.settings == run.settings and back.prediction == run.prediction


def test_transient_fields_are_neither_written_nor_compared() -> None:
    run = replace(full_run(), generations={"code/0": [1, 2, 3]})
    assert "generations" not in to_json(run)
    assert from_json(Run, to_json(run)).generations == {}


def test_history_written_before_a_field_existed_still_reads() -> None:
    # A stored ForwardCosts without `spread` (it has a default) and an Acceptance without `identity_gap` (it has
    # none: reads as None); a key the type no longer has is ignored.
    costs = from_json(ForwardCosts, {"context_length": 40, "gamma": 3, "target_step_s": 1, "verify_step_s": 2,
                                     "draft_step_s": 0.5, "repeats": 5, "retired_key": "x"})
    assert costs == ForwardCosts(40, 3, 1.0, 2.0, 0.5, 5) and isinstance(costs.target_step_s, float)
    accepted = from_json(Acceptance, {"rounds": 2, "drafted": 4, "accepted": 2, "tau": 2.0, "acceptance_rate": 0.5,
                                      "histogram": [1, 0, 1], "marginal": [0.5, 0.5], "conditional": [0.5, 1.0],
                                      "uniform_draft_length": True})
    assert accepted.identity_gap is None and accepted.histogram == (1, 0, 1)
    assert from_json(RunSettings, {}) == RunSettings()


def test_non_finite_numbers_are_written_as_null_and_bad_shapes_are_refused() -> None:
    encoded = to_json(spread([math.inf]))
    assert encoded["median"] is None and json.dumps(encoded, allow_nan=False)
    with pytest.raises(ValueError, match="RunSettings: expected an object"):
        from_json(RunSettings, [1, 2])
