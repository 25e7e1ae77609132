"""`drafters sweep`: a drafter's speedup at each concurrency, measured end to end against two real llama-servers on
the tiny Qwen3 pair (the speculative one with the draft LM, the baseline without), both with parallel slots."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from registry.domain.curve import CurvePoint, crossover, describe, pays_up_to
from registry.store import Store
from tests.llamacpp import SKIP_VARIABLE
from tests.support.cli import drafters

needs_llama = pytest.mark.skipif(os.environ.get(SKIP_VARIABLE) == "1", reason=f"{SKIP_VARIABLE}=1")


def _point(concurrency: int, speedup: float) -> CurvePoint:
    return CurvePoint(concurrency=concurrency, requests=8, output_tokens=100, seconds=1.0, tokens_per_s=100 * speedup,
                      baseline_tokens_per_s=100.0, latency_per_token_s=0.01, baseline_latency_per_token_s=0.01,
                      tau=2.0, drafts=10)


def test_the_crossover_is_the_first_level_that_stops_paying() -> None:
    falling = [_point(c, s) for c, s in ((1, 2.6), (4, 1.36), (16, 1.1), (32, 0.99), (64, 0.9))]  # AMD-AGI/Infera#74
    assert (crossover(falling), pays_up_to(falling)) == (32, 16)
    assert (crossover(falling[:3]), pays_up_to(falling[:3])) == (None, 16)  # pays everywhere it was measured
    assert (crossover([_point(1, 0.8)]), pays_up_to([_point(1, 0.8)])) == (1, None)
    assert crossover([_point(8, 1.0)]) == 8  # break-even is no gain


@pytest.fixture(scope="module")
def servers(llama_options, qwen3_target: Path, draft_lm: Path, server_binary):
    from verifier.engines.llamacpp.convert import cached_gguf
    from verifier.engines.llamacpp.server import Draft, LlamaServer

    def gguf(folder: Path) -> Path:
        return cached_gguf(folder, llama_options.gguf_cache, source=llama_options.source_dir,
                           build=server_binary.build).path

    # Four parallel slots (the last -np wins) sharing the context.
    options = replace(llama_options, extra_args=("-np", "4"))
    spec = LlamaServer(binary=server_binary, model=gguf(qwen3_target), ctx_size=2048, options=options,
                       draft=Draft(gguf(draft_lm), "draft-simple", 4))
    base = LlamaServer(binary=server_binary, model=gguf(qwen3_target), ctx_size=2048, options=options, draft=None)
    with spec, base:
        yield spec, base


def _key(server) -> str:
    return server._client.headers["Authorization"].removeprefix("Bearer ")


@needs_llama
def test_a_sweep_against_llama_server_records_a_curve_that_reads_back(servers, tmp_path: Path) -> None:
    spec, base = servers
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home"), "SPEC_KEY": _key(spec), "BASE_KEY": _key(base)}
    result = drafters("sweep", "--url", spec.url, "--baseline-url", base.url, "--concurrency", "1,2,4",
                      "--max-new-tokens", "24", "--requests-per-level", "8", "--hardware", "test machine",
                      "--drafter", "tiny-draft-lm", "--api-key-env", "SPEC_KEY", "--baseline-api-key-env", "BASE_KEY",
                      "--json", env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["schema_version"] >= 2
    [body] = body["curves"]
    assert [p["concurrency"] for p in body["points"]] == [1, 2, 4]

    store = Store.open(f"sqlite:///{tmp_path / 'home' / 'registry.db'}")
    [curve] = store.curves.curves(drafter="tiny-draft-lm")
    assert curve.engine == "llama.cpp" and curve.hardware == "test machine"
    assert curve.provenance["source"] == "sweep" and curve.provenance["method"] == "draft-simple"
    assert curve.conditions.max_new_tokens == 24 and curve.conditions.requests_per_level == 8
    assert curve.conditions.url == spec.url and curve.conditions.baseline_url == base.url
    for point in curve.points:
        assert point.requests == 8 and point.drafts and point.tau and point.tau > 1.0
        assert 0 < point.output_tokens <= 8 * 24
        assert point.tokens_per_s > 0 and point.baseline_tokens_per_s > 0
    assert curve.crossover == crossover(curve.points) and body["crossover"] == curve.crossover
    assert body["speedups"] == [round(p.speedup, 4) for p in curve.points]
    assert describe(curve).startswith(("pays", "does not pay"))

    # Two lengths: one curve each, and the speedup against length.
    table = drafters("sweep", "--url", spec.url, "--baseline-url", base.url, "--concurrency", "2",
                     "--max-new-tokens", "8,16", "--requests-per-level", "2", "--api-key-env", "SPEC_KEY",
                     "--baseline-api-key-env", "BASE_KEY", env={**env, "COLUMNS": "120"}, timeout=300)
    assert table.returncode == 0, table.stderr
    assert "concurrency" in table.stdout and "×" in table.stdout and "curve 3" in table.stdout
    assert "speedup against length at c=2: 8 tokens" in table.stdout
    assert sorted(c.conditions.max_new_tokens for c in store.curves.curves()) == [8, 16, 24]

    # Thinking on and off: chats through the served template, which (the tiny one) ignores the switch.
    chats = drafters("sweep", "--url", spec.url, "--baseline-url", base.url, "--concurrency", "1",
                     "--max-new-tokens", "4", "--requests-per-level", "2", "--thinking", "on,off", "--api-key-env",
                     "SPEC_KEY", "--baseline-api-key-env", "BASE_KEY", "--json", env=env, timeout=300)
    assert chats.returncode == 0, chats.stderr
    modes = [c for c in store.curves.curves() if c.conditions.prompt_format == "chat"]
    assert sorted(c.provenance["thinking_asked"] for c in modes) == [False, True]
    for curve in modes:
        assert curve.conditions.thinking is None and "ignores enable_thinking" in curve.conditions.thinking_note
        assert curve.points[0].tau and curve.points[0].output_tokens > 0


def test_sweep_refuses_what_it_cannot_measure(tmp_path: Path) -> None:
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home")}
    bad = drafters("sweep", "--url", "http://127.0.0.1:9", "--baseline-url", "http://127.0.0.1:9", "--concurrency",
                   "0,4", env=env, timeout=60)
    assert bad.returncode == 2 and "--concurrency takes values from 1 to 1024" in bad.stderr
    down = drafters("sweep", "--url", "http://127.0.0.1:9", "--baseline-url", "http://127.0.0.1:9", env=env, timeout=60)
    assert down.returncode == 2 and "cannot reach" in down.stderr
    thinking = drafters("sweep", "--url", "http://127.0.0.1:9", "--baseline-url", "http://127.0.0.1:9",
                        "--thinking", "maybe", env=env, timeout=60)
    assert thinking.returncode == 2 and "--thinking takes on, off or on,off" in thinking.stderr
