"""Verification as jobs: runs land in the store with provenance; failures are stored and retried; workers go on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from registry import calibration
from registry.domain.measurement import ForwardCosts, METRIC_VERSION, RunSettings
from registry.domain.run import Run, RunPrediction
from registry.domain.stored_json import from_json, to_json
from registry.recording import RecordingFailed
from registry.store import jobs as queue
from registry.store.models import Job
from registry.store import Store, utcnow
from tests.support.cli import drafters
from verifier.jobs import VerifyRequest, Worker, enqueue, verify_now
from verifier.metrics import recompute_efficiency

FAST = RunSettings(max_new_tokens=16, repeats=1, warmup=0)


def test_verify_now_stores_a_lossless_run_with_provenance(store: Store, tiny_target_dir: Path,
                                                           tiny_draft_lm_dir: Path) -> None:
    request = VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir), prompt_sets=("code",),
                            settings=FAST)
    record = verify_now(store, request)
    assert record.status == "ok", record.failure_reason
    stored = store.runs.get_run(record.run_id)
    assert stored == record
    assert stored.lossless is True and stored.method == "draft-lm"
    assert stored.tau is not None and stored.tau > 1.0
    assert [s.name for s in stored.per_set] == ["code"]
    provenance = stored.provenance
    for key in ("target_files_digest", "drafter_files_digest", "prompt_sets_digest", "seed", "dtype", "device",
                "torch_version", "transformers_version", "temperature", "draft_length"):
        assert provenance.get(key) is not None, key
    assert stored.target_revision == provenance["target_files_digest"]
    # Metric definitions, with the forward costs a stored run's efficiency is recomputed from.
    assert stored.metric_version == METRIC_VERSION and provenance["metric_version"] == METRIC_VERSION
    costs = stored.forward_costs
    assert isinstance(costs, ForwardCosts)
    assert costs.target_step_s > 0 and costs.verify_step_s > 0 and costs.draft_step_s > 0 and costs.repeats > 0
    assert costs.gamma == stored.draft_length and costs.context_length > 0
    assert recompute_efficiency(stored) == pytest.approx(stored.efficiency)
    assert stored.tau_emitted is not None


def test_a_stored_run_reads_back_and_prints_as_it_was_measured(store: Store, database_url: str,
                                                                tiny_target_dir: Path, tiny_draft_lm_dir: Path) -> None:
    """One shape from the harness to the CLI: the store hands back the run it was given, its JSON reads back into
    the same run, and `drafters runs --json` prints exactly that JSON plus the prediction (nothing re-keyed)."""
    request = VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir), prompt_sets=("code",),
                            settings=FAST)
    record = verify_now(store, request)
    assert isinstance(record, Run) and record.status == "ok", record.failure_reason
    assert record.overall is not None and record.overall.acceptance is not None and record.forward_costs is not None
    assert store.runs.get_run(record.run_id) == record

    encoded = to_json(record)
    assert "generations" not in encoded  # transient: never stored or printed
    assert from_json(Run, json.loads(json.dumps(encoded))) == replace(record, generations={})

    result = drafters("runs", "--json", env={"DRAFTERS_DATABASE_URL": database_url})
    assert result.returncode == 0, result.stderr
    (printed,) = json.loads(result.stdout)["items"]
    # verify_now stored the current pricing model's prediction with the run: `runs` prints that one, as stored.
    assert record.prediction is not None
    assert printed == {**json.loads(json.dumps(encoded)), "prediction_source": "stored with the run"}
    assert from_json(RunPrediction, printed["prediction"]) == record.prediction
    assert printed["run_id"] == record.run_id and printed["overall"]["acceptance"]["tau"] == record.tau


def test_a_run_whose_prediction_fails_is_not_half_stored(
    store: Store, tiny_target_dir: Path, tiny_draft_lm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify_now records through registry.recording: when the prediction step fails after the run was
    written, the run goes too and the error names the step; the job's retry stores it whole."""
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the GPU catalog cannot be read")

    monkeypatch.setattr(calibration, "predict_one", broken)
    request = VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir), prompt_sets=("code",),
                            settings=FAST)
    with pytest.raises(RecordingFailed, match="the prediction failed .RuntimeError: the GPU catalog cannot be read"):
        verify_now(store, request, run_id="job7")
    assert store.runs.list_runs() == []
    monkeypatch.undo()
    record = verify_now(store, request, run_id="job7")
    assert record.prediction is not None and [r.run_id for r in store.runs.list_runs()] == ["job7"]


def test_failed_run_is_stored_with_one_line_reason(store: Store, tiny_target_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad-drafter"
    bad.mkdir()
    (bad / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_')
    record = verify_now(store, VerifyRequest(target=str(tiny_target_dir), drafter=str(bad), prompt_sets=("code",),
                                             settings=FAST))
    assert record.status == "failed"
    assert record.failure_reason and "\n" not in record.failure_reason
    assert store.runs.list_runs(status="failed")[0].run_id == record.run_id


def test_a_crash_is_stored_as_the_verifiers_bug_not_as_a_property_of_the_pair(
    store: Store, tiny_target_dir: Path, tiny_draft_lm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise TypeError("'<' not supported between instances of 'int' and 'NoneType'")

    monkeypatch.setattr("verifier.engines.pytorch.decode", crash)
    record = verify_now(store, VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir),
                                             prompt_sets=("code",), settings=FAST))
    assert record.status == "failed"
    assert record.failure_reason.startswith("crashed (TypeError), a bug in the verifier: '<' not supported")
    bad_config = verify_now(store, VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_target_dir / "nope"),
                                                 prompt_sets=("code",), settings=FAST))
    assert bad_config.status == "failed" and "crashed" not in bad_config.failure_reason


def test_worker_runs_queue_and_goes_on_after_a_failure(store: Store, tiny_target_dir: Path,
                                                       tiny_draft_lm_dir: Path, tmp_path: Path) -> None:
    bad = enqueue(store, VerifyRequest(target=str(tiny_target_dir), drafter=str(tmp_path / "missing"),
                                       prompt_sets=("code",), settings=FAST))
    good = enqueue(store, VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir),
                                        prompt_sets=("math",), settings=FAST))
    steps: list[tuple[int, int, int, str]] = []
    worker = Worker(store, heartbeat_s=0.5, on_progress=lambda *step: steps.append(step))
    assert worker.drain(timeout_s=300) == 2
    bad_job, good_job = store.jobs.get_job(bad.id), store.jobs.get_job(good.id)
    # Each measured step of the job in hand is told, named by its job, up to the last (what `up` prints).
    assert steps and {job for job, *_ in steps} == {good.id}
    assert [done for _, done, _, _ in steps] == list(range(1, len(steps) + 1)) and steps[-1][1] == steps[-1][2]
    assert any("baseline" in label for *_, label in steps) and any("draft-lm" in label for *_, label in steps)
    assert bad_job.status == queue.FAILED and "neither a model folder" in bad_job.error
    assert good_job.status == queue.DONE
    run = store.runs.get_run(good_job.run_id)
    assert run.job_id == good.id and run.status == "ok" and run.lossless


def test_job_of_a_killed_worker_is_retried_and_finished_once(store: Store, database_url: str,
                                                             tiny_target_dir: Path, tiny_draft_lm_dir: Path) -> None:
    job = enqueue(store, VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir),
                                       prompt_sets=("chat",), settings=FAST))
    # A worker process claims the job and is killed (SIGKILL) while it holds the lease.
    script = (
        "import sys, time; from registry.store import Store;"
        "s = Store.open(sys.argv[1]); j = s.jobs.claim('doomed', lease_s=1.0);"
        "print(j.id, flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, database_url], stdout=subprocess.PIPE, text=True,
                            env={**os.environ})
    assert proc.stdout.readline().strip() == str(job.id)
    proc.kill()
    proc.wait()
    with store.session() as session:  # let the lease run out without sleeping through it
        session.execute(update(Job).where(Job.id == job.id).values(lease_expires_at=utcnow() - timedelta(seconds=1)))
    worker = Worker(store, heartbeat_s=0.5)
    assert worker.drain(timeout_s=300) == 1
    finished = store.jobs.get_job(job.id)
    assert finished.status == queue.DONE and finished.attempts == 2
    assert [r.job_id for r in store.runs.list_runs()] == [job.id]


def test_cli_verify_json(database_url: str, tiny_target_dir: Path, tiny_draft_lm_dir: Path) -> None:
    result = drafters("verify", str(tiny_target_dir), str(tiny_draft_lm_dir), "--sets", "code", "--repeats", "1",
                      "--max-new-tokens", "16", "--json", env={"DRAFTERS_DATABASE_URL": database_url}, timeout=600)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    overall = payload["overall"]
    values = {"lossless": payload["lossless"], "tau": overall["acceptance"]["tau"],
              "acceptance_rate": overall["acceptance"]["acceptance_rate"],
              "per_position_acceptance": overall["acceptance"]["marginal"],
              "baseline_tokens_per_s": overall["baseline_tokens_per_s"]["median"],
              "tokens_per_s": overall["tokens_per_s"]["median"], "speedup": overall["speedup"]["median"],
              "efficiency": overall["efficiency"], "peak_memory_bytes": payload["peak_memory_bytes"],
              "run_id": payload["run_id"]}
    for key, value in values.items():
        assert value is not None, key
    assert payload["lossless"] is True
    tau = overall["acceptance"]["tau"]
    assert abs(tau - (1 + sum(overall["acceptance"]["marginal"]))) < 0.05
    assert payload["metric_version"] == METRIC_VERSION and payload["forward_costs"]["gamma"] == 4
    assert overall["speedup"]["n"] == 1 and overall["tau_emitted"] <= tau


def test_compare_reproduces_the_seed_experiment(database_url: str, gemma4_target_dir: Path,
                                               gemma4_dflash_dir: Path, assistant_dir: Path) -> None:
    """DFlash against Gemma's own assistant on one Gemma-4 target: same prompts, priced, not ranked."""
    result = drafters("compare", str(gemma4_target_dir), str(gemma4_dflash_dir), str(assistant_dir), "--sets", "code",
                      "--repeats", "2", "--max-new-tokens", "16", "--json", env={"DRAFTERS_DATABASE_URL": database_url},
                      timeout=900)
    assert result.returncode == 0, result.stderr
    decoder = json.JSONDecoder()
    text, objects = result.stdout.strip(), []
    while text:
        value, end = decoder.raw_decode(text)
        objects.append(value)
        text = text[end:].strip()
    assert [o["method"] for o in objects] == ["dflash", "gemma4-assistant"]
    for run in objects:
        assert run["lossless"] is True
        overall = run["overall"]
        values = {"tau": overall["acceptance"]["tau"], "per_position_acceptance": overall["acceptance"]["marginal"],
                  "tokens_per_s": overall["tokens_per_s"]["median"], "speedup": overall["speedup"]["median"],
                  "peak_memory_bytes": run["peak_memory_bytes"], "drafter_weight_bytes": run["drafter_weight_bytes"]}
        for key, value in values.items():
            assert value is not None, key
        (code,) = [s for s in run["per_set"] if s["name"] == "code"]
        assert code["speedup"] is not None


def test_a_restarted_worker_takes_back_its_own_orphaned_job_first(store: Store) -> None:
    """The worker keeps its id across restarts (`drafters up`: stable_owner). The job its previous process held
    when it stopped is queued again at start and run before newer work, not left running until its lease ends."""
    first = store.jobs.enqueue("verify", {"n": 1})
    second = store.jobs.enqueue("verify", {"n": 2})
    assert first is not None and second is not None
    claimed = store.jobs.claim("host-home-worker", lease_s=600.0)  # then the process stopped
    assert claimed is not None and claimed.id == first.id
    ran: list[int] = []

    def executor(_store: Store, job: queue.JobRecord) -> Run:
        ran.append(job.id)
        return Run(target="t", drafter="d", status="ok", run_id=f"run-{job.id}")

    restarted = Worker(store, worker_id="host-home-worker", executor=executor)
    assert restarted.drain(timeout_s=60) == 2
    assert ran == [first.id, second.id]
    done = store.jobs.get_job(first.id)
    assert done is not None and done.status == queue.DONE and done.attempts == 2
    assert done.error == "its worker restarted during attempt 1; queued again"
    # Another worker's live job is not its to take.
    third = store.jobs.enqueue("verify", {"n": 3})
    assert third is not None and store.jobs.claim("other-worker", lease_s=600.0) is not None
    assert restarted.reclaim_own() == []
    assert store.jobs.get_job(third.id).status == queue.RUNNING  # type: ignore[union-attr]
