"""Run settings are `RunSettings` from where a request is made to where its run is recorded; a job's JSON payload
becomes them again in one place (`VerifyRequest.from_payload`, `CurveRequest.from_payload`)."""

from __future__ import annotations

import json

from registry.domain.measurement import RunSettings
from registry.store import Store
from tests.support.cli import drafters
from verifier.curve_job import CurveRequest
from verifier.harness.record import failed_run
from verifier.jobs import VerifyRequest, enqueue


def test_a_queued_request_reads_back_with_typed_settings(store: Store) -> None:
    request = VerifyRequest(target="Qwen/Qwen3-8B", drafter="z-lab/Qwen3-8B-DFlash-b16",
                            settings=RunSettings(max_new_tokens=8, repeats=1, device="cuda:1", dtype="bfloat16"))
    job = enqueue(store, request)
    assert job is not None and job.num_gpus == 1
    back = VerifyRequest.from_payload(store.jobs.get_job(job.id).payload)
    assert back == request and isinstance(back.settings, RunSettings)
    curve = CurveRequest(target="t", drafter="d", settings=RunSettings(method="dflash", seed=3))
    assert CurveRequest.from_payload(curve.to_payload()).settings == curve.settings


def test_an_older_payload_reads_its_missing_settings_as_defaults() -> None:
    payload = {"target": "t", "drafter": "d", "settings": {"max_new_tokens": 8}}
    assert VerifyRequest.from_payload(payload).settings == RunSettings(max_new_tokens=8)


def test_a_failed_run_records_the_settings_it_was_asked() -> None:
    request = VerifyRequest(target="t", drafter="d", settings=RunSettings(repeats=2))
    assert failed_run(request, "refused", job_id=None, run_id="r").settings == RunSettings(repeats=2)


def test_settings_that_cannot_run_are_the_users_to_fix_before_any_run(db_env: dict[str, str]) -> None:
    result = drafters("verify", "/no/target", "/no/drafter", "--repeats", "0", env=db_env)
    assert result.returncode == 2
    assert "invalid run settings: repeats must be at least 1" in result.stderr
    assert "Traceback" not in result.stderr
    runs = drafters("runs", "--json", env=db_env)
    assert runs.returncode == 0 and json.loads(runs.stdout)["items"] == []  # no failed run stored
