"""Autoverify: seconds from a drafter's release on the fake Hub to its run on the dashboard, and planning speed.

    .venv/bin/python bench/autoverify.py [--interval S] [--pairs N]

1. Release to dashboard. `drafters up`'s parts (watcher, planner, worker; no dashboard process, no demo) run
   against a fake Hub serving the tiny Qwen3 target; a tiny DFlash drafter for it is then released, and the clock
   runs until the dashboard's own query (`dashboard.queries.latest_speedups`, read-only) shows its run. The parts
   are read from the database: when the watcher recorded the drafter, when the plan queued it, the download's
   seconds (stored with the run) and the measurement's. The goal is one poll interval + download + measurement and
   nothing else; the reference, measured in the same run, is that sum, and the ratio says what the loop adds.
2. Planning N pairs (default 10,000, goal ≤ 1 s): the pure planner over synthetic pairs with a realistic mix of
   measured, queued and failed work; the reference, in the same run, is sorting the same pairs by release.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The checkout first, bench/ off the path: bench/dashboard.py and bench/verifier.py would shadow the packages.
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

from dashboard import queries  # noqa: E402
from drafters.service import Service  # noqa: E402
from registry.domain import plan  # noqa: E402
from registry.domain.memory import GIB  # noqa: E402
from registry.settings import Settings  # noqa: E402
from registry.store import Store  # noqa: E402
from registry.store import jobs as queue  # noqa: E402
from tests.fakehub.server import FakeHub  # noqa: E402
from tests.fakehub.state import HubState, folder_files, readme_with_card, utc  # noqa: E402

TARGET, DRAFTER = "tinyorg/tiny-qwen3", "z-lab/tiny-qwen3-DFlash"
PLAN_GOAL_S = 1.0


def models() -> tuple[Path, Path]:
    from verifier.tiny.dflash import cached_dflash_drafter
    from verifier.tiny.qwen3 import cached_target

    cache = Path(os.environ.get("DRAFTERS_TEST_CACHE", REPO_ROOT / ".cache" / "test-models"))
    target = cached_target(cache)
    return target, cached_dflash_drafter(cache, target, trained=True)


def release_to_dashboard(interval_s: float) -> dict[str, float]:
    target_dir, dflash_dir = models()
    state = HubState()
    day = utc(2026, 5, 1)
    state.add_repo(TARGET, files=folder_files(target_dir), date=day, created_at=day)
    with tempfile.TemporaryDirectory() as home, FakeHub(state) as hub:
        store = Store.open(f"sqlite:///{home}/registry.db")
        settings = Settings(home=Path(home), hub_endpoint=hub.url, watched_orgs=["tinyorg", "z-lab"],
                            watch_interval_s=interval_s, autoverify_interval_s=interval_s, worker_memory_gb=4,
                            download_budget_gb=1, autoverify_max_new_tokens=16, autoverify_repeats=1)
        service = Service(settings, store, lambda _line: None)
        service.start(watch=True, worker=True, dashboard=False, demo=False)
        try:
            while not any(s.name == "watcher" and s.state == "waiting" for s in store.watch_state.service_statuses()):
                time.sleep(0.05)
            files = folder_files(dflash_dir)
            files["README.md"] = readme_with_card({"base_model": TARGET}, "# tiny DFlash drafter\n")
            released = day + timedelta(days=1)
            dashboard = queries.ReadOnlyQueries(f"sqlite:///{home}/registry.db")
            start = time.monotonic()
            state.add_repo(DRAFTER, files=files, date=released, created_at=released, tags=("dflash",))
            seen = queued = None
            while True:
                now = time.monotonic()
                if seen is None and store.reads.get_drafter(DRAFTER) is not None:
                    seen = now - start
                if queued is None and store.jobs.list_jobs():
                    queued = now - start
                frame = queries.latest_speedups(dashboard)
                if not frame.empty and DRAFTER in set(frame["drafter"]):
                    shown = now - start
                    break
                time.sleep(0.05)
            while (job := store.jobs.list_jobs()[0]).status == queue.RUNNING:
                time.sleep(0.05)  # the run is stored just before its job is marked done
            run = store.runs.get_run(job.run_id or "")
            assert run is not None and run.status == "ok", run
            download_s = float(run.provenance["download"]["seconds"])
            measured_s = (job.finished_at - job.started_at).total_seconds() - download_s  # type: ignore[operator]
            dashboard.close()
        finally:
            service.close()
            store.engine.dispose()
    return {"interval": interval_s, "seen": seen or 0.0, "queued": queued or 0.0, "download": download_s,
            "measure": measured_s, "shown": shown}


def synthetic_pairs(n: int, seed: int = 0) -> plan.PlanInputs:
    rng = random.Random(seed)
    config = {"model_type": "qwen3", "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
              "hidden_size": 4096, "head_dim": 128}
    pairs, measured, jobs = [], set(), {}
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    for i in range(n):
        t = i % 800  # 800 targets, each with its head revision: many drafters per target, as on the Hub
        params = [6e8, 4e9, 8e9, 32e9, 70e9, 235e9][t % 6]
        method = rng.choice(["dflash", "eagle3", "draft-lm", "dflash2", "dspark"])
        pair = plan.PairFacts(
            drafter=plan.SideFacts(f"org{i % 50}/drafter-{i}", f"{i:040x}", weight_bytes=int(params / 20)),
            target=plan.SideFacts(f"org{t % 37}/target-{t}", f"{t * 7 + 1:040x}", parameter_count=int(params),
                                  weight_bytes=int(params * 2), config=config, gated=t % 20 == 0),
            method=method, verdict="exact", source=rng.choice(["hub", "catalog"]),
            released=start + timedelta(hours=rng.randrange(20_000)))
        pairs.append(pair)
        identity = plan.measurement_identity(pair.drafter.repo_id, pair.drafter.sha or "", pair.target.repo_id,
                                             pair.target.sha or "", "pytorch", "torch 2.13")
        roll = rng.random()
        if roll < 0.3:
            measured.add(identity)
        elif roll < 0.4:
            jobs[plan.dedupe_key(identity)] = plan.JobFacts(rng.choice(["queued", "running", "failed"]), "x")
    return plan.PlanInputs(pairs, frozenset(measured), jobs)


def planning(n: int) -> tuple[float, float, dict[str, int]]:
    inputs = synthetic_pairs(n)
    worker = plan.WorkerCapability("bench", "cuda: NVIDIA H200", 141 * GIB, {"pytorch": "torch 2.13"}, 500 * GIB,
                                   run_bytes_per_parameter=2.0)
    best_plan = best_sort = float("inf")
    rows: list[plan.PlanRow] = []
    for _ in range(5):
        started = time.perf_counter()
        rows = plan.plan_pairs(inputs, worker)
        best_plan = min(best_plan, time.perf_counter() - started)
        started = time.perf_counter()
        sorted(inputs.pairs, key=lambda p: (p.source, p.released))
        best_sort = min(best_sort, time.perf_counter() - started)
    return best_plan, best_sort, plan.counts(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=5.0, help="watch and plan interval, seconds")
    parser.add_argument("--pairs", type=int, default=10_000)
    args = parser.parse_args()

    t = release_to_dashboard(args.interval)
    goal = t["interval"] + t["download"] + t["measure"]
    print("## Release on the fake Hub to the run on the dashboard (tiny Qwen3 target, tiny DFlash drafter, CPU)\n")
    print("| step | seconds after release |")
    print("| --- | --- |")
    print(f"| watcher recorded the drafter | {t['seen']:.2f} |")
    print(f"| planner queued the pair | {t['queued']:.2f} |")
    print(f"| run shown by the dashboard's query | {t['shown']:.2f} |")
    print(f"\n| part | seconds |\n| --- | --- |\n| poll interval | {t['interval']:.2f} |\n"
          f"| download (stored with the run) | {t['download']:.2f} |\n| measurement | {t['measure']:.2f} |\n"
          f"| reference: interval + download + measurement | {goal:.2f} |\n"
          f"| release to dashboard | {t['shown']:.2f} ({t['shown'] / goal:.2f}x the reference) |")

    plan_s, sort_s, tally = planning(args.pairs)
    print(f"\n## Planning {args.pairs:,} pairs (best of 5)\n")
    print("| what | seconds | vs sorting |")
    print("| --- | --- | --- |")
    print(f"| reference: sort the pairs by release | {sort_s:.4f} | 1.00x |")
    print(f"| plan every pair (fit, engine, gated, work) | {plan_s:.4f} | {plan_s / sort_s:.1f}x |")
    print(f"\nGoal ≤ {PLAN_GOAL_S:g} s: {'met' if plan_s <= PLAN_GOAL_S else 'MISSED'}. States: "
          + ", ".join(f"{n} {s}" for s, n in tally.items()))


if __name__ == "__main__":
    main()
