"""What recording one measured run costs with 1,000, 10,000 and 100,000 runs already stored (SQLite).

    .venv/bin/python bench/record.py [--sizes 1000,10000,100000] [--records 20] [--reference-max 10000]

Recording = registry.calibration.recording.record_measurement: the run, its regression check and event, and the
pricing model's prediction of it, in one transaction. The prediction reads the run's fit group only (the runs on
its hardware; for a catalog GPU, the runs on any catalog GPU), so the registry is seeded as a fleet: runs on
machines of 20 runs each (`host-N`, more machines as the registry grows) and a fixed 200 runs on catalog GPUs,
copies of one measured run made by bulk inserts (the bench measures recording, not loading). Each round records
--records new runs (after one untimed), each on another seeded machine (20 peers: bandwidth and overhead fitted by
least squares), then as many on a catalog GPU (200 peers and growing by one per record).

The reference, measured in the same run on the same database: the sequence before issue 25 (record_run,
regression_event, record_event, then a prediction from every stored run, each in its own session), up to
--reference-max stored runs (it reads every run per record: 79 s per record at 100,000 in bench/RESULTS.md).
Ratio = ms per record / the smallest registry's ms of the same kind.
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

from sqlalchemy import insert, select

from registry import calibration
from registry.calibration.recording import record_measurement
from registry.domain.gpus import load_gpus
from registry.domain.measurement import Acceptance, ForwardCosts, RunSettings, SetMeasurement, spread
from registry.domain.run import Run
from registry.store import Store
from registry.store.models import BenchmarkRun
from registry.store.runs import record_run, regression_event, set_predictions

T0 = datetime(2026, 11, 1, tzinfo=UTC)
PER_HOST = 20
GPU_RUNS = 200
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


def seed(store: Store, runs: int) -> int:
    """`runs` stored runs by bulk insert: GPU_RUNS on catalog GPUs, the rest on machines of PER_HOST runs each;
    returns the number of machines."""
    recorded = record_run(store, template("host-0", 0, run_id="seed-template"))
    with store.engine.begin() as connection:
        base = connection.execute(select(BenchmarkRun).where(BenchmarkRun.run_id == recorded.run_id)).mappings().one()
        base = {k: v for k, v in base.items() if k != "id"}
        batch = []
        for n in range(1, runs):
            hardware = GPU_NAMES[n % len(GPU_NAMES)] if n <= GPU_RUNS else f"host-{(n - GPU_RUNS) // PER_HOST}"
            batch.append({**base, "run_id": f"seed-{n:07d}", "hardware": hardware,
                          "created_at": T0 + timedelta(minutes=n)})
            if len(batch) == 5000:
                connection.execute(insert(BenchmarkRun), batch)
                batch = []
        if batch:
            connection.execute(insert(BenchmarkRun), batch)
    return max(1, (runs - GPU_RUNS) // PER_HOST)


def old_sequence(store: Store, run: Run) -> Run:
    """Recording as it was before issue 25: three writes, each in its own session, and a prediction from every
    stored run (calibration's full scan, the same arithmetic)."""
    record = record_run(store, run)
    event = regression_event(store, record)
    if event is not None:
        store.events.record_event(event)
    runs, prepared = calibration._prepare(store)  # every ok run, each one's bytes
    entry = prepared.get(record.run_id) or calibration._run_bytes(store, record)
    prediction = calibration._predict(record, entry, {**prepared, record.run_id: entry}, load_gpus(), overhead=True)
    set_predictions(store, {record.run_id: prediction})
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
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--reference-max", type=int, default=10000)
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            store = Store.open(f"sqlite:///{Path(folder) / 'registry.db'}")
            start = time.perf_counter()
            hosts = seed(store, size)
            seeded_s = time.perf_counter() - start
            minute = size + 10
            # Warm-up, not timed: the first record loads the GPU and drafter catalogs and SQLite's pages.
            record_measurement(store, template(f"host-{hosts - 1}", minute - 5))
            host_runs = [template(f"host-{i * hosts // args.records}", minute + i) for i in range(args.records)]
            gpu_runs = [template(GPU_NAMES[i % len(GPU_NAMES)], minute + 100 + i) for i in range(args.records)]
            host_ms, host_done = timed(record_measurement, store, host_runs)
            gpu_ms, gpu_done = timed(record_measurement, store, gpu_runs)
            assert all(r.prediction is not None and r.prediction.predicted for r in host_done + gpu_done)
            peers = tuple(len(done[0].prediction.fitted_from)  # type: ignore[union-attr]
                          for done in (host_done, gpu_done))
            old_ms = None
            if size <= args.reference_max:
                old_runs = [template(f"host-{i * hosts // args.records}", minute + 200 + i) for i in range(3)]
                old_ms, old_done = timed(old_sequence, store, old_runs)
                # The same prediction from the group as from every run: the newest old run recomputed the new way
                # (an earlier one's group may have grown since it was predicted, on a small registry).
                assert calibration.predict_one(store, old_done[-1]) == old_done[-1].prediction
            rows.append((size, seeded_s, peers, host_ms, gpu_ms, old_ms))
            store.engine.dispose()
            print(f"  {size} runs: seeded in {seeded_s:.1f} s", file=sys.stderr, flush=True)
    rows.sort()
    first = rows[0]  # the smallest registry: every ratio is against it
    print("| stored runs | seed s | peers (machine, GPU) | record on a machine ms | ratio | record on a catalog GPU "
          "ms | ratio | before issue 25 ms | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, seeded_s, peers, host_ms, gpu_ms, old_ms in rows:
        old = "-" if old_ms is None else f"{old_ms:.1f}"
        old_ratio = "-" if old_ms is None or first[5] is None else f"{old_ms / first[5]:.2f}"
        print(f"| {size:,} | {seeded_s:.1f} | {peers[0]}, {peers[1]} | {host_ms:.1f} | {host_ms / first[3]:.2f} | "
              f"{gpu_ms:.1f} | {gpu_ms / first[4]:.2f} | {old} | {old_ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
