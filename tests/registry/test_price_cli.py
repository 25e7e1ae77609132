"""`drafters price` as a user runs it: a real process over a real database with a stored run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from registry.store.runs import Run
from registry.store import Store
from tests.registry.run_fixtures import measured
from tests.support.cli import drafters

TARGET, DRAFTER = "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"
MARGINAL = (0.8, 0.65, 0.5, 0.4, 0.3, 0.22, 0.15, 0.1, 0.07, 0.05, 0.03, 0.02, 0.01, 0.01, 0.0)


@pytest.fixture
def db_env(database_url: str) -> dict[str, str]:
    env = {"DRAFTERS_DATABASE_URL": database_url}
    loaded = drafters("catalog", "load", env=env)
    assert loaded.returncode == 0, loaded.stderr
    return env


def _measured_run(database_url: str) -> str:
    record = Store.open(database_url).runs.record_run(Run(
        target=TARGET, drafter=DRAFTER, engine="llama.cpp", method="dflash", hardware="RTX 3060 12GB",
        draft_length=15, target_weight_bytes=5_000_000_000,
        overall=measured(marginal=MARGINAL, baseline_tokens_per_s=40.0, tokens_per_s=90.0, speedup=2.25),
        per_set=(measured("humaneval", "abc", marginal=MARGINAL),),
        created_at=datetime(2026, 11, 1, tzinfo=UTC)))
    assert record.tau == pytest.approx(1 + sum(MARGINAL))
    assert record.run_id is not None
    return record.run_id


def test_no_measured_run_is_a_one_line_error_pointing_at_verify(db_env: dict[str, str]) -> None:
    result = drafters("price", TARGET, "RedHatAI/Qwen3-8B-speculator.eagle3", "--gpu", "RTX 3060", env=db_env)
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "drafters verify" in result.stderr


def test_without_a_measured_run_a_published_tau_is_used_and_labelled(db_env: dict[str, str], tmp_path: Path) -> None:
    result = drafters("price", TARGET, DRAFTER, "--gpu", "RTX 3060", "--published-set", "humaneval", "--json",
                      env=db_env)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["acceptance"]["run_id"] is None
    assert answer["acceptance"]["source"].startswith("published, not measured: τ 6.55 on humaneval")
    assert 1 + sum(answer["acceptance"]["marginal"]) == pytest.approx(6.55, abs=1e-6)
    # The user's own prompts are never priced with somebody else's number.
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"prompt": "write a JavaScript debounce"}\n')
    prompts = drafters("price", TARGET, DRAFTER, "--prompts", str(mine), env=db_env)
    assert prompts.returncode == 2 and "drafters verify" in prompts.stderr


def test_price_answers_the_seed_question_for_a_12_gb_card(db_env: dict[str, str], database_url: str) -> None:
    run_id = _measured_run(database_url)
    result = drafters("price", TARGET, DRAFTER, "--gpu", "RTX 3060", "--quant", "q4_k_m", "--context", "8192",
                      "--json", env=db_env)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["acceptance"]["run_id"] == run_id and answer["acceptance"]["prompt_sets"] == ["humaneval"]
    [card] = answer["gpus"]
    assert card["device"] == "RTX 3060 12GB" and card["fit"]["fits"] is True
    assert card["speedup"] > 1 and card["tokens_per_s"] > card["baseline_tokens_per_s"]
    assert 1 <= card["best_gamma"] <= 15

    table = drafters("price", TARGET, DRAFTER, "--gpu", "RTX 3060", "--quant", "bf16", env=db_env)
    assert table.returncode == 0, table.stderr
    assert "does not fit" in table.stdout and "fits at fp8" in table.stdout and run_id[:12] in table.stdout

    every = drafters("price", TARGET, DRAFTER, "--json", env=db_env)
    assert every.returncode == 0, every.stderr
    assert len(json.loads(every.stdout)["gpus"]) >= 16


@pytest.mark.parametrize(("args", "message"), [
    (("--gpu", "RTX 9999"), "unknown GPU"),
    (("--quant", "q3_xs"), "unknown quantization"),
    (("--context", "-1"), "--context"),
])
def test_user_mistakes_are_one_line(db_env: dict[str, str], database_url: str, args: tuple[str, ...],
                                    message: str) -> None:
    _measured_run(database_url)
    result = drafters("price", TARGET, DRAFTER, *args, env=db_env)
    assert result.returncode == 2
    assert message in result.stderr and result.stderr.strip().count("\n") == 0


def test_calibration_predicts_and_stores_every_run(db_env: dict[str, str], database_url: str) -> None:
    run_id = _measured_run(database_url)
    result = drafters("price", "--calibration", "--json", env=db_env)
    assert result.returncode == 0, result.stderr
    [prediction] = json.loads(result.stdout)["items"]
    assert prediction["run_id"] == run_id and prediction["hardware"] == "RTX 3060 12GB"
    assert prediction["predicted_baseline_tokens_per_s"] > 0 and prediction["baseline_error"] is not None
    stored = Store.open(database_url).runs.get_run(run_id)
    assert stored is not None and stored.prediction is not None and stored.prediction.run_id == run_id
    assert stored.prediction.predicted_baseline_tokens_per_s == pytest.approx(prediction["predicted_baseline_tokens_per_s"])


def test_runs_show_the_prediction_error_or_a_dash_with_the_reason(db_env: dict[str, str], database_url: str) -> None:
    run_id = _measured_run(database_url)
    failed = Store.open(database_url).runs.record_run(Run(target=TARGET, drafter=DRAFTER, status="failed",
                                                          failure_reason="out of memory"))
    listed = drafters("runs", "--json", env=db_env)
    assert listed.returncode == 0, listed.stderr
    by_id = {r["run_id"]: r for r in json.loads(listed.stdout)["items"]}
    predicted = by_id[run_id]["prediction"]
    # Nothing stored it (the run was recorded directly): computed on read, and not written by a read.
    assert by_id[run_id]["prediction_source"] == "computed on read" and predicted["predicted_tokens_per_s"] > 0
    assert predicted["tokens_per_s_error"] == pytest.approx(predicted["predicted_tokens_per_s"] / 90.0 - 1)
    assert by_id[run_id]["overall"]["tokens_per_s"]["median"] == 90.0
    assert Store.open(database_url).runs.get_run(run_id).prediction is None  # type: ignore[union-attr]
    assert by_id[failed.run_id]["prediction"]["predicted_tokens_per_s"] is None
    assert "failed" in by_id[failed.run_id]["prediction"]["note"]

    table = drafters("runs", env={**db_env, "COLUMNS": "300"})
    assert table.returncode == 0, table.stderr
    assert f"({predicted['tokens_per_s_error']:+.0%})" in table.stdout

    assert drafters("price", "--calibration", env=db_env).returncode == 0
    stored = json.loads(drafters("runs", "--json", env=db_env).stdout)["items"]
    assert next(r for r in stored if r["run_id"] == run_id)["prediction_source"] == "stored with the run"
