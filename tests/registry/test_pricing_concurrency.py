"""`drafters price --concurrency`: the batch-c roofline (docs/pricing.md, "At concurrency c") and its error
against measured speedup curves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry.calibration.curve_prediction import check_curve, median_error
from registry.domain import pricing
from registry.domain.curve import CurvePoint, SpeedupCurve, SweepConditions
from registry.domain.pricing_concurrency import curve_errors, fitted_device, predict_curve
from registry.store import Store
from tests.conftest import REPO_ROOT
from tests.support.cli import drafters

EIGHT_BIT = pricing.Quantization("8-bit", 8.0)
# 1 GB/s and 1e11 operations/s; the target's 1e9 parameters at 8 bits are 1 GB (1 s a step), the drafter's 1e8
# at bf16 0.2 GB.
DEVICE = pricing.Device("test", "discrete", 1e9, bf16_ops_s=1e11, int8_ops_s=1e11, budget_bytes=None, basis="test")
PAIR = pricing.PairShape(pricing.NetworkShape(10**9, 10**9), pricing.NetworkShape(10**8, 10**8), "dflash")
ACCEPTANCE = pricing.Acceptance((0.9, 0.5, 0.1), "test")  # τ(3) = 2.5


def test_the_gain_holds_while_memory_bound_and_falls_once_verifying_is_compute_bound() -> None:
    points = predict_curve(PAIR, tau=ACCEPTANCE.tau(3), gamma=3, levels=[1, 16, 64], quant=EIGHT_BIT, context=0,
                           device=DEVICE)
    # c=1: the batch-1 model. c=16: the baseline still reads 1 GB (1 s), verifying 64 tokens costs 1.28 s of
    # compute. c=64: the baseline is compute-bound too (1.28 s), verifying 256 tokens 5.12 s, drafting 0.512 s.
    assert [p.speedup for p in points] == pytest.approx([2.5 / 1.2, 2.5 / 1.48, 2.5 * 1.28 / 5.632])
    batch_one = pricing.price(PAIR, ACCEPTANCE, DEVICE, quant=EIGHT_BIT, context=0, gammas=[3])
    assert points[0].speedup == pytest.approx(batch_one.speedup)
    assert points[2].baseline_tokens_per_s == pytest.approx(64 / 1.28) and points[2].speedup < 1.0
    assert all(p.fits is None for p in points)  # the device's memory is unknown
    # Every request holds its own KV: on a 2 GB card with 0.25 GB of KV per request, c=4 fits and c=8 does not.
    kv_pair = pricing.PairShape(pricing.NetworkShape(10**9, 10**9, kv=(pricing.KvLayers(1, 2500.0),)),
                                pricing.NetworkShape(0, 0), "dflash")
    small = pricing.Device("small", "discrete", 1e9, 1e11, 1e11, budget_bytes=2 * 10**9, basis="")
    fits = predict_curve(kv_pair, tau=2.0, gamma=1, levels=[4, 8], quant=EIGHT_BIT, context=100_000, device=small)
    assert [p.fits for p in fits] == [True, False]


def _measured(speedup_scale: float = 1.0) -> tuple[CurvePoint, ...]:
    """A curve measured on DEVICE exactly as the model says (times `speedup_scale` for the speculative side)."""
    predicted = predict_curve(PAIR, tau=[2.5, 2.5, 2.5], gamma=3, levels=[1, 16, 64], quant=EIGHT_BIT, context=0,
                              device=DEVICE)
    return tuple(CurvePoint(concurrency=p.concurrency, requests=8, output_tokens=100, seconds=1.0,
                            tokens_per_s=p.tokens_per_s * speedup_scale, baseline_tokens_per_s=p.baseline_tokens_per_s,
                            latency_per_token_s=0.01, baseline_latency_per_token_s=0.01, tau=2.5, drafts=10)
                 for p in predicted)


def test_a_device_outside_the_catalog_is_read_from_the_baseline_points_only() -> None:
    device = fitted_device(PAIR, _measured(), quant=EIGHT_BIT, context=0, name="some CPU")
    assert device.bandwidth_bytes_s == pytest.approx(1e9) and device.bf16_ops_s == pytest.approx(1e11)
    # The speculative side never enters the fit: halving it moves the error, not the device.
    again = fitted_device(PAIR, _measured(0.5), quant=EIGHT_BIT, context=0, name="some CPU")
    assert again.bandwidth_bytes_s == device.bandwidth_bytes_s and again.bf16_ops_s == device.bf16_ops_s
    predicted = predict_curve(PAIR, tau=2.5, gamma=3, levels=[1, 16, 64], quant=EIGHT_BIT, context=0, device=again)
    assert [e.error for e in curve_errors(predicted, _measured())] == pytest.approx([0.0, 0.0, 0.0])
    assert [e.error for e in curve_errors(predicted, _measured(0.5))] == pytest.approx([1.0, 1.0, 1.0])


def _curve(points: tuple[CurvePoint, ...], hardware: str, provenance: dict) -> SpeedupCurve:
    conditions = SweepConditions(max_new_tokens=64, temperature=0.0, prompt_set="coding", prompt_digest="d",
                                 requests_per_level=8, url="http://127.0.0.1:1", baseline_url="http://127.0.0.1:2")
    return SpeedupCurve(target="Qwen/Qwen3-8B", drafter="z-lab/Qwen3-8B-DFlash-b16", engine="vllm",
                        engine_version="0.11.0", hardware=hardware, conditions=conditions, points=points,
                        provenance=provenance)


def test_stored_curves_are_checked_with_their_own_draft_length_and_tau() -> None:
    unknown = check_curve(_curve(_measured(), "a CPU", {}), PAIR, gamma=None, quant=EIGHT_BIT)
    assert not unknown.errors and "draft length" in (unknown.note or "")
    off = check_curve(_curve(_measured(0.5), "a CPU", {"draft_length": 3}), PAIR, gamma=None, quant=EIGHT_BIT)
    assert off.gamma == 3 and "fitted from the curve's baseline" in off.device_basis
    assert [e.error for e in off.errors] == pytest.approx([1.0, 1.0, 1.0]) and median_error([off]) == pytest.approx(1.0)


def test_price_cli_predicts_the_curve_per_gpu_and_its_error_on_a_measured_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "DRAFTERS_HOME": str(home), "COLUMNS": "200"}
    assert drafters("catalog", "load", env=env).returncode == 0
    store = Store.open(f"sqlite:///{home / 'registry.db'}")
    points = tuple(CurvePoint(concurrency=c, requests=8, output_tokens=100, seconds=1.0, tokens_per_s=100 * s,
                              baseline_tokens_per_s=100.0, latency_per_token_s=0.01,
                              baseline_latency_per_token_s=0.01, tau=4.0, drafts=10)
                   for c, s in ((1, 2.6), (16, 1.1), (64, 0.9)))
    store.curves.record_curve(_curve(points, "NVIDIA H100 80GB HBM3", {"source": "sweep"}))
    args = ("price", "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16", "--gpu", "H100 SXM", "--quant", "bf16",
            "--context", "1024", "--concurrency", "1,16,64")
    result = drafters(*args, "--draft-length", "7", "--json", env=env)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)["concurrency"]
    (gpu,) = body["gpus"]
    assert gpu["gpu"] == "H100 SXM" and gpu["gamma"] == 7 and [p["concurrency"] for p in gpu["points"]] == [1, 16, 64]
    (checked,) = body["measured_curves"]
    assert checked["gamma"] == 7 and [e["concurrency"] for e in checked["errors"]] == [1, 16, 64]
    for error, measured in zip(checked["errors"], (2.6, 1.1, 0.9)):
        assert error["measured"] == pytest.approx(measured)
        assert error["error"] == pytest.approx(error["predicted"] / measured - 1)
    assert body["median_abs_error"] == pytest.approx(sorted(abs(e["error"]) for e in checked["errors"])[1])
    table = drafters(*args, env=env)
    assert table.returncode == 0, table.stderr
    assert "predicted speedup at each concurrency" in table.stdout and "give --draft-length" in table.stdout
    assert drafters(*args[:-1], "0,4", env=env).returncode == 2


def test_bench_curve_price_reports_the_error_on_every_stored_curve(tmp_path: Path) -> None:
    """bench/curve_price.py --database: each stored curve predicted at its levels, the error per level and the
    median over all; a curve that records no draft length is named as not checked, with why."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    store = Store.open(url)
    points = tuple(CurvePoint(concurrency=c, requests=8, output_tokens=100, seconds=1.0, tokens_per_s=100 * s,
                              baseline_tokens_per_s=100.0, latency_per_token_s=0.01,
                              baseline_latency_per_token_s=0.01, tau=4.0, drafts=10)
                   for c, s in ((1, 2.6), (16, 1.1), (64, 0.9)))
    checked = store.curves.record_curve(_curve(points, "NVIDIA H100 80GB HBM3", {"draft_length": 7}))
    unchecked = store.curves.record_curve(_curve(points, "NVIDIA H100 80GB HBM3", {"source": "sweep"}))
    result = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "curve_price.py"), "--database", url, "--json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    (curve,) = body["curves"]
    assert curve["curve_id"] == checked.curve_id and curve["gamma"] == 7 and "H100 SXM" in curve["device_basis"]
    assert [level["concurrency"] for level in curve["levels"]] == [1, 16, 64]
    for level, measured in zip(curve["levels"], (2.6, 1.1, 0.9)):
        assert level["measured"] == pytest.approx(measured)
        assert level["error"] == pytest.approx(level["predicted"] / measured - 1)
    assert body["levels"] == 3
    assert body["median_abs_error"] == pytest.approx(sorted(abs(level["error"]) for level in curve["levels"])[1])
    # The shape: each level's speedup ÷ the lowest level's, predicted against measured.
    first = curve["levels"][0]
    shape = sorted(abs((x["predicted"] / first["predicted"]) / (x["measured"] / first["measured"]) - 1)
                   for x in curve["levels"][1:])
    assert body["median_abs_shape_error"] == pytest.approx(sum(shape) / 2)
    (skipped,) = body["skipped"]
    assert skipped.startswith(f"curve {unchecked.curve_id} ") and "give --draft-length" in skipped
