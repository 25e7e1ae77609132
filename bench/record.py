"""What recording one measured run costs with 100, 1,000, 10,000 and 100,000 runs already stored on its machine
(SQLite): a one-box `drafters up` that has measured for months.

    .venv/bin/python bench/record.py [--sizes 100,1000,10000,100000] [--records 20] [--reference-max 10000]

Recording = registry.recording.record_measurement: the run, its regression check and event, and the
pricing model's prediction of it, in one transaction. The prediction is fitted from the FIT_SAMPLE most recent
runs of the run's fit group (its machine; for a catalog GPU, every catalog GPU), so the registry is seeded with
real history where it hurts: `size` runs on one machine (`host-0`) and `size` runs on catalog GPUs, copies of one
measured run made by bulk inserts (the bench measures recording, not loading). Each size records --records new
runs on the machine (after one untimed), then as many on a catalog GPU.

The reference, measured in the same run on the same database: recording before issue 31, which fitted the
prediction from every stored run of the group (each decoded), up to --reference-max runs on the machine.
Ratio = ms per record / the smallest registry's ms of the same kind (the goal is flat: at most 1.5).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from registry import calibration
from registry.domain.gpus import load_gpus
from registry.domain.measurement import Acceptance, ForwardCosts, RunSettings, SetMeasurement, spread
from registry.domain.run import Run
from registry.recording import record_measurement
from registry.store import Store
from registry.store.seed import copy_run

T0 = datetime(2026, 11, 1, tzinfo=UTC)
GPU_NAMES = ("H100 SXM", "RTX 4090", "A100 80GB", "H200")


def template(hardware: str, minutes: int, run_id: str | None = None) -> Run:
    """One measured pytorch run of a catalog pair, forward costs included (what the fits read)."""
    marginal = (0.9, 0.8, 0.65, 0.5)
    overall = SetMeasurement(
        name="overall", digest="bench", prompts=10,
        acceptance=Acceptance(rounds=100, drafted=400, accepted=285, tau=3.85, acceptance_rate=0.7125, histogram=(),
                              marginal=marginal, conditional=(None,) * 4, uniform_draft_length=True,
                              identity_gap=0.0),
        baseline_tokens_per_s=spread([30.0 + minutes % 7]), tokens_per_s=spread([60.0 + minutes % 5]),
        speedup=spread([2.0]))
    return Run(
        target="Qwen/Qwen3-8B", drafter="z-lab/Qwen3-8B-DFlash-b16", engine="pytorch", method="dflash",
        draft_length=4, settings=RunSettings(max_new_tokens=64, repeats=3, dtype="bfloat16", seed=0),
        overall=overall, per_set=(replace(overall, name="code", digest="digest-code"),),
        forward_costs=ForwardCosts.from_timings(32, 4, [0.0185 + 0.0001 * (minutes % 9)], [0.035],
                                                [0.01675 + 0.0001 * (minutes % 4)]),
        hardware=hardware, lossless=True, created_at=T0 + timedelta(minutes=minutes), run_id=run_id)


def seed(store: Store, runs: int) -> None:
    """`runs` stored runs on `host-0` and as many on catalog GPUs, by bulk insert."""
    recorded = store.runs.record_run(template("host-0", 0, run_id="seed-template"))
    copy_run(store, recorded.run_id, ({"run_id": f"seed-{n:07d}", "created_at": T0 + timedelta(seconds=n),
                                       "hardware": GPU_NAMES[n % len(GPU_NAMES)] if n % 2 else "host-0"}
                                      for n in range(1, 2 * runs)))


def at(run: Run, seconds: int) -> Run:
    """The run stored `seconds` after T0: after every seeded run, so that it is its machine's newest."""
    return replace(run, created_at=T0 + timedelta(seconds=seconds))


def before_issue_31(store: Store, run: Run) -> Run:
    """Recording as it was before issue 31: the same unit of work, with a prediction fitted from every stored run
    of the run's machine (each one read and decoded), not the most recent FIT_SAMPLE."""
    with store.unit():
        record = store.runs.record_run(run)
        event = store.runs.regression_event(record)
        if event is not None:
            store.events.record_event(event)
        group = [r for r in store.runs.list_runs(hardware=record.hardware, status="ok") if r.run_id != record.run_id]
        known: dict[tuple[str, bool], calibration.SideFacts] = {}
        prepared = {r.run_id: calibration._run_bytes(store, r, known) for r in group}
        prediction = calibration._predict(record, calibration._run_bytes(store, record, known), prepared,
                                          load_gpus(), overhead=True)
        store.runs.set_predictions({record.run_id: prediction})
        return replace(record, prediction=prediction)


def timed(record: object, store: Store, runs: list[Run]) -> tuple[float, list[Run]]:
    """Median ms per record, and what was recorded."""
    times, done = [], []
    for run in runs:
        start = time.perf_counter()
        done.append(record(store, run))  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--reference-max", type=int, default=10000)
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            store = Store.open(f"sqlite:///{Path(folder) / 'registry.db'}")
            start = time.perf_counter()
            seed(store, size)
            seeded_s = time.perf_counter() - start
            second = 2 * size + 10
            # Warm-up, not timed: the first record loads the GPU and drafter catalogs and SQLite's pages.
            record_measurement(store, at(template("host-0", 0), second))
            host_runs = [at(template("host-0", i), second + 1 + i) for i in range(args.records)]
            gpu_runs = [at(template(GPU_NAMES[i % len(GPU_NAMES)], i), second + 100 + i) for i in range(args.records)]
            host_ms, host_done = timed(record_measurement, store, host_runs)
            gpu_ms, gpu_done = timed(record_measurement, store, gpu_runs)
            assert all(r.prediction is not None and r.prediction.predicted for r in host_done + gpu_done)
            peers = tuple(len(done[-1].prediction.fitted_from)  # type: ignore[union-attr]
                          for done in (host_done, gpu_done))
            # The newest recorded run, predicted again as a full recalibration would: the same prediction.
            assert calibration.predict_one(store, gpu_done[-1]) == gpu_done[-1].prediction
            old_ms = None
            if size <= args.reference_max:
                old_runs = [at(template("host-0", i), second + 200 + i) for i in range(3)]
                old_ms, _ = timed(before_issue_31, store, old_runs)
            rows.append((size, seeded_s, peers, host_ms, gpu_ms, old_ms))
            store.engine.dispose()
            print(f"  {size} runs: seeded in {seeded_s:.1f} s", file=sys.stderr, flush=True)
    rows.sort()
    first = rows[0]  # the smallest registry: every ratio is against it
    print(f"FIT_SAMPLE = {calibration.FIT_SAMPLE}")
    print("| runs on the machine (and on GPUs) | seed s | peers (machine, GPU) | record on the machine ms | ratio | "
          "record on a catalog GPU ms | ratio | before issue 31 ms | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, seeded_s, peers, host_ms, gpu_ms, old_ms in rows:
        old = "-" if old_ms is None else f"{old_ms:.1f}"
        old_ratio = "-" if old_ms is None or first[5] is None else f"{old_ms / first[5]:.2f}"
        print(f"| {size:,} | {seeded_s:.1f} | {peers[0]}, {peers[1]} | {host_ms:.1f} | {host_ms / first[3]:.2f} | "
              f"{gpu_ms:.1f} | {gpu_ms / first[4]:.2f} | {old} | {old_ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
