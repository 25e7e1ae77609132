"""How long each dashboard page takes on a big registry: 2,000 checkpoints and 100,000 benchmark runs.

    .venv/bin/python bench/dashboard.py [--database-url URL] [--runs N] [--checkpoints N]

Seeds a fresh database (a temporary SQLite file unless --database-url names an empty one) with bulk inserts,
then runs every page's script with Streamlit's AppTest twice: cold (caches cleared, what the first visitor
waits for) and warm (the cached reads of the next rerun). Prints one row per page and the target: a cold run of
at most 1.5 s a page.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The checkout first, bench/ off the path: bench/dashboard.py and bench/verifier.py would shadow the packages.
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from registry.domain.measurement import Acceptance, SetMeasurement, spread  # noqa: E402
from registry.domain.run import Run  # noqa: E402
from registry.settings import get_settings  # noqa: E402
from registry.store import Store  # noqa: E402
from registry.store.seed import insert_rows, insert_runs, repo_ids, revision_ids  # noqa: E402

TARGET_S = 1.5
PAGES = ("overview", "availability", "lag", "benchmarks", "pair", "alerts")
ORGS = ("Qwen", "google", "meta-llama", "openai", "deepseek-ai", "moonshotai", "MiniMaxAI", "zai-org", "acme", "lab")
METHODS = ("dflash", "dflash2", "dspark", "gemma4-assistant", "eagle3", "draft-lm")
VERDICTS = ("exact", "exact", "structural", "incompatible", "unknown")
SIZES = ("0.6B", "1.7B", "4B", "8B", "14B", "27B", "32B", "70B")
HARDWARE = ("H200", "RTX 3090")
ENGINES = ("pytorch", "vllm")
PROMPT_SETS = ("gsm8k", "mt-bench")


@dataclass(frozen=True)
class Timing:
    page: str
    cold_s: float
    warm_s: float
    ok: bool


def _config(layers: int, hidden: int) -> str:
    return json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
        "num_hidden_layers": layers, "num_attention_heads": hidden // 128, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 128256, "torch_dtype": "bfloat16",
    }, sort_keys=True)


def seed(store: Store, *, checkpoints: int, runs: int, rng: random.Random) -> None:
    now = datetime.now(UTC)
    first_day = date(2024, 1, 1)
    insert_rows(store, "checkpoint", [
        {
            "repo_id": f"{ORGS[i % len(ORGS)]}/Model{i // 40}.{i % 5}-{SIZES[i % len(SIZES)]}-v{i}",
            "org": ORGS[i % len(ORGS)], "family": f"Model{i // 40}", "size": SIZES[i % len(SIZES)], "kind": "base",
            "released": first_day + timedelta(days=rng.randrange(900)), "released_precision": "day",
            "gated": False, "status": "ok", "head_sha": f"{i:040x}", "source": "hub", "first_seen": now,
        }
        for i in range(checkpoints)
    ])
    checkpoint_ids = repo_ids(store, "checkpoint")
    insert_rows(store, "checkpoint_revision", [
        {
            "checkpoint_id": cid, "sha": f"{i:040x}", "seen_at": now, "hidden_size": 4096, "num_hidden_layers": 32,
            "vocab_size": 128256, "model_type": "llama", "weight_bytes": 16_000_000_000,
            "parameter_count": 8_000_000_000, "config_json": _config(32, 4096),
        }
        for i, (cid, _) in enumerate(checkpoint_ids)
    ])
    drafters = max(checkpoints // 10, 1)
    insert_rows(store, "drafter", [
        {
            "repo_id": f"drafters{i % 7}/Drafter-{i}-{METHODS[i % len(METHODS)]}", "method": METHODS[i % len(METHODS)],
            "publisher": f"drafters{i % 7}", "released": first_day + timedelta(days=rng.randrange(300, 1000)),
            "released_precision": "day", "gated": False, "status": "ok", "head_sha": "d" * 40, "source": "hub",
            "first_seen": now,
        }
        for i in range(drafters)
    ])
    drafter_ids = repo_ids(store, "drafter")
    insert_rows(store, "drafter_revision", [
        {"drafter_id": did, "sha": "d" * 40, "seen_at": now, "hidden_size": 4096, "weight_bytes": 1_000_000_000}
        for did, _ in drafter_ids
    ])
    drafter_revisions = revision_ids(store, "drafter")
    checkpoint_revisions = revision_ids(store, "checkpoint")
    targets, verdicts = [], []
    for index, (did, _) in enumerate(drafter_ids):
        chosen = rng.sample(checkpoint_ids, 10)
        for position, (cid, repo_id) in enumerate(chosen):
            if position < 2:
                targets.append({"drafter_id": did, "target_repo_id": repo_id, "declared_by": "catalog"})
            verdicts.append({
                "drafter_revision_id": drafter_revisions[did], "checkpoint_revision_id": checkpoint_revisions[cid],
                "verdict": "exact" if position < 2 and index % 3 else rng.choice(VERDICTS),
                "reasons": ["bench"], "checks": [], "checked_at": now,
            })
    insert_rows(store, "drafter_target", targets)
    insert_rows(store, "compatibility", verdicts)
    insert_rows(store, "event", [
        {"type": rng.choice(("new_drafter", "revision_changed", "lag_opened")), "subject": f"bench/{i}",
         "org": ORGS[i % len(ORGS)], "family": f"Model{i % 50}", "payload": {"message": f"bench event {i}"},
         "dedupe_key": f"bench:{i}", "created_at": now - timedelta(minutes=i)}
        for i in range(2_000)
    ])
    pairs = [(rng.choice(checkpoint_ids)[1], rng.choice(drafter_ids)[1]) for _ in range(300)]
    seeded = []
    for i in range(runs):
        target, drafter = pairs[min(int(rng.expovariate(1 / 40)), len(pairs) - 1)]
        failed = i % 20 == 0
        sets = () if failed else tuple(_bench_set(rng, name) for name in PROMPT_SETS)
        seeded.append(Run(
            target=target, drafter=drafter, status="failed" if failed else "ok",
            failure_reason="bench failure" if failed else None, engine=ENGINES[i % 2], method="dflash",
            overall=None if failed else _bench_set(rng, "overall"), per_set=sets,
            hardware=HARDWARE[(i // 2) % 2], target_revision=f"{i // 5000:040x}", drafter_revision="d" * 40,
            run_id=f"{i:032x}", created_at=now - timedelta(minutes=runs - i),
        ))
    insert_runs(store, seeded)


def _bench_set(rng: random.Random, name: str) -> SetMeasurement:
    tau, speed = rng.uniform(2, 7), rng.uniform(1.5, 5.0)
    marginal = tuple(round(0.9 ** k, 3) for k in range(1, 9))
    acceptance = Acceptance(rounds=100, drafted=800, accepted=round((tau - 1) * 100), tau=tau,
                            acceptance_rate=(tau - 1) / 8, histogram=(), marginal=marginal, conditional=(),
                            uniform_draft_length=True, identity_gap=tau - 1 - sum(marginal))
    # No tokens/s: rows without a stored prediction and with tok/s would be priced on read, which loads every run
    # (what a MODEL_VERSION bump costs until `drafters price --calibration`); this bench times the pages' queries.
    return SetMeasurement(name=name, prompts=4, digest=name, speedup=spread([speed - 0.025, speed, speed + 0.025]),
                          acceptance=acceptance, lossless=True)


def time_page(page: str) -> Timing:
    path = str(REPO_ROOT / "dashboard" / "views" / f"{page}.py")
    st.cache_data.clear()
    st.cache_resource.clear()
    start = time.perf_counter()
    app = AppTest.from_file(path, default_timeout=300).run()
    cold = time.perf_counter() - start
    start = time.perf_counter()
    app.run()
    warm = time.perf_counter() - start
    ok = not app.exception and not app.error
    if not ok:
        print(f"  {page}: {[e.value for e in app.exception]} {[e.value for e in app.error]}", file=sys.stderr)
    return Timing(page, cold, warm, ok)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="an empty database to seed (default: a temporary SQLite file)")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--checkpoints", type=int, default=2_000)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as workdir:
        url = args.database_url or f"sqlite:///{Path(workdir) / 'bench.db'}"
        os.environ["DRAFTERS_DATABASE_URL"] = url
        os.environ["DRAFTERS_HOME"] = str(Path(workdir) / "home")
        get_settings.cache_clear()
        store = Store.open(url)
        start = time.perf_counter()
        seed(store, checkpoints=args.checkpoints, runs=args.runs, rng=rng)
        seeded_s = time.perf_counter() - start
        store.engine.dispose()
        print(f"seeded {args.checkpoints:,} checkpoints and {args.runs:,} runs in {seeded_s:.1f} s "
              f"({store.engine.dialect.name})")
        # One untimed run first: importing Streamlit's runtime and the page modules is a once-per-process cost of
        # the server, not something a visitor waits for.
        time_page("alerts")
        timings = [time_page(page) for page in PAGES]
    print(f"\n{'page':<14}{'cold s':>9}{'warm s':>9}  target <= {TARGET_S} s cold")
    for timing in timings:
        verdict = "ok" if timing.cold_s <= TARGET_S else "SLOW"
        print(f"{timing.page:<14}{timing.cold_s:>9.2f}{timing.warm_s:>9.2f}  {verdict}{'' if timing.ok else ' (page error)'}")
    return 0 if all(t.ok for t in timings) else 1


if __name__ == "__main__":
    raise SystemExit(main())
