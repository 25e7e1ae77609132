"""bf16 ties are told from divergences: a greedy decode that leaves the baseline only where the run's dtype cannot
separate the two tokens is a tie (lossless holds), and a planted rollback bug whose divergence is barely wider
(margin 0.125 on the tiny Qwen3 pair) still fails the run."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import verifier.decode as decode_module
from drafters.cli.verifying import compare_command, verify_command
from registry.domain.measurement import DIVERGED, TIE, RunSettings, dtype_for
from verifier.engines.pytorch import run_pair, ulp
from verifier.prompts import bundled_set

BF16 = RunSettings(max_new_tokens=64, repeats=1, warmup=0, device="cpu", dtype="bfloat16", cost_repeats=1)


def _prompt(set_name: str, index: int, count: int = 1):
    found = bundled_set(set_name)
    return [replace(found, prompts=found.prompts[index : index + count])]


def test_a_bf16_tie_is_lossless_and_float32_is_exact(tiny_target_dir: Path) -> None:
    # The target as its own draft: in float32 the outputs are identical; in bf16 the verify pass (15 tokens at once)
    # rounds differently from a one-token step, and at position 14 of this prompt picks the other of two tokens the
    # bf16 logits cannot separate.
    prompts = _prompt("code", 2)
    tied = run_pair(tiny_target_dir, tiny_target_dir, prompts, BF16)
    assert tied.first_divergence is not None and tied.first_divergence.verdict == TIE
    found = tied.first_divergence
    assert found.float32_gap is not None and abs(found.float32_gap) <= found.tie_tolerance
    assert found.tie_tolerance == ulp(8.0, torch.bfloat16) == 0.0625  # one bf16 step at logits of 8 to 16
    assert tied.lossless is True and tied.ties == 1 and tied.per_set[0].lossless is True

    exact = run_pair(tiny_target_dir, tiny_target_dir, prompts, replace(BF16, dtype="float32"))
    assert exact.lossless is True and exact.ties == 0 and exact.first_divergence is None


@pytest.fixture
def stale_rollback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A planted rollback bug: after a rejection the last layer's newest kept position holds the first rejected
    draft's keys and values (the cache length is right, one entry is stale)."""
    real = decode_module.new_cache

    def buggy(model, verify_width: int = 1):
        cache = real(model, verify_width)

        def crop(n: int) -> None:
            layer = cache.layers[-1]
            stale = (layer.keys[:, :, n].clone(), layer.values[:, :, n].clone()) if n < 0 else None
            for each in cache.layers:
                each.crop(n)
            if stale is not None:
                layer.keys[:, :, -1], layer.values[:, :, -1] = stale

        cache.crop = crop
        return cache

    monkeypatch.setattr(decode_module, "new_cache", buggy)
    yield


def test_a_planted_rollback_bug_with_a_small_margin_still_fails(tiny_target_dir: Path, tiny_draft_lm_dir: Path,
                                                                stale_rollback: None) -> None:
    run = run_pair(tiny_target_dir, tiny_draft_lm_dir, _prompt("math", 0, 3), BF16)
    found = run.first_divergence
    assert found is not None and found.verdict == DIVERGED
    # Barely wider than a tie (0.125, two bf16 steps, on these models), and float32 agrees it is no tie.
    assert found.speculative_token_gap is not None and found.speculative_token_gap < 0.2
    assert found.float32_gap is not None and abs(found.float32_gap) > found.tie_tolerance
    assert run.lossless is False and run.per_set[0].lossless is False


def test_verify_runs_bf16_on_cuda_and_float32_on_a_cpu(tiny_target_dir: Path) -> None:
    for command in (verify_command, compare_command):
        assert inspect.signature(command).parameters["dtype"].default == "auto"
    assert (dtype_for("cuda"), dtype_for("cpu")) == ("bfloat16", "float32")
    run = run_pair(tiny_target_dir, None, _prompt("code", 0),
                   RunSettings(max_new_tokens=4, repeats=1, warmup=0, device="cpu", dtype="auto"))
    assert run.settings is not None and run.settings.dtype == "float32"  # the chosen dtype is stored, never "auto"
