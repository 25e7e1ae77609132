"""The plan's decisions, pure: every pair gets a state and a reason; the order is newest releases first, then the
catalog backlog; a measurement's identity changes with each re-measure trigger and with nothing else."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from registry.domain import plan
from registry.domain.memory import GIB
from registry.domain.plan import (
    DownloadFacts, JobFacts, PairFacts, PlanInputs, SideFacts, WorkerCapability, dedupe_key, measurement_identity,
    plan_pairs,
)

QWEN_CONFIG = {"model_type": "qwen3", "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
               "hidden_size": 4096, "head_dim": 128}
WORKER = WorkerCapability(worker_id="w", device="cpu", memory_bytes=16 * GIB, engines={"pytorch": "torch 2.13"},
                          disk_budget_bytes=100 * GIB, run_bytes_per_parameter=2.0)


def pair(target_params: int = 600_000_000, *, drafter: str = "z-lab/Qwen3-0.6B-DFlash",
         target: str = "Qwen/Qwen3-0.6B", method: str = "dflash", source: str = "hub",
         released: datetime | None = datetime(2026, 5, 1, tzinfo=timezone.utc), **side: object) -> PairFacts:
    return PairFacts(
        drafter=SideFacts(drafter, "d" * 40, weight_bytes=50_000_000),
        target=replace(SideFacts(target, "c0" * 20, parameter_count=target_params, weight_bytes=target_params * 2,
                                 config=QWEN_CONFIG), **side),  # type: ignore[arg-type]
        method=method, verdict="exact", source=source, released=released,
    )


def only(inputs: PlanInputs, worker: WorkerCapability = WORKER) -> plan.PlanRow:
    [row] = plan_pairs(inputs, worker)
    return row


def test_a_pair_that_fits_is_ready_with_its_needs() -> None:
    row = only(PlanInputs([pair()]))
    assert row.state == plan.READY
    assert row.engine == "pytorch" and row.engine_version == "torch 2.13"
    assert row.memory_bytes is not None and row.memory_bytes < WORKER.memory_bytes
    assert row.download_bytes == 50_000_000 + 1_200_000_000
    assert row.reason.startswith("fits: needs ")


def test_too_large_says_what_it_needs_and_what_the_worker_has() -> None:
    row = only(PlanInputs([pair(70_000_000_000)]))
    assert row.state == plan.NEEDS_MEMORY
    assert row.reason.startswith("needs ") and "(this worker has 16.0 GiB)" in row.reason
    # Weights alone at bf16 are 140 GB; KV and activations come on top.
    assert row.memory_bytes is not None and row.memory_bytes > 140e9


def test_disk_budget_blocks_a_download_that_cannot_fit() -> None:
    row = only(PlanInputs([pair()]), replace(WORKER, disk_budget_bytes=GIB))
    assert row.state == plan.NEEDS_DISK and "download budget 1.0 GiB" in row.reason


def test_an_already_downloaded_side_costs_no_disk() -> None:
    downloads = {("Qwen/Qwen3-0.6B", "c0" * 20): DownloadFacts("complete", 1_200_000_000, 1_200_000_000)}
    row = only(PlanInputs([pair()], downloads=downloads), replace(WORKER, disk_budget_bytes=GIB))
    assert row.state == plan.READY and row.download_bytes == 50_000_000


def test_gated_without_a_token_gives_the_link_and_is_not_queued() -> None:
    row = only(PlanInputs([pair(gated=True)]))
    assert row.state == plan.GATED
    assert row.link == "https://huggingface.co/Qwen/Qwen3-0.6B" and "HF_TOKEN" in row.reason
    assert only(PlanInputs([pair(gated=True)]), replace(WORKER, has_token=True)).state == plan.READY


def test_a_gated_refusal_is_shown_as_gated_not_retried() -> None:
    row = only(PlanInputs([pair()]))
    failed = {row.key: JobFacts("failed", "gated: Qwen/Qwen3-0.6B@tttt: gated repository, access not granted")}
    again = only(PlanInputs([pair()], jobs=failed))  # type: ignore[dict-item]
    assert again.state == plan.GATED and again.link


def test_no_engine_from_the_coverage_table() -> None:
    row = only(PlanInputs([pair(drafter="deepseek-ai/eagle3_gemma4_x", method="eagle3")]))
    assert row.state == plan.NO_ENGINE and "no engine runs eagle3" in row.reason
    no_torch = replace(WORKER, engines={"llama.cpp": "b1"})
    row = only(PlanInputs([pair(drafter="RedHatAI/Qwen3-8B-speculator.dflash", method="dflash")]), no_torch)
    assert row.state == plan.NO_ENGINE and "runs on pytorch, which this worker does not have" in row.reason


def test_gone_and_license_and_unknown_size() -> None:
    assert only(PlanInputs([pair(status="gone", status_detail="deleted")])).reason == (
        "Qwen/Qwen3-0.6B is gone from the Hub (deleted)")
    flagged = replace(WORKER, blocked_licenses=frozenset({"llama3"}))
    row = only(PlanInputs([pair(license="llama3")]), flagged)
    assert row.state == plan.LICENSE and "Qwen/Qwen3-0.6B (llama3)" in row.reason
    unknown = pair(parameter_count=None, weight_bytes=None)
    assert only(PlanInputs([unknown])).state == plan.UNKNOWN
    assert only(PlanInputs([pair(sha=None)])).reason == (
        "fits, but no Hub commit of Qwen/Qwen3-0.6B is recorded yet (the watcher records it)")
    assert only(PlanInputs([pair(sha="catalog")])).state == plan.UNKNOWN  # never downloaded by a made-up ref


def test_measured_queued_running_downloading_and_failed() -> None:
    ready = only(PlanInputs([pair()]))
    identity = measurement_identity("z-lab/Qwen3-0.6B-DFlash", "d" * 40, "Qwen/Qwen3-0.6B", "c0" * 20, "pytorch",
                                    "torch 2.13")
    assert ready.key == dedupe_key(identity)
    assert only(PlanInputs([pair()], measured=frozenset({identity}))).state == plan.MEASURED
    assert only(PlanInputs([pair()], jobs={ready.key: JobFacts("queued")})).state == plan.QUEUED  # type: ignore[dict-item]
    nowhere = only(PlanInputs([pair()], jobs={ready.key: JobFacts("queued", fits_a_live_worker=False)}))  # type: ignore[dict-item]
    assert nowhere.reason == "queued; fits no live worker"
    downloading = {("Qwen/Qwen3-0.6B", "c0" * 20): DownloadFacts("downloading", 300 * 2**20, 1200 * 2**20)}
    row = only(PlanInputs([pair()], jobs={ready.key: JobFacts("running")}, downloads=downloading))  # type: ignore[dict-item]
    assert row.state == plan.DOWNLOADING and row.reason == "downloading: 0.3 GiB of 1.2 GiB"
    assert only(PlanInputs([pair()], jobs={ready.key: JobFacts("running")})).state == plan.RUNNING  # type: ignore[dict-item]
    failed = only(PlanInputs([pair()], jobs={ready.key: JobFacts("failed", "disk full: x")}))  # type: ignore[dict-item]
    assert failed.state == plan.FAILED and failed.reason == "disk full: x"


def test_each_re_measure_trigger_is_a_new_identity() -> None:
    base = measurement_identity("d", "a" * 40, "t", "b" * 40, "pytorch", "torch 2.13", 2)
    triggers = [
        measurement_identity("d", "c" * 40, "t", "b" * 40, "pytorch", "torch 2.13", 2),  # drafter weights changed
        measurement_identity("d", "a" * 40, "t", "e" * 40, "pytorch", "torch 2.13", 2),  # new target revision
        measurement_identity("d", "a" * 40, "t", "b" * 40, "pytorch", "torch 2.14", 2),  # new engine version
        measurement_identity("d", "a" * 40, "t", "b" * 40, "pytorch", "torch 2.13", 3),  # metric definitions
    ]
    keys = {dedupe_key(base), *(dedupe_key(t) for t in triggers)}
    assert len(keys) == 5
    assert dedupe_key(base) == dedupe_key(measurement_identity("d", "a" * 40, "t", "b" * 40, "pytorch",
                                                               "torch 2.13", 2))
    # A newer engine on the worker turns a measured pair back into one to measure.
    measured = only(PlanInputs([pair()]))
    newer = replace(WORKER, engines={"pytorch": "torch 2.14"})
    old = measurement_identity("z-lab/Qwen3-0.6B-DFlash", "d" * 40, "Qwen/Qwen3-0.6B", "c0" * 20, "pytorch",
                               "torch 2.13")
    assert only(PlanInputs([pair()], measured=frozenset({old})), newer).state == plan.READY
    assert measured.state == plan.READY


def test_newest_releases_first_then_the_catalog_backlog() -> None:
    rows = plan_pairs(PlanInputs([
        pair(drafter="z-lab/old", source="hub", released=datetime(2026, 1, 1, tzinfo=timezone.utc)),
        pair(drafter="z-lab/catalog-new", source="catalog", released=datetime(2026, 9, 1, tzinfo=timezone.utc)),
        pair(drafter="z-lab/new", source="hub", released=datetime(2026, 6, 1, tzinfo=timezone.utc)),
        pair(drafter="z-lab/catalog-undated", source="catalog", released=None),
    ]), WORKER)
    assert [r.drafter for r in rows] == ["z-lab/new", "z-lab/old", "z-lab/catalog-new", "z-lab/catalog-undated"]
    assert all(r.reason for r in rows)


def test_json_rows_carry_every_field() -> None:
    row = only(PlanInputs([pair()])).to_json()
    assert row["state"] == "ready" and row["target_sha"] == "c0" * 20 and row["released"].startswith("2026-05-01")
