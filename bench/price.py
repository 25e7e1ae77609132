"""Prediction vs measurement for every run in the database: the pricing model's error, honestly.

    .venv/bin/python bench/price.py [--json OUT] [--no-store]

Predicts each successful run on real hardware (the verifier's PyTorch and llama.cpp runs, and runs ingested from
users' servers with --hardware) from the cost model alone (registry.domain.pricing; docs/pricing.md), with the run's own
τ and draft length, so the error is the cost model's, not the acceptance's. A catalog GPU uses its peak bandwidth
at the assumed efficiency (or the efficiency fitted from the OTHER GPU runs once there are two); a CPU or other
device uses the bandwidth fitted from the OTHER runs on the same hardware (leave-one-out, never a run's own).
Stores each prediction with its run unless --no-store, then prints one row per run and the median
absolute error per engine and hardware.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from registry import calibration
from registry.domain import pricing  # noqa: E402
from registry.domain.run import RunPrediction  # noqa: E402
from registry.domain.stored_json import to_json  # noqa: E402
from registry.settings import get_settings  # noqa: E402
from registry.store import Store  # noqa: E402


def _pct(value: float | None) -> str:
    return "     -" if value is None else f"{value:+6.0%}"


def _num(value: float | None, spec: str = "8.2f") -> str:
    return " " * int(spec.split(".")[0]) if value is None else format(value, spec)


def _errors(predictions: list[RunPrediction]) -> list[float]:
    return [abs(e) for p in predictions for e in (p.tokens_per_s_error, p.speedup_error) if e is not None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="Also write the predictions as JSON here.")
    parser.add_argument("--no-store", action="store_true", help="Do not write the predictions into the runs.")
    args = parser.parse_args()
    store = Store.open(get_settings().resolved_database_url)
    predictions = calibration.predict_runs(store)
    if not args.no_store:
        calibration.store_predictions(store, predictions)
    print(f"{'run':12}  {'engine':9} {'hardware':24} {'base pred':>9} {'meas':>8} {'err':>6}  "
          f"{'tok/s pred':>10} {'meas':>8} {'err':>6}  {'S pred':>6} {'meas':>6} {'err':>6}  note")
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for p in predictions:
        print(f"{p.run_id[:12]}  {p.engine[:9]:9} {str(p.hardware)[:24]:24} "
              f"{_num(p.predicted_baseline_tokens_per_s, '9.1f')} {_num(p.measured_baseline_tokens_per_s, '8.1f')} "
              f"{_pct(p.baseline_error)}  {_num(p.predicted_tokens_per_s, '10.1f')} "
              f"{_num(p.measured_tokens_per_s, '8.1f')} {_pct(p.tokens_per_s_error)}  "
              f"{_num(p.predicted_speedup, '6.2f')} {_num(p.measured_speedup, '6.2f')} {_pct(p.speedup_error)}  "
              f"{p.note}")
        for error in (p.tokens_per_s_error, p.speedup_error):
            if error is not None:
                groups[(p.engine, str(p.hardware))].append(abs(error))
    print()
    for (engine, hardware), errors in sorted(groups.items()):
        print(f"{engine} on {hardware}: median |error| {pricing.median(errors):.0%} over {len(errors)} numbers")
    missing = [p for p in predictions if p.predicted_baseline_tokens_per_s is None]
    print(f"{len(predictions) - len(missing)} of {len(predictions)} runs predicted"
          + (f"; not predicted: {len(missing)} (reasons in the note column)" if missing else ""))
    # The same runs under the model without the fitted per-forward overhead (model version 1), so the overhead's
    # effect is measured on the same numbers rather than claimed.
    for label, variant in (("with the fitted per-forward overhead", predictions),
                           ("without it (every forward costs its bytes only)",
                            calibration.predict_runs(store, overhead=False))):
        errors = _errors(variant)
        print(f"median |error| {label}: "
              + (f"{pricing.median(errors):.0%} over {len(errors)} tok/s and speedup numbers" if errors else "-"))
    if args.json:
        args.json.write_text(json.dumps([to_json(p) for p in predictions], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
