"""The ranked answer: measured speedup on the asked hardware class (and engine) first, else a published τ labelled
"published, not measured" with its source and setting, else the rule; `find` and `launch` read the same order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry.calibration.launch_inputs import pick_gpu
from registry.calibration.ranking import MEASURED, PUBLISHED, RULE, rank
from registry.calibration.recommend import launchable_pairs, recommendations
from registry.domain.run import Run
from registry.store import Store
from tests.registry.run_fixtures import full_run, measured
from tests.support.cli import drafters

TARGET, DFLASH, EAGLE3 = "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16", "RedHatAI/Qwen3-8B-speculator.eagle3"


def _run(drafter: str, engine: str, hardware: str, speedup: float, **changes: object) -> Run:
    overall = measured(marginal=(0.9, 0.8, 0.6), speedup=speedup)
    values: dict[str, object] = dict(target=TARGET, drafter=drafter, engine=engine, hardware=hardware,
                                     overall=overall, per_set=(overall,), target_weight_bytes=16_000_000_000,
                                     prediction=None, run_id=None)
    values.update(changes)
    return full_run(**values)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store.open(f"sqlite:///{tmp_path / 'registry.db'}")
    store.catalog.load_catalog()
    store.verdicts.recompute_compatibility(checkpoint_repo_id=TARGET)
    return store


def _order(store: Store, runs: list[Run], gpu: str, engine: str | None) -> list:
    pairs = launchable_pairs(store, TARGET)
    records = {p.drafter: store.reads.get_drafter(p.drafter) for p in pairs}
    return rank(pairs, runs, pick_gpu(gpu), engine, records=records, target_parameters=8_000_000_000)


def test_measured_on_the_hardware_beats_published_beats_the_rule(store: Store) -> None:
    nothing = _order(store, [], "H100 SXM", "vllm")
    assert len(nothing) >= 7
    assert (nothing[0].pair.drafter, nothing[0].basis) == (DFLASH, PUBLISHED)
    assert nothing[0].why.startswith("published, not measured") and "NVIDIA B200" in nothing[0].why
    assert "non-thinking only" in " ".join(nothing[0].caveats)
    assert all(r.basis == RULE and r.why.startswith("nothing measured or published: by rule") for r in nothing[1:])
    # By rule: block drafters before EAGLE-3 heads.
    methods = [r.pair.method for r in nothing[1:]]
    assert methods.index("eagle3") > max(i for i, m in enumerate(methods) if m in ("dflash", "dspark"))
    runs = [_run(EAGLE3, "vllm", "NVIDIA H100 80GB HBM3", 2.4, run_id="h100"),
            _run(DFLASH, "pytorch", "cpu (test)", 9.0, run_id="cpu"),  # another hardware: never counts here
            _run(DFLASH, "vllm", "NVIDIA H100 80GB HBM3", 9.0, run_id="tiny", target_weight_bytes=1_000_000)]
    ranked = _order(store, runs, "H100 SXM", "vllm")
    assert (ranked[0].pair.drafter, ranked[0].basis, ranked[0].score) == (EAGLE3, MEASURED, 2.4)
    assert "run h100" in ranked[0].why and "vllm on NVIDIA H100" in ranked[0].why
    assert ranked[1].pair.drafter == DFLASH and ranked[1].basis == PUBLISHED
    # Another engine or card: the vLLM H100 run does not count.
    assert _order(store, runs, "H100 SXM", "sglang")[0].basis == PUBLISHED
    assert _order(store, runs, "A100 80GB", "vllm")[0].basis == PUBLISHED
    assert _order(store, runs, "H100 SXM", None)[0].pair.drafter == EAGLE3  # any engine on that card


def test_launch_puts_the_recommended_command_first(store: Store) -> None:
    store.runs.record_run(_run(EAGLE3, "sglang", "H100 SXM", 2.1, run_id="sglang-h100"))
    first = recommendations(store, TARGET, "sglang", "H100 SXM")
    assert first[0].ranked.pair.drafter == EAGLE3 and first[0].launch.supported
    assert first[0].launch.argv[first[0].launch.argv.index("--speculative-algorithm") + 1] == "EAGLE3"
    others = recommendations(store, TARGET, "vllm", "H100 SXM")
    assert others[0].ranked.pair.drafter == DFLASH
    # The engine cannot run some pairs: those come after every pair it can.
    supported = [r.launch.supported for r in recommendations(store, "google/gemma-4-31B-it", "vllm", None)]
    assert supported == sorted(supported, reverse=True)


def test_find_ranks_the_exact_rows_and_says_why(db_env: dict[str, str]) -> None:
    assert drafters("catalog", "load", env=db_env).returncode == 0
    found = drafters("find", TARGET, "--gpu", "H100 SXM", "--json", env=db_env)
    assert found.returncode == 0, found.stderr
    body = json.loads(found.stdout)
    assert body["ranked_for"] == {"gpu": "H100 SXM", "engine": None}
    # Ranked: the pairs a user can rely on (exact, or declared by a trusted publisher), nothing else.
    ranked = sorted((r for r in body["drafters"] if r["rank"]), key=lambda r: r["rank"]["position"])
    assert [r["rank"]["position"] for r in ranked] == list(range(1, len(ranked) + 1))
    assert ranked[0]["drafter_repo_id"] == DFLASH and ranked[0]["rank"]["basis"] == "published"
    assert {r["verdict"] for r in ranked} <= {"exact", "declared"}
    assert all(r["rank"] for r in body["drafters"] if r["verdict"] == "exact")
    assert all(r["rank"] is None for r in body["drafters"] if r["verdict"] not in ("exact", "declared"))
    text = drafters("find", TARGET, env=db_env)
    assert "#1 for H100 SXM: published, not measured" in text.stdout
    built_in = json.loads(drafters("find", "Qwen/Qwen3.5-27B", "--json", env=db_env).stdout)
    assert built_in["built_in_rank"]["position"] == 1 and built_in["built_in_rank"]["built_in"]
    assert drafters("find", TARGET, "--engine", "tensorrt", env=db_env).returncode == 2
