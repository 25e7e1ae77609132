"""The pricing model (pure) and its calibration against stored runs (real SQLite/PostgreSQL)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from registry import calibration
from registry.domain import pricing
from registry.domain.catalog import load_catalog_data
from registry.domain.gpus import load_gpus
from registry.domain.memory import GIB
from registry.domain.stored_json import to_json
from registry.recording import record_measurement
from registry.store.mappers import run_values
from registry.store.models import BenchmarkRun
from registry.store.runs import Run
from registry.store import Store
from tests.registry.run_fixtures import measured, reading

ONE_GB_S = pricing.Device("test", "discrete", bandwidth_bytes_s=1e9, bf16_ops_s=None, int8_ops_s=None,
                          budget_bytes=None, basis="test")
EIGHT_BIT = pricing.Quantization("8-bit", 8.0)


def _pair(method: str) -> pricing.PairShape:
    # Target: 1e9 parameters at 8 bits = 1 GB read per step = 1 s at 1 GB/s. Drafter: 1e8 at bf16 = 0.2 s.
    return pricing.PairShape(target=pricing.NetworkShape(10**9, 10**9), drafter=pricing.NetworkShape(10**8, 10**8),
                             method=method)


ACCEPTANCE = pricing.Acceptance((0.9, 0.5, 0.1), "test")


def test_tau_is_one_plus_the_sum_of_marginals_and_gamma_is_bounded_by_the_measurement() -> None:
    assert ACCEPTANCE.tau(0) == 1.0
    assert ACCEPTANCE.tau(2) == pytest.approx(2.4)
    with pytest.raises(pricing.PricingError, match="outside the measured"):
        ACCEPTANCE.tau(4)


def test_autoregressive_drafter_pays_per_drafted_token_and_best_gamma_is_interior() -> None:
    result = pricing.price(_pair("draft-lm"), ACCEPTANCE, ONE_GB_S, quant=EIGHT_BIT, context=0)
    speedups = [p.speedup for p in result.curve]
    assert speedups == pytest.approx([1.9 / 1.2, 2.4 / 1.4, 2.5 / 1.6])
    assert result.best_gamma == 2 and result.speedup == pytest.approx(2.4 / 1.4)
    assert result.baseline_tokens_per_s == pytest.approx(1.0)
    assert result.tokens_per_s == pytest.approx(2.4 / 1.4)


def test_block_drafter_drafts_the_whole_block_in_one_forward() -> None:
    result = pricing.price(_pair("dflash"), ACCEPTANCE, ONE_GB_S, quant=EIGHT_BIT, context=0)
    assert result.best_gamma == 3 and result.speedup == pytest.approx(2.5 / 1.2)


def test_compute_floor_makes_long_verifies_cost_more() -> None:
    slow = pricing.Device("slow", "discrete", 1e9, bf16_ops_s=4e9, int8_ops_s=4e9, budget_bytes=None, basis="")
    costs = pricing.step_costs(_pair("dflash"), 3, quant=EIGHT_BIT, context=0, device=slow)
    assert costs.target_s == pytest.approx(1.0)  # 2e9 ops at 4e9/s = 0.5 s < 1 s of memory
    assert costs.verify_s == pytest.approx(2.0)  # 4 tokens: 8e9 ops = 2 s > 1 s of memory
    result = pricing.price(_pair("dflash"), ACCEPTANCE, slow, quant=EIGHT_BIT, context=0)
    assert result.best_gamma == 1  # verifying more tokens no longer comes free


def test_kv_cache_adds_to_every_target_step() -> None:
    shape = pricing.NetworkShape(10**9, 10**9, kv=(pricing.KvLayers(10, 1000.0),))
    pair = pricing.PairShape(shape, pricing.NetworkShape(0, 0), "dflash")
    costs = pricing.step_costs(pair, 1, quant=EIGHT_BIT, context=100_000, device=ONE_GB_S)
    assert costs.target_s == pytest.approx(2.0)  # 1 GB weights + 10 × 1000 × 1e5 = 1 GB of KV


def test_kv_layers_from_configs_dense_mla_hybrid_sliding() -> None:
    dense, _ = pricing.kv_layers({"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
                                  "head_dim": 128, "hidden_size": 4096})
    assert sum(g.count * g.bytes_per_token for g in dense) == 2 * 36 * 8 * 128 * 2
    mla, notes = pricing.kv_layers({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
                                    "kv_lora_rank": 16, "qk_rope_head_dim": 8})
    assert mla[0].count * mla[0].bytes_per_token == 2 * (16 + 8) * 2 and "MLA" in notes[0]
    hybrid, notes = pricing.kv_layers({"num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 16,
                                       "layer_types": ["linear_attention"] * 3 + ["full_attention"]})
    assert [g.count for g in hybrid] == [1] and "linear-attention" in notes[0]
    sliding = pricing.NetworkShape(0, 0, kv=pricing.kv_layers({
        "num_hidden_layers": 2, "num_attention_heads": 1, "head_dim": 1, "sliding_window": 10,
        "layer_types": ["sliding_attention", "full_attention"]})[0])
    assert sliding.kv_bytes(1000) == 4 * 1000 + 4 * 10  # the sliding layer stops at its window


def test_moe_reads_active_experts_per_token_and_more_when_verifying() -> None:
    shape = pricing.NetworkShape(100, 100, expert_parameters=80, experts=8, experts_per_token=1)
    assert shape.streamed_for(1) == pytest.approx(30)  # 20 dense + 1 of 8 experts (10 each)
    assert shape.streamed_for(1) < shape.streamed_for(4) < 100


def _qwen3_8b_dflash() -> pricing.PairShape:
    catalog = load_catalog_data()
    target = catalog.target("Qwen/Qwen3-8B").config
    drafter = next(d for d in catalog.drafters if d.repo_id == "z-lab/Qwen3-8B-DFlash-b16").config
    return pricing.pair_shape(target, drafter, "dflash")


def test_qwen3_8b_shapes_from_the_catalog_configs() -> None:
    pair = _qwen3_8b_dflash()
    assert 8.1e9 < pair.target.parameters < 8.3e9  # Qwen3-8B is 8.2 B
    assert pair.target.streamed_parameters == pair.target.parameters - 151936 * 4096  # untied input embedding
    assert 1.0e9 < pair.drafter.parameters < 1.1e9  # "~1B params"
    assert pair.borrowed_parameters == 151936 * 4096  # the drafter reads the target's head


def test_seed_question_qwen3_8b_dflash_on_a_12_gb_card() -> None:
    rtx3060 = pricing.device_for(next(g for g in load_gpus() if g.name == "RTX 3060 12GB"))
    acceptance = pricing.Acceptance(tuple(0.7 ** i for i in range(1, 16)), "test")
    q4 = pricing.price(_qwen3_8b_dflash(), acceptance, rtx3060, quant=pricing.quantization("q4_k_m"), context=8192)
    assert q4.fit.fits is True and q4.fit.budget_bytes == 11 * GIB
    assert q4.speedup > 1 and q4.tokens_per_s > q4.baseline_tokens_per_s
    bf16 = pricing.price(_qwen3_8b_dflash(), acceptance, rtx3060, quant=pricing.quantization("bf16"), context=8192)
    # 19.9 GiB at bf16; Q8_0's 8.5 bits (11.3 GiB) miss by a little, fp8's 8 bits (10.9 GiB) fit.
    assert bf16.fit.fits is False and bf16.fit.would_fit_at == "fp8"
    q8 = pricing.fit(_qwen3_8b_dflash(), quant=pricing.quantization("q8_0"), context=8192, device=rtx3060)
    assert q8.fits is False and q8.would_fit_at == "Q6_K"


def test_unified_memory_budget_is_a_fraction_of_ram() -> None:
    mac = next(g for g in load_gpus() if g.name == "Apple M4 Max 36GB")
    device = pricing.device_for(mac)
    assert device.budget_bytes == int(36 * GIB * 0.75) and device.bf16_ops_s is None


def test_constant_acceptance_reproduces_the_published_tau() -> None:
    marginal = pricing.constant_acceptance(6.55, 15)
    assert len(marginal) == 15 and 1 + sum(marginal) == pytest.approx(6.55)
    assert all(a > b for a, b in zip(marginal, marginal[1:]))
    with pytest.raises(pricing.PricingError, match="impossible"):
        pricing.constant_acceptance(17.0, 15)


def test_published_acceptance_is_labelled_and_picks_the_lower_median_set() -> None:
    acceptance = calibration.published_acceptance("Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16")
    assert acceptance is not None and acceptance.run_id is None
    assert acceptance.source.startswith("published, not measured") and acceptance.tau(15) == pytest.approx(6.55)
    alpaca = calibration.published_acceptance("Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16", "alpaca")
    assert alpaca is not None and alpaca.tau(15) == pytest.approx(3.16)
    assert calibration.published_acceptance("Qwen/Qwen3-8B", "RedHatAI/Qwen3-8B-speculator.eagle3") is None
    with pytest.raises(calibration.PricingInputError, match="published"):
        calibration.published_acceptance("Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16", "no-such-set")


def test_quantization_names() -> None:
    assert pricing.quantization("q4_k_m").name == "Q4_K_M"
    assert pricing.quantization("Q8_0").bits_per_weight == 8.5
    with pytest.raises(pricing.PricingError, match="unknown quantization"):
        pricing.quantization("q3_xs")


# ---- against a real database -----------------------------------------------------------------------------------

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _run(store: Store, *, hardware: str, baseline: float, minutes: int, marginal: tuple[float, ...] = (0.8, 0.6),
         digest: str = "d1", engine: str = "llama.cpp") -> str:
    record = store.runs.record_run(Run(
        target="Qwen/Qwen3-8B", drafter="z-lab/Qwen3-8B-DFlash-b16", engine=engine, method="dflash",
        hardware=hardware, draft_length=len(marginal), target_weight_bytes=4_900_000_000,
        drafter_weight_bytes=2_100_000_000,
        overall=measured(marginal=marginal, baseline_tokens_per_s=baseline, tokens_per_s=baseline * 2, speedup=2.0),
        per_set=(measured("code", digest, marginal=marginal),),
        created_at=T0 + timedelta(minutes=minutes)))
    assert record.tau == pytest.approx(1 + sum(marginal))
    assert record.run_id is not None
    return record.run_id


def test_no_measured_run_is_an_error_that_says_to_verify_first(store: Store) -> None:
    with pytest.raises(calibration.PricingInputError, match="drafters verify"):
        calibration.measured_acceptance(store, "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16")


def test_acceptance_comes_from_the_newest_run_or_the_one_on_the_users_prompts(store: Store) -> None:
    older = _run(store, hardware="RTX 3090", baseline=100, minutes=0, marginal=(0.9, 0.8, 0.7), digest="mine")
    newer = _run(store, hardware="RTX 3090", baseline=100, minutes=5, marginal=(0.5, 0.2), digest="other")
    latest = calibration.measured_acceptance(store, "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16")
    assert latest.run_id == newer and latest.marginal == (0.5, 0.2) and newer[:12] in latest.source
    mine = calibration.measured_acceptance(store, "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16",
                                           prompt_digests={"my prompts": "mine"})
    assert mine.run_id == older and mine.marginal == (0.9, 0.8, 0.7) and mine.prompt_sets == ("code",)
    with pytest.raises(calibration.PricingInputError, match="used these prompts"):
        calibration.measured_acceptance(store, "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16",
                                        prompt_digests={"x": "never measured"})


def test_calibration_predicts_every_run_leave_one_out_and_stores_the_error(store: Store) -> None:
    cpu = [_run(store, hardware="cpu (test)", baseline=b, minutes=i) for i, b in enumerate((10.0, 12.0, 11.0))]
    lonely = _run(store, hardware="cpu (other)", baseline=5.0, minutes=10)
    gpu = _run(store, hardware="NVIDIA GeForce RTX 3090", baseline=100.0, minutes=11)
    predictions = {p.run_id: p for p in calibration.predict_runs(store)}
    assert set(predictions) == {*cpu, lonely, gpu}
    # Same bytes per step everywhere, so a CPU run's predicted tok/s is the median of the OTHER runs' tok/s.
    assert predictions[cpu[0]].predicted_baseline_tokens_per_s == pytest.approx(11.5)
    assert predictions[cpu[0]].baseline_error == pytest.approx(11.5 / 10 - 1)
    assert predictions[cpu[1]].predicted_baseline_tokens_per_s == pytest.approx(10.5)
    assert predictions[lonely].predicted_baseline_tokens_per_s is None
    assert "fewer than 2 other runs" in predictions[lonely].note
    # The catalog card at the assumed efficiency: 936 GB/s × 0.7 over the bytes one target step reads.
    g = predictions[gpu]
    assert g.predicted_baseline_tokens_per_s == pytest.approx(936e9 * 0.7 / _bytes_per_step(store, gpu))
    assert "assumed efficiency" in g.device_basis
    assert g.predicted_speedup is not None and g.predicted_speedup > 1 and g.speedup_error is not None

    before = store.runs.get_run(cpu[0])
    assert calibration.store_predictions(store, list(predictions.values())) == 5
    stored = store.runs.get_run(cpu[0])
    assert stored is not None and stored.prediction is not None
    assert stored.prediction.baseline_error == pytest.approx(0.15)
    assert stored.per_position_acceptance == (0.8, 0.6)  # the run's own measurement is kept
    assert replace(stored, prediction=None) == before
    assert calibration.store_predictions(store, list(predictions.values())) == 0  # unchanged: nothing rewritten
    json.dumps(to_json(stored))


def _bytes_per_step(store: Store, run_id: str) -> float:
    run = store.runs.get_run(run_id)
    assert run is not None
    entry = calibration._run_bytes(store, run)
    assert not isinstance(entry, str)
    return entry.step_bytes


def _set_measured(store: Store, run_id: str, baseline: float) -> None:
    """Change what a stored run measured, as if it had been measured at another speed."""
    run = store.runs.get_run(run_id)
    assert run is not None and run.overall is not None
    remeasured = replace(run, overall=replace(run.overall, baseline_tokens_per_s=reading(baseline),
                                              tokens_per_s=reading(baseline * 2)))
    with store.session() as session:
        row = session.scalar(select(BenchmarkRun).where(BenchmarkRun.run_id == run_id))
        assert row is not None
        row.metrics = run_values(remeasured)["metrics"]
        row.baseline_tokens_per_s, row.tokens_per_s = baseline, baseline * 2
    assert store.runs.get_run(run_id).baseline_tokens_per_s == baseline  # type: ignore[union-attr]


@pytest.mark.parametrize("hardware", ["cpu (test)", "NVIDIA GeForce RTX 3090"])
def test_a_run_is_never_predicted_from_its_own_measurement(store: Store, hardware: str) -> None:
    """Leave-one-out, on a fitted CPU bandwidth and on a fitted GPU efficiency: changing what the judged run
    measured leaves its prediction unchanged (and does change the other runs', which are fitted from it)."""
    judged, *others = [_run(store, hardware=hardware, baseline=b, minutes=i)
                       for i, b in enumerate((10.0, 12.0, 11.0))]
    before = {p.run_id: p for p in calibration.predict_runs(store)}
    assert judged not in before[judged].fitted_from and set(before[judged].fitted_from) == set(others)
    _set_measured(store, judged, 1000.0)
    after = {p.run_id: p for p in calibration.predict_runs(store)}
    assert after[judged].predicted_baseline_tokens_per_s == pytest.approx(before[judged].predicted_baseline_tokens_per_s)
    assert after[judged].predicted_tokens_per_s == pytest.approx(before[judged].predicted_tokens_per_s)
    assert after[judged].baseline_error != pytest.approx(before[judged].baseline_error)  # judged against the new one
    for other in others:
        assert after[other].predicted_baseline_tokens_per_s != pytest.approx(
            before[other].predicted_baseline_tokens_per_s)


def test_one_other_run_is_not_a_fit(store: Store) -> None:
    first = _run(store, hardware="cpu (test)", baseline=10.0, minutes=0)
    second = _run(store, hardware="cpu (test)", baseline=12.0, minutes=1)
    for prediction in calibration.predict_runs(store):
        assert prediction.run_id in (first, second) and not prediction.predicted
        assert "fewer than 2 other runs" in prediction.note
    gpu = [_run(store, hardware="NVIDIA GeForce RTX 3090", baseline=b, minutes=5 + i) for i, b in enumerate((90, 95))]
    by_id = {p.run_id: p for p in calibration.predict_runs(store)}
    for run_id in gpu:  # one other GPU run: the efficiency stays the stated assumption
        assert by_id[run_id].fitted_from == () and "assumed efficiency" in by_id[run_id].device_basis


def test_storing_a_run_stores_its_prediction_and_reads_recompute_an_older_models(store: Store) -> None:
    runs = [_run(store, hardware="cpu (test)", baseline=b, minutes=i) for i, b in enumerate((10.0, 12.0))]
    newest = store.runs.get_run(_run(store, hardware="cpu (test)", baseline=11.0, minutes=3))
    assert newest is not None
    recorded = record_measurement(store, newest)
    stored = store.runs.get_run(newest.run_id)
    assert stored is not None and stored.prediction is not None and stored.prediction == recorded.prediction
    assert stored.prediction.model_version == calibration.MODEL_VERSION
    assert stored.prediction.predicted_baseline_tokens_per_s == pytest.approx(11.0)  # median(10, 12)
    assert set(stored.prediction.fitted_from) == set(runs)
    # A run recorded later does not move the stored forecast...
    _run(store, hardware="cpu (test)", baseline=100.0, minutes=4)
    shown = calibration.current_predictions(store, [store.runs.get_run(newest.run_id)])  # type: ignore[list-item]
    assert shown[newest.run_id].predicted_baseline_tokens_per_s == pytest.approx(11.0)
    # ...but one made by an older model version is not shown: it is recomputed on read (from all other runs).
    with store.session() as session:
        row = session.scalar(select(BenchmarkRun).where(BenchmarkRun.run_id == newest.run_id))
        assert row is not None
        assert row.prediction is not None
        row.prediction.prediction = {**row.prediction.prediction, "model_version": 0}
    old = store.runs.get_run(newest.run_id)
    assert old is not None and calibration.stored_prediction(old) is None
    recomputed = calibration.current_predictions(store, [old])[newest.run_id]
    assert recomputed.predicted_baseline_tokens_per_s == pytest.approx(12.0)  # median(10, 12, 100)
    failed = store.runs.record_run(Run(target="Qwen/Qwen3-8B", drafter=None, status="failed", failure_reason="oom"))
    assert record_measurement(store, failed).prediction is None
    assert store.runs.get_run(failed.run_id).prediction is None  # type: ignore[union-attr]
    assert "failed" in calibration.current_predictions(store, [failed])[failed.run_id].note
