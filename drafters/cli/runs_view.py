"""How measured runs are shown: the `--json` shape of a run and the tables of `verify`, `compare` and `runs`."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from drafters.cli import render
from registry import calibration
from registry.calibration.run_view import run_json  # noqa: F401 - the shape `--json` prints, shared with the API
from registry.domain.curve import SpeedupCurve, describe
from registry.domain.json_shapes import versioned
from registry.domain.measurement import SetMeasurement
from registry.domain.ref_labels import ref_label
from registry.domain.run import Run, RunPrediction
from registry.domain.stored_json import to_json


def _speedup_cell(record: Run) -> str:
    """The median with the range (lowest to highest) over repeats, when the run measured them."""
    spread = record.overall.speedup if record.overall else None
    if spread is None:
        return fmt(record.speedup)
    return f"{spread.median:.2f} (range {spread.minimum:.2f}–{spread.maximum:.2f}, n={spread.n})"


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _label(ref: str | None) -> str:
    """Repo ids as they are; local folders by their label (registry.domain.ref_labels: "tiny Qwen3 target (demo)"),
    as the dashboard and the result lines name them, so tables stay readable."""
    return "(baseline)" if ref is None else ref_label(ref)


def _prediction_cell(prediction: RunPrediction | None) -> str:
    """Predicted tok/s (speedup) and their errors against the measurement; a dash where the model could not
    predict the run (the reason is in --json's prediction.note)."""
    if prediction is None or not prediction.predicted:
        return "-"
    if prediction.predicted_tokens_per_s is not None and prediction.tokens_per_s_error is not None:
        cell = f"{prediction.predicted_tokens_per_s:.1f} ({prediction.tokens_per_s_error:+.0%})"
    else:
        cell = f"{prediction.predicted_baseline_tokens_per_s:.1f} base ({_pct(prediction.baseline_error)})"
    if prediction.predicted_speedup is not None:
        cell += f", S {prediction.predicted_speedup:.2f} ({_pct(prediction.speedup_error)})"
    return cell


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def print_runs(records: list[Run], predictions: dict[str, RunPrediction] | None = None) -> None:
    """`predictions` by run id; without them, each run's stored prediction from the current model."""
    if not records:
        render.console.print("no runs stored: `drafters verify TARGET DRAFTER` measures a pair (`drafters up` "
                             "measures every exact pair that fits this machine)")
        return
    chosen = predictions if predictions is not None else {
        r.run_id: p for r in records if (p := calibration.stored_prediction(r)) is not None}
    measured = [r for r in records if r.status == "ok"]
    # The fifteen-column table where it fits with no word broken; else each run as a few labelled lines.
    if measured and render.fits(TABLE_COLUMNS, _table_rows(measured, chosen)):
        _print_table(measured, chosen)
        for r in records:
            if r.status != "ok":
                _print_failure(r)
    else:
        _print_cards(records, chosen)
    for r in measured:
        render.table(
            f"{_label(r.drafter)} on {_label(r.target)} ({r.engine}): per prompt set",
            ["prompt set", "τ", "accept", "speedup (range)", "lossless", "per-position acceptance"],
            [(s.name, fmt(s.tau), fmt(s.acceptance_rate), _set_speedup_cell(s), s.lossless,
              " ".join(f"{m:.2f}" for m in s.per_position_acceptance[:8])) for s in r.per_set],
        )


def _lossless(run: Run) -> str:
    """Lossless, with the decodes that left the baseline only at a tie of the run's dtype (they are exact: at a tie
    either token is the target's argmax)."""
    if run.lossless is None:
        return "-"
    return f"{run.lossless} ({run.ties} {'tie' if run.ties == 1 else 'ties'})" if run.ties else str(run.lossless)


def _memory(run: Run) -> str:
    return f"{run.peak_memory_bytes / 2**20:.0f} MiB" if run.peak_memory_bytes else "-"


def _method(run: Run) -> str:
    """The drafting method; a run without a drafter is the target alone. A failed run that stopped before its
    method was read says so: it is no baseline."""
    if run.method:
        return run.method
    if run.drafter is None:
        return "baseline"
    return "method not read" if run.status != "ok" else "method unknown"


def _print_failure(run: Run) -> None:
    """A failed run on lines of its own: its reason in full, never squeezed into a table cell."""
    render.console.print(render.styled("[bold]{}[/]  {} on {} · {} · {}", run.run_id[:12], _label(run.drafter),
                                       _label(run.target), run.engine, _method(run)))
    render.console.print(render.styled("  [red]failed:[/] {}", run.failure_reason or "no reason recorded"))


def _print_cards(records: list[Run], predictions: dict[str, RunPrediction]) -> None:
    """Each run as labelled lines that fit an 80-column terminal (the same numbers as the wide table)."""
    render.console.print(render.plain("speculative decoding, measured"), style="bold")
    for r in records:
        if r.status != "ok":
            _print_failure(r)
            continue
        render.console.print(render.styled("[bold]{}[/]  {} on {} · {} · {}", r.run_id[:12], _label(r.drafter),
                                           _label(r.target), r.engine, _method(r)))
        lines = [
            f"τ {fmt(r.tau)} (emitted {fmt(r.tau_emitted)}) · accept {fmt(r.acceptance_rate)} · lossless {_lossless(r)}",
            f"tok/s {fmt(r.tokens_per_s, '.1f')} (base {fmt(r.baseline_tokens_per_s, '.1f')}) · speedup "
            f"{_speedup_cell(r)} · efficiency {fmt(r.efficiency)}",
            f"predicted {_prediction_cell(predictions.get(r.run_id))} · peak mem {_memory(r)} · "
            f"metrics v{r.metric_version}",
        ]
        for line in lines:
            render.console.print("  " + render.plain(line))


TABLE_COLUMNS = ["drafter", "engine", "method", "lossless", "τ", "τ emitted", "accept", "base tok/s", "tok/s",
                 "speedup (range)", "efficiency", "predicted tok/s, S (error)", "peak mem", "metrics v", "run"]


def _table_rows(records: list[Run], predictions: dict[str, RunPrediction]) -> list[tuple[object, ...]]:
    return [(_label(r.drafter), r.engine, _method(r), _lossless(r), fmt(r.tau), fmt(r.tau_emitted),
             fmt(r.acceptance_rate), fmt(r.baseline_tokens_per_s, ".1f"), fmt(r.tokens_per_s, ".1f"),
             _speedup_cell(r), fmt(r.efficiency), _prediction_cell(predictions.get(r.run_id)), _memory(r),
             r.metric_version, r.run_id[:12]) for r in records]


def _print_table(records: list[Run], predictions: dict[str, RunPrediction]) -> None:
    render.table("speculative decoding, measured", TABLE_COLUMNS, _table_rows(records, predictions))


def _set_speedup_cell(result: SetMeasurement) -> str:
    if result.speedup is None:
        return "-"
    return f"{result.speedup.median:.2f} (range {result.speedup.minimum:.2f}–{result.speedup.maximum:.2f})"


def curves_json(curves: list[SpeedupCurve]) -> dict[str, Any]:
    """`drafters sweep --json` and `drafters verify --concurrency --json`: the curves as stored, with their
    crossover, the highest level that pays, and each level's speedup."""
    bodies = []
    for curve in curves:
        body = to_json(curve)
        body.update(crossover=curve.crossover, pays_up_to=curve.pays_up_to,
                    speedups=[round(p.speedup, 4) for p in curve.points])
        bodies.append(body)
    return versioned({"curves": bodies})


def print_curves(curves: list[SpeedupCurve]) -> None:
    """One table per curve, what it pays up to, and (several lengths) the speedup against length."""
    for curve in curves:
        thinking = _thinking_label(curve)
        table = Table("concurrency", "tok/s with drafter", "tok/s without", "speedup", "s/token (req.)", "τ",
                      title=render.strip_control(f"{curve.drafter or 'drafter'} on {curve.target}, "
                                                 f"{curve.conditions.max_new_tokens} new tokens{thinking}"))
        for point in curve.points:
            speedup = f"{point.speedup:.2f}×" + ("  slower" if point.speedup <= 1.0 else "")
            table.add_row(str(point.concurrency), f"{point.tokens_per_s:.1f}", f"{point.baseline_tokens_per_s:.1f}",
                          speedup, f"{point.latency_per_token_s:.4f}", f"{point.tau:.2f}" if point.tau else "—")
        render.console.print(table)
        render.console.print(render.strip_control(describe(curve) + f" (curve {curve.curve_id})"), markup=False,
                             highlight=False)
        if curve.conditions.thinking_note:
            render.console.print(render.strip_control(curve.conditions.thinking_note), markup=False, highlight=False)
    by_mode: dict[Any, list[SpeedupCurve]] = {}
    for curve in curves:
        by_mode.setdefault(curve.provenance.get("thinking_asked"), []).append(curve)
    for same_mode in by_mode.values():
        if len(same_mode) > 1:
            lowest = min(same_mode[0].points, key=lambda p: p.concurrency).concurrency
            render.console.print(f"speedup against length at c={lowest}{_thinking_label(same_mode[0])}: " + ", ".join(
                f"{c.conditions.max_new_tokens} tokens "
                f"{next(p.speedup for p in c.points if p.concurrency == lowest):.2f}×" for c in same_mode))


def _thinking_label(curve: SpeedupCurve) -> str:
    """', thinking on' where the template read the switch; ', thinking off asked (unknown)' where it did not."""
    if curve.conditions.thinking is not None:
        return ", thinking on" if curve.conditions.thinking else ", thinking off"
    asked = curve.provenance.get("thinking_asked")
    return "" if asked is None else f", thinking {'on' if asked else 'off'} asked (unknown)"
