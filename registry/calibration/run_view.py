"""A run as scripts read it, the one shape for `drafters runs|verify|compare|ingest --json` and the API's
`/v1/runs`: the run in the store's JSON encoding (registry/domain/stored_json.py) with its prediction."""

from __future__ import annotations

from typing import Any

from registry import calibration
from registry.domain.run import Run, RunPrediction
from registry.domain.stored_json import to_json


def run_json(record: Run, prediction: RunPrediction | None = None) -> dict[str, Any]:
    """The run as the store keeps it (`to_json`, the same encoding), with its prediction under the current pricing
    model (`prediction` when given, else the stored one when the current model made it, else none);
    `prediction_source` says which."""
    stored = calibration.stored_prediction(record)
    chosen = prediction or stored
    source = None if chosen is None else "stored with the run" if chosen == stored else "computed on read"
    return {**to_json(record), "prediction": to_json(chosen), "prediction_source": source}
