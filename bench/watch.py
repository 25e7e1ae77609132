"""How long the watcher takes, and how many Hub requests and SQL statements it sends, on a fake Hub of 10,000
models in 10 orgs.

    .venv/bin/python bench/watch.py [--models N] [--orgs N] [--profile] [--scaling 10000,30000,100000]

Serves `Scenario.large` from the fake Hub (a real HTTP server on 127.0.0.1, through the real huggingface_hub
client) and polls into a temporary SQLite database three times: the first poll (every model is new), a re-poll
with nothing changed, and a re-poll after one model got a new commit. Prints one row per poll and the targets:
a first poll of at most 3 s, and a re-poll without change of at most one request per org. `--profile` prints
the first poll's cProfile hot spots. `--scaling` times only the first poll at each model count: its seconds per
1,000 models stay flat when the poll grows linearly.

`--real-orgs` instead serves the default watched orgs at roughly their real sizes (hundreds of repos each;
synthetic counts, see REAL_ORG_SIZES) and counts the Hub requests of a first poll, a quiet re-poll and a re-poll
after one new release, with the drafter queries on, as `drafters up` runs: every poll must stay under the
anonymous API limit of 500 calls per 5 minutes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# The checkout first, bench/ off the path: bench/dashboard.py and bench/verifier.py would shadow the packages.
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from registry.hub import HubClient, HubModel  # noqa: E402
from registry.domain.watch_list import watched_orgs  # noqa: E402
from registry.store import Store  # noqa: E402
from registry.store.db import StatementCounter  # noqa: E402
from registry.watch.poller import DRAFTER_QUERIES, PollReport, Watcher  # noqa: E402
from tests.fakehub.scenario import DAY_0, QWEN3_8B_DFLASH_CONFIG, Scenario  # noqa: E402
from tests.fakehub.server import FakeHub  # noqa: E402
from tests.fakehub.state import HubState, dflash_drafter_files  # noqa: E402

FIRST_POLL_TARGET_S = 3.0
REPOLL_REQUESTS_PER_ORG = 1
ANONYMOUS_API_LIMIT = 500  # calls per 5-minute window (hub-protocol.md §7)
# Synthetic, of the order of the real orgs' model counts in 2026 (not measured).
REAL_ORG_SIZES = {
    "Qwen": 400, "google": 1100, "meta-llama": 80, "openai": 40, "deepseek-ai": 90, "moonshotai": 30,
    "MiniMaxAI": 20, "zai-org": 60, "z-lab": 60, "modal-labs": 20, "RedHatAI": 700, "incoai": 10, "lmsys": 40,
    "yuhuili": 10, "XiaomiMiMo": 20,
}


@dataclass(frozen=True)
class Row:
    poll: str
    seconds: float
    requests: int
    statements: int
    processed: int
    events: int
    errors: int
    target: str
    met: bool


def row(name: str, report: PollReport, statements: int, target: str, met: bool) -> Row:
    return Row(name, report.seconds, report.requests, statements, sum(o.processed for o in report.orgs),
               len(report.events), len(report.errors), target, met)


def print_table(rows: list[Row], models: int, orgs: int) -> None:
    print(f"watcher on a fake Hub of {models:,} models in {orgs} orgs (temporary SQLite database)")
    header = (f"{'poll':<24} {'seconds':>8} {'requests':>9} {'store stmts':>12} {'processed':>10} {'events':>7} "
              f"{'errors':>7}  target")
    print(header)
    print("-" * len(header))
    for r in rows:
        verdict = "ok" if r.met else "MISSED"
        print(f"{r.poll:<24} {r.seconds:>8.2f} {r.requests:>9} {r.statements:>12} {r.processed:>10} {r.events:>7} "
              f"{r.errors:>7}  "
              f"{r.target} [{verdict}]")


def real_orgs() -> int:
    """Request counts per poll for the default watched orgs at real size, drafter queries included."""
    state = HubState()
    start = DAY_0 - timedelta(days=800)
    index = 0
    for org in watched_orgs(None):
        for number in range(REAL_ORG_SIZES.get(org, 50)):
            created = start + timedelta(hours=index)
            index += 1
            config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "index": index}
            state.add_repo(f"{org}/model-{number:05d}", created_at=created, date=created + timedelta(minutes=30),
                           files={"config.json": json.dumps(config).encode()}, library_name="transformers")
    for number in range(150):  # drafters of publishers nobody watches
        created = start + timedelta(hours=index + number)
        state.add_repo(f"someone{number:03d}/Qwen3-8B-DFlash", created_at=created, date=created,
                       files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, number), tags=("dflash",))
    orgs = watched_orgs(None)
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as workdir, FakeHub(state) as hub:
        store = Store.open(f"sqlite:///{Path(workdir) / 'registry.db'}")
        watcher = Watcher(store, HubClient(hub.url, None, Path(workdir) / "hub-cache"), orgs,
                          drafter_queries=DRAFTER_QUERIES)
        counter = StatementCounter(store.engine)
        first, first_statements = counted_poll(watcher, counter)
        quiet, quiet_statements = counted_poll(watcher, counter)
        state.add_repo("Qwen/model-new", created_at=DAY_0, date=DAY_0, files={"config.json": b"{}"})
        state.add_repo("someone-new/Qwen3-8B-DFlash", created_at=DAY_0, date=DAY_0,
                       files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 7), tags=("dflash",))
        changed, changed_statements = counted_poll(watcher, counter)
        store.engine.dispose()
    total = sum(REAL_ORG_SIZES.get(org, 50) for org in orgs)
    rows = [
        row("first poll", first, first_statements, f"< {ANONYMOUS_API_LIMIT} requests",
            first.requests < ANONYMOUS_API_LIMIT),
        # One id listing per 1000 repos of an org (google needs two), one listing per drafter query.
        row("re-poll, no change", quiet, quiet_statements, "<= 1 per 1000 repos and query", quiet.requests <= sum(
            -(-REAL_ORG_SIZES.get(org, 50) // 1000) for org in orgs) + len(DRAFTER_QUERIES)),
        row("re-poll, two releases", changed, changed_statements, f"< {ANONYMOUS_API_LIMIT} requests, both found",
            changed.requests < ANONYMOUS_API_LIMIT and len(changed.events) >= 2 and not changed.errors),
    ]
    print_table(rows, total, len(orgs))
    return 0 if all(r.met for r in rows) else 1


def counted_poll(watcher: Watcher, counter: StatementCounter,
                 profiler: cProfile.Profile | None = None) -> tuple[PollReport, int]:
    """One poll, and the SQL statements it sent."""
    before = counter.count
    if profiler is not None:
        profiler.enable()
    report = watcher.poll_once()
    if profiler is not None:
        profiler.disable()
    return report, counter.count - before


class ListingClock:
    """Time spent waiting on the Hub's detailed listings (the fake Hub's own work included), so that the watcher's
    own share can be told apart: wraps the client's list_org_models."""

    def __init__(self, client: HubClient) -> None:
        self.seconds = 0.0
        self._list = client.list_org_models
        client.list_org_models = self._timed  # type: ignore[method-assign]

    def _timed(self, *args: Any, **kwargs: Any) -> Iterator[HubModel]:
        listing = self._list(*args, **kwargs)
        while True:
            started = time.perf_counter()
            try:
                model = next(listing)
            except StopIteration:
                return
            finally:
                self.seconds += time.perf_counter() - started
            yield model


def scaling(sizes: list[int], n_orgs: int) -> int:
    """The first poll at each size (same number of orgs): seconds and statements per 1,000 models stay flat when
    the cost grows linearly. The Hub listing's share is shown apart (the fake Hub serves each page by scanning
    all its repos, so its pages get slower as it holds more); "watcher s" is the rest."""
    print(f"first poll of N models in {n_orgs} orgs (temporary SQLite database)")
    header = (f"{'models':>8} {'seconds':>8} {'listing s':>10} {'watcher s':>10} {'watcher s per 1k':>17} "
              f"{'vs first':>9} {'requests':>9} {'store stmts':>12} {'errors':>7}")
    print(header)
    print("-" * len(header))
    reference: float | None = None
    for size in sizes:
        scenario = Scenario.large(size, n_orgs)
        orgs = [f"org{index:02d}" for index in range(n_orgs)]
        with tempfile.TemporaryDirectory(prefix="bench-watch-") as workdir, FakeHub(scenario.state) as hub:
            store = Store.open(f"sqlite:///{Path(workdir) / 'registry.db'}")
            counter = StatementCounter(store.engine)
            client = HubClient(hub.url, None, Path(workdir) / "hub-cache")
            listing = ListingClock(client)
            report, statements = counted_poll(Watcher(store, client, orgs), counter)
            store.engine.dispose()
        own = report.seconds - listing.seconds
        per_1k = own / size * 1000
        reference = reference or per_1k
        print(f"{size:>8,} {report.seconds:>8.2f} {listing.seconds:>10.2f} {own:>10.2f} {per_1k:>17.3f} "
              f"{per_1k / reference:>8.2f}x {report.requests:>9} {statements:>12} {len(report.errors):>7}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10_000)
    parser.add_argument("--orgs", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="print the first poll's cProfile hot spots")
    parser.add_argument("--real-orgs", action="store_true", help="the default watched orgs at real size")
    parser.add_argument("--scaling", metavar="N,N,...", help="only the first poll, at each of these model counts")
    args = parser.parse_args()
    if args.scaling:
        return scaling([int(n) for n in args.scaling.split(",")], args.orgs)
    if args.real_orgs:
        return real_orgs()

    scenario = Scenario.large(args.models, args.orgs)
    orgs = [f"org{index:02d}" for index in range(args.orgs)]
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as workdir, FakeHub(scenario.state) as hub:
        store = Store.open(f"sqlite:///{Path(workdir) / 'registry.db'}")
        counter = StatementCounter(store.engine)
        client = HubClient(hub.url, None, Path(workdir) / "hub-cache")
        watcher = Watcher(store, client, orgs)

        profiler = cProfile.Profile() if args.profile else None
        first, first_statements = counted_poll(watcher, counter, profiler)
        unchanged, unchanged_statements = counted_poll(watcher, counter)
        changed_repo = f"{orgs[0]}/model-00000"
        scenario.state.commit(changed_repo, {"README.md": b"# model 0, edited\n"}, title="Update README.md",
                              date=DAY_0)  # after every model's last commit
        after_change, changed_statements = counted_poll(watcher, counter)
        store.engine.dispose()

    rows = [
        row("first poll", first, first_statements, f"<= {FIRST_POLL_TARGET_S:g} s",
            first.seconds <= FIRST_POLL_TARGET_S),
        row("re-poll, no change", unchanged, unchanged_statements, f"<= {REPOLL_REQUESTS_PER_ORG} request per org",
            unchanged.requests <= REPOLL_REQUESTS_PER_ORG * args.orgs),
        row("re-poll, one change", after_change, changed_statements, "the change processed",
            any(o.processed >= 1 for o in after_change.orgs) and not after_change.errors),
    ]
    print_table(rows, args.models, args.orgs)
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print(out.getvalue())
    return 0 if all(r.met for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
