"""What the watcher's reads cost as the registry's history grows: 1,000 / 10,000 / 100,000 events, with a tenth as
many targets (10,000 at the largest) and as many verdicts (SQLite).

    .venv/bin/python bench/watch_history.py [--sizes 1000,10000,100000] [--repeats 9]

The registry is seeded by bulk inserts (the bench measures reading, not loading): `size` events, `size / 10`
checkpoints (`org-N/Qwen3-KB`, with a head revision each) and `size / 100` drafters with ten verdicts each, one
of them exact. Then, each timed `--repeats` times (the fastest: the machine these run on is shared, and the
least-disturbed run is the cost itself; the "before" columns are timed a third as often):

- a quiet re-poll of one org of five models on the fake Hub (a real HTTP server on 127.0.0.1): its ms and its SQL
  statements; before issue 31 a poll first read the whole event log to learn its last id (`events()`, timed
  alone as the reference);
- the targets a drafter's name implies when it declares none (`inputs.declared_targets`: one probe of the
  checkpoints' stored name key), against the filtered scan that came first (a LIKE over every repo id, timed in
  the same run) and against reading every checkpoint as before;
- a new drafter's exact-before read (`store.watch.apply_drafter_unit`: the verdicts of its named targets, each
  read by id), against reading every verdict as before.

Ratio = the cost / the smallest history's cost of the same kind; the goal is flat (at most 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# The checkout first, bench/ off the path: bench/dashboard.py and bench/verifier.py would shadow the packages.
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from sqlalchemy import text  # noqa: E402

from registry.domain import names  # noqa: E402
from registry.domain.records import CompatRecord  # noqa: E402
from registry.hub import HubClient, HubModel  # noqa: E402
from registry.store import Store  # noqa: E402
from registry.store.db import StatementCounter  # noqa: E402
from registry.store.seed import insert_rows  # noqa: E402
from registry.watch.inputs import declared_targets  # noqa: E402
from registry.watch.poller import Watcher  # noqa: E402
from tests.fakehub.scenario import DAY_0  # noqa: E402
from tests.fakehub.server import FakeHub  # noqa: E402
from tests.fakehub.state import HubState  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# The reference scan as it was written then, in SQL: the store no longer has a query like it to call.
LIKE_SCAN = text("SELECT repo_id FROM checkpoint WHERE lower(repo_id) LIKE :pattern ESCAPE '\\'")
CONFIG = json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096})


def seed(store: Store, size: int) -> None:
    targets, drafters = max(size // 10, 10), max(size // 100, 1)
    insert_rows(store, "event", ({"type": "note", "subject": f"s{n}", "org": "acme", "family": None, "payload": {},
                                  "dedupe_key": f"history-{n}", "created_at": T0 + timedelta(seconds=n)}
                                 for n in range(size)))
    insert_rows(store, "checkpoint", ({"id": i + 1, "repo_id": f"org-{i % 50}/Qwen3-{i}B", "org": f"org-{i % 50}",
                                       "name_key": names.name_key(f"Qwen3-{i}B"), "source": "hub", "first_seen": T0,
                                       "head_sha": f"c{i:039d}", "kind": "base"} for i in range(targets)))
    insert_rows(store, "checkpoint_revision", ({"id": i + 1, "checkpoint_id": i + 1, "sha": f"c{i:039d}",
                                                "seen_at": T0, "config_json": CONFIG, "hidden_size": 4096}
                                               for i in range(targets)))
    insert_rows(store, "drafter", ({"id": d + 1, "repo_id": f"z-lab/Qwen3-{d * 10}B-DFlash-b16", "method": "dflash",
                                    "publisher": "z-lab", "source": "hub", "first_seen": T0,
                                    "head_sha": f"d{d:039d}"} for d in range(drafters)))
    insert_rows(store, "drafter_revision", ({"id": d + 1, "drafter_id": d + 1, "sha": f"d{d:039d}", "seen_at": T0}
                                            for d in range(drafters)))
    insert_rows(store, "drafter_target", ({"drafter_id": d + 1, "declared_by": "card_base_model",
                                           "target_repo_id": f"org-{(d * 10) % 50}/Qwen3-{d * 10}B"}
                                          for d in range(drafters)))
    insert_rows(store, "compatibility", ({"drafter_revision_id": d + 1,
                                          "checkpoint_revision_id": (d * 10 + k) % targets + 1,
                                          "verdict": "exact" if k == 0 else "structural", "reasons": [], "checks": [],
                                          "checked_at": T0} for d in range(drafters) for k in range(10)))


def fastest_ms(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def old_name_implied(store: Store, repo_id: str) -> list[str]:
    """Before issue 31: every checkpoint read and keyed."""
    stem = names.drafter_target_stem(repo_id)
    key = names.name_key(stem or "")
    return [c.repo_id for c in store.reads.checkpoints() if names.name_key(c.repo_id.split("/", 1)[1]) == key]


def like_name_implied(store: Store, repo_id: str) -> list[str]:
    """The first step of issue 31 (before the stored key): a LIKE over every repo id keeps the names that hold
    the key's parts in order, and only those are loaded and keyed."""
    key = names.name_key(names.drafter_target_stem(repo_id) or "")
    parts = [part.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") for part in key.split("-")]
    with store.engine.connect() as connection:
        found = connection.execute(LIKE_SCAN, {"pattern": "%/%" + "%".join(parts) + "%"}).scalars()
        return sorted(r for r in found if names.name_key(r.split("/", 1)[1]) == key)


def exact_before(store: Store, targets: set[str]) -> list[CompatRecord]:
    """What a new drafter's unit reads to learn whether its named targets had a drafter users rely on already."""
    return [v for target in sorted(targets) for v in store.reads.verdicts(checkpoint_repo_id=target)]


def hub_state() -> HubState:
    state = HubState()
    for n in range(5):
        created = DAY_0 - timedelta(days=10, minutes=n)
        state.add_repo(f"acme/model-{n}", created_at=created, date=created, library_name="transformers",
                       files={"config.json": CONFIG.encode()})
    return state


def measure(size: int, repeats: int, hub: FakeHub, folder: Path) -> dict[str, float]:
    store = Store.open(f"sqlite:///{folder / f'registry-{size}.db'}")
    seed(store, size)
    targets = max(size // 10, 10)
    watcher = Watcher(store, HubClient(hub.url, None, folder / "hub-cache", timeout=5.0), ["acme"],
                      drafter_queries=())
    watcher.poll_once()  # the baseline poll records the org
    counter = StatementCounter(store.engine)
    before = counter.count
    watcher.poll_once()
    statements = counter.count - before
    poll_ms = fastest_ms(watcher.poll_once, repeats)
    log_ms = fastest_ms(store.events.events, max(1, repeats // 3))
    # A drafter that declares no target, named for one of the seeded checkpoints.
    k = targets // 2
    model = HubModel(repo_id=f"z-lab/Qwen3-{k}B-DFlash-b16", sha="0" * 40, last_modified=DAY_0, created_at=DAY_0,
                     tags=("dflash",), gated=False, base_models=(), base_model_relation=None, pipeline_tag=None,
                     library_name=None)
    implied = [t for t, _ in declared_targets(store, model, None)]
    assert implied == old_name_implied(store, model.repo_id) == [f"org-{k % 50}/Qwen3-{k}B"], implied
    assert like_name_implied(store, model.repo_id) == implied
    implied_ms = fastest_ms(lambda: declared_targets(store, model, None), repeats)
    like_implied_ms = fastest_ms(lambda: like_name_implied(store, model.repo_id), repeats)
    old_implied_ms = fastest_ms(lambda: old_name_implied(store, model.repo_id), max(1, repeats // 3))
    declared = {f"org-{k % 50}/Qwen3-{k}B", f"org-{(k + 10) % 50}/Qwen3-{k + 10}B"}
    read = exact_before(store, declared)
    assert read and sorted(read, key=repr) == sorted(
        (v for v in store.reads.verdicts() if v.checkpoint_repo_id in declared), key=repr)
    exact_ms = fastest_ms(lambda: exact_before(store, declared), repeats)
    old_exact_ms = fastest_ms(store.reads.verdicts, max(1, repeats // 3))
    store.engine.dispose()
    return {"statements": statements, "poll": poll_ms, "log": log_ms, "implied": implied_ms,
            "like_implied": like_implied_ms, "old_implied": old_implied_ms, "exact": exact_ms, "old_exact": old_exact_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as folder, FakeHub(hub_state()) as hub:
        for size in sizes:
            rows.append((size, measure(size, args.repeats, hub, Path(folder))))
            print(f"  {size} events measured", file=sys.stderr, flush=True)
    first = rows[0][1]
    print("| events (targets, verdicts) | quiet re-poll ms | ratio | statements | before: + reading the log ms | "
          "name-implied targets ms | ratio | before: LIKE scan ms | ratio | before: every checkpoint ms | "
          "exact-before read ms | ratio | before: every verdict ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, m in rows:
        targets = max(size // 10, 10)
        print(f"| {size:,} ({targets:,}, {max(size // 100, 1) * 10:,}) | {m['poll']:.1f} | "
              f"{m['poll'] / first['poll']:.2f} | {m['statements']:.0f} | +{m['log']:.1f} | {m['implied']:.2f} | "
              f"{m['implied'] / first['implied']:.2f} | {m['like_implied']:.2f} | "
              f"{m['like_implied'] / first['like_implied']:.2f} | {m['old_implied']:.1f} | {m['exact']:.2f} | "
              f"{m['exact'] / first['exact']:.2f} | {m['old_exact']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
