"""How long the watcher takes, and how many Hub requests it sends, on a fake Hub of 10,000 models in 10 orgs.

    .venv/bin/python bench/watch.py [--models N] [--orgs N] [--profile]

Serves `Scenario.large` from the fake Hub (a real HTTP server on 127.0.0.1, through the real huggingface_hub
client) and polls into a temporary SQLite database three times: the first poll (every model is new), a re-poll
with nothing changed, and a re-poll after one model got a new commit. Prints one row per poll and the targets:
a first poll of at most 10 s, and a re-poll without change of at most one request per org. `--profile` prints
the first poll's cProfile hot spots.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# bench/ itself must not be on the path: bench/queue.py would shadow the standard library's queue.
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from registry.hub import HubClient  # noqa: E402
from registry.store import Store  # noqa: E402
from registry.watch import PollReport, Watcher  # noqa: E402
from tests.fakehub.scenario import DAY_0, Scenario  # noqa: E402
from tests.fakehub.server import FakeHub  # noqa: E402

FIRST_POLL_TARGET_S = 10.0
REPOLL_REQUESTS_PER_ORG = 1


@dataclass(frozen=True)
class Row:
    poll: str
    seconds: float
    requests: int
    processed: int
    events: int
    errors: int
    target: str
    met: bool


def row(name: str, report: PollReport, target: str, met: bool) -> Row:
    return Row(name, report.seconds, report.requests, sum(o.processed for o in report.orgs), len(report.events),
               len(report.errors), target, met)


def print_table(rows: list[Row], models: int, orgs: int) -> None:
    print(f"watcher on a fake Hub of {models:,} models in {orgs} orgs (temporary SQLite database)")
    header = f"{'poll':<24} {'seconds':>8} {'requests':>9} {'processed':>10} {'events':>7} {'errors':>7}  target"
    print(header)
    print("-" * len(header))
    for r in rows:
        verdict = "ok" if r.met else "MISSED"
        print(f"{r.poll:<24} {r.seconds:>8.2f} {r.requests:>9} {r.processed:>10} {r.events:>7} {r.errors:>7}  "
              f"{r.target} [{verdict}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10_000)
    parser.add_argument("--orgs", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="print the first poll's cProfile hot spots")
    args = parser.parse_args()

    scenario = Scenario.large(args.models, args.orgs)
    orgs = [f"org{index:02d}" for index in range(args.orgs)]
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as workdir, FakeHub(scenario.state) as hub:
        store = Store.open(f"sqlite:///{Path(workdir) / 'registry.db'}")
        client = HubClient(hub.url, None, Path(workdir) / "hub-cache")
        watcher = Watcher(store, client, orgs)

        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        first = watcher.poll_once()
        if profiler is not None:
            profiler.disable()
        unchanged = watcher.poll_once()
        changed_repo = f"{orgs[0]}/model-00000"
        scenario.state.commit(changed_repo, {"README.md": b"# model 0, edited\n"}, title="Update README.md",
                              date=DAY_0)  # after every model's last commit
        after_change = watcher.poll_once()
        store.engine.dispose()

    rows = [
        row("first poll", first, f"<= {FIRST_POLL_TARGET_S:g} s", first.seconds <= FIRST_POLL_TARGET_S),
        row("re-poll, no change", unchanged, f"<= {REPOLL_REQUESTS_PER_ORG} request per org",
            unchanged.requests <= REPOLL_REQUESTS_PER_ORG * args.orgs),
        row("re-poll, one change", after_change, "the change processed",
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
