"""A run as scripts read it, the one shape for `drafters runs|verify|compare|ingest --json` and the API's
`/v1/runs`: the run in the store's JSON encoding (registry/domain/stored_json.py) with its prediction; and the one
line a person reads when a measurement finishes (`drafters up`)."""

from __future__ import annotations

from typing import Any

from registry import calibration
from registry.domain.ref_labels import ref_label
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


def _name(ref: str | None) -> str:
    if ref is None:
        return "(baseline)"
    return ref_label(ref)


def result_line(record: Run) -> str:
    """The pair, its speedup with the spread over repeats, τ, and what a slowdown means."""
    pair = f"{_name(record.target)} + {_name(record.drafter)}"
    if record.status != "ok":
        return f"{pair}: failed ({record.failure_reason})"
    spread = record.overall.speedup if record.overall else None
    if spread is not None:
        speedup = f"{spread.median:.2f}× ({spread.minimum:.2f}–{spread.maximum:.2f}, n={spread.n})"
    else:
        speedup = "speedup unknown" if record.speedup is None else f"{record.speedup:.2f}×"
    tau = "τ unknown" if record.tau is None else f"τ {record.tau:.2f}"
    line = f"{pair}: {speedup}, {tau}"
    if record.speedup is not None and record.speedup < 1.0:
        line += " — a slowdown"
        on_cpu = (record.device_name or "").startswith("cpu") or (record.settings is not None
                                                                and record.settings.device == "cpu")
        if on_cpu:
            line += " (tiny models on a CPU: the decode loop's overhead outweighs the forwards it saves)"
    return line
