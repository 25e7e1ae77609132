"""Memory-budget arithmetic: weights at each quantization plus the target's KV cache against card sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry.domain import memory

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "configs"


def _config(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


def test_kv_geometry_of_qwen3_8b_uses_grouped_kv_heads() -> None:
    geometry = memory.kv_geometry(_config("Qwen__Qwen3-8B.json"))
    assert geometry == memory.KvGeometry(layers=36, kv_heads=8, head_dim=128)


def test_kv_geometry_reads_the_nested_text_config() -> None:
    config = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "text_config": {"num_hidden_layers": 60, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 256},
    }
    assert memory.kv_geometry(config) == memory.KvGeometry(layers=60, kv_heads=16, head_dim=256)


def test_kv_geometry_falls_back_to_attention_heads_and_hidden_over_heads() -> None:
    geometry = memory.kv_geometry({"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512})
    assert geometry == memory.KvGeometry(layers=4, kv_heads=8, head_dim=64)


@pytest.mark.parametrize("config", [None, {}, {"num_hidden_layers": 4}, {"num_attention_heads": 8, "num_hidden_layers": 2}])
def test_kv_geometry_is_none_when_the_config_does_not_say(config: dict | None) -> None:
    assert memory.kv_geometry(config) is None


def test_kv_cache_bytes_formula_for_qwen3_8b_at_32k() -> None:
    geometry = memory.KvGeometry(layers=36, kv_heads=8, head_dim=128)
    # 2 × 36 × 8 × 128 × 2 bytes = 147,456 bytes a token; 32,768 tokens = 4.5 GiB.
    assert memory.kv_cache_bytes(geometry, 32768) == 147_456 * 32768 == int(4.5 * memory.GIB)
    assert memory.kv_cache_bytes(geometry, 0) == 0
    assert memory.kv_cache_bytes(geometry, 1000, bytes_per_element=1) == 73_728_000


def test_negative_context_is_refused() -> None:
    with pytest.raises(memory.BudgetError, match="at least 0"):
        memory.kv_cache_bytes(memory.KvGeometry(1, 1, 1), -1)


def test_stored_bits_follow_quantization_then_dtype() -> None:
    assert memory.stored_bits_per_weight(_config("openai__gpt-oss-20b.json")) == memory.MXFP4.bits_per_weight
    assert memory.stored_bits_per_weight(_config("Qwen__Qwen3-8B.json")) == 16
    assert memory.stored_bits_per_weight({"torch_dtype": "float32"}) == 32
    assert memory.stored_bits_per_weight({"quantization_config": {"quant_method": "fp8"}, "torch_dtype": "bfloat16"}) == 8
    assert memory.stored_bits_per_weight({"text_config": {"dtype": "float16"}}) == 16
    assert memory.stored_bits_per_weight(None) == 16


def test_parameter_estimate_prefers_the_counted_number() -> None:
    assert memory.parameter_estimate(parameter_count=8_000_000_000, weight_bytes=1) == 8_000_000_000
    assert memory.parameter_estimate(parameter_count=None, weight_bytes=16_000_000_000) == 8_000_000_000
    # mxfp4 files hold a weight in 4.25 bits: 13 GB of them are ~24.5B weights, not 6.5B.
    assert memory.parameter_estimate(parameter_count=None, weight_bytes=13_000_000_000, stored_bits=4.25) == round(
        13_000_000_000 * 8 / 4.25
    )
    assert memory.parameter_estimate(parameter_count=None, weight_bytes=None) is None
    with pytest.raises(memory.BudgetError):
        memory.parameter_estimate(parameter_count=None, weight_bytes=-5)


def test_weight_bytes_at_each_quantization() -> None:
    params = 8_000_000_000
    assert memory.weight_bytes_at(params, memory.BF16) == 16_000_000_000
    assert memory.weight_bytes_at(params, memory.FP8) == 8_000_000_000
    assert memory.weight_bytes_at(params, memory.Q8_0) == 8_500_000_000
    assert memory.weight_bytes_at(params, memory.Q4_0) == 4_500_000_000
    assert memory.weight_bytes_at(params, memory.MXFP4) == 4_250_000_000
    assert 4.5 <= memory.Q4_K_M.bits_per_weight <= 4.8


def test_budget_table_answers_the_12_gb_card_question() -> None:
    """Qwen3-8B (8.2B) + a 1B bf16 DFlash drafter at 32K context: Q4_K_M needs 12 GB, bf16 needs 24 GB."""
    kv = memory.KvGeometry(layers=36, kv_heads=8, head_dim=128)
    rows = memory.budget_table(target_parameters=8_190_000_000, drafter_parameters=1_000_000_000, kv=kv, context_tokens=32768)
    assert len(rows) == len(memory.QUANTIZATIONS) * len(memory.CARD_SIZES_GB)
    q4 = {r.card_gb: r for r in rows if r.quantization == "Q4_K_M"}
    kv_bytes = 147_456 * 32768
    assert q4[12].kv_cache_bytes == kv_bytes
    assert q4[12].drafter_bytes == 2_000_000_000  # the drafter stays bf16
    assert q4[12].target_bytes == round(8_190_000_000 * 4.8 / 8)
    assert q4[12].total_bytes == q4[12].target_bytes + q4[12].drafter_bytes + kv_bytes
    assert q4[12].headroom_bytes == 12 * memory.GIB - q4[12].total_bytes
    assert q4[12].fits and not q4[8].fits
    assert memory.smallest_card(rows, "Q4_K_M") == 12
    assert memory.smallest_card(rows, "bf16") == 24
    assert all(r.fits == (r.headroom_bytes >= 0) for r in rows)


def test_drafter_can_be_quantized_like_the_target_and_missing_parts_count_zero() -> None:
    rows = memory.budget_table(
        target_parameters=1000, drafter_parameters=100, kv=None, quantizations=[memory.Q4_0], cards_gb=[8],
        drafter_quantization=None,
    )
    assert rows[0].drafter_bytes == round(100 * 4.5 / 8)
    assert rows[0].kv_cache_bytes == 0
    alone = memory.budget_table(target_parameters=1000, drafter_parameters=None, kv=None, cards_gb=[8])
    assert {r.drafter_bytes for r in alone} == {0}


def test_nothing_fits_a_huge_model() -> None:
    rows = memory.budget_table(target_parameters=400_000_000_000, drafter_parameters=None, kv=None)
    assert not any(r.fits for r in rows)
    assert memory.smallest_card(rows, "bf16") is None


def test_negative_parameters_are_refused() -> None:
    with pytest.raises(memory.BudgetError, match="negative"):
        memory.budget_table(target_parameters=-1, drafter_parameters=None, kv=None)


@pytest.mark.parametrize(
    ("label", "expected"),
    [("8B", 8 * 10**9), ("0.6B", 600_000_000), ("1.5t", 1_500_000_000_000), ("350M", 350_000_000), ("E2B", None), (None, None), ("", None)],
)
def test_parameters_from_size_label(label: str | None, expected: int | None) -> None:
    assert memory.parameters_from_size_label(label) == expected


def test_estimate_parameters_says_what_it_used() -> None:
    counted = memory.estimate_parameters(parameter_count=5, weight_bytes=100, config=None, size_label="8B")
    assert counted == memory.ParameterEstimate(5, "parameter count")
    from_bytes = memory.estimate_parameters(
        parameter_count=None, weight_bytes=16_000, config={"torch_dtype": "float32"}, size_label="8B"
    )
    assert from_bytes == memory.ParameterEstimate(4_000, "weight bytes at 32 bits")
    from_name = memory.estimate_parameters(parameter_count=None, weight_bytes=None, config=None, size_label="8B")
    assert from_name == memory.ParameterEstimate(8 * 10**9, "size in the name (8B)")
    assert memory.estimate_parameters(parameter_count=None, weight_bytes=None, config=None, size_label="E4B").parameters is None


def test_sizes_are_printed_in_the_binary_units_they_are_counted_in() -> None:
    assert memory.binary_size(24 * 2**30) == "24.0 GiB" and memory.binary_size(1.5 * 2**30) == "1.5 GiB"
    assert memory.binary_size(3 * 2**20) == "3.0 MiB"  # below a tenth of a GiB, MiB: a tiny model is not "0.0 GiB"
