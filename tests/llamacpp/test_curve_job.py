"""`drafters verify --engine llamacpp --concurrency`: the verifier measures a pair's speedup curve itself, as a
queued job the worker runs, on the tiny Qwen3 pair: two llama-servers with parallel slots, per length and thinking
mode. Cheap: two levels, few tokens."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry.domain.curve import crossover
from registry.store import Store
from tests.llamacpp import SKIP_VARIABLE
from tests.support.cli import drafters
from verifier.curve_job import CurveRequest, curve_engine
from verifier.engines.llamacpp.install import find_server
from verifier.jobs import curve_now

needs_llama = pytest.mark.skipif(os.environ.get(SKIP_VARIABLE) == "1", reason=f"{SKIP_VARIABLE}=1")

# The tiny target's template plus Qwen3's switch: with enable_thinking false, an empty think block after the
# generation prompt (the tiny template itself has no switch).
THINKING_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] }}"
    "{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{% endif %}"
)


@needs_llama
def test_a_curve_job_measures_the_pair_per_length_and_thinking_mode(llama_env: None, qwen3_target: Path,
                                                                      draft_lm: Path, tmp_path: Path) -> None:
    template = tmp_path / "thinking.jinja"
    template.write_text(THINKING_TEMPLATE)
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home"),
           "DRAFTERS_LLAMACPP_ARGS": f"--chat-template-file {template}"}
    queued = drafters("verify", str(qwen3_target), str(draft_lm), "--engine", "llamacpp", "--concurrency", "1,2",
                      "--max-new-tokens", "8,16", "--thinking-both", "--sets", "code,chat", "--enqueue", env=env)
    assert queued.returncode == 0, queued.stderr
    assert "queued curve job" in queued.stdout and "the PyTorch engine is batch 1 only" in queued.stdout
    worked = drafters("worker", "--once", env=env, timeout=300)
    assert worked.returncode == 0, worked.stderr
    assert "job 1: done" in worked.stdout

    store = Store.open(f"sqlite:///{tmp_path / 'home' / 'registry.db'}")
    curves = store.curves.curves(job_id=1)
    assert sorted((c.conditions.max_new_tokens, c.conditions.thinking) for c in curves) == [
        (8, False), (8, True), (16, False), (16, True)]
    for curve in curves:
        assert curve.engine == "llama.cpp" and curve.engine_version == find_server().label
        assert curve.hardware and curve.hardware.startswith("cpu")
        assert curve.target == str(qwen3_target) and curve.drafter == str(draft_lm)
        assert curve.provenance["source"] == "curve job" and curve.provenance["slots"] == 2
        assert curve.provenance["thinking_asked"] is curve.conditions.thinking
        # The tiny builds are flagged, so the curve never speaks for a real checkpoint; γ is what pricing needs.
        assert curve.provenance["test_model"] is True and curve.provenance["draft_length"] > 0
        assert curve.conditions.prompt_format == "chat" and curve.conditions.prompt_set == "code+chat"
        assert "read by the served template" in (curve.conditions.thinking_note or "")
        assert [p.concurrency for p in curve.points] == [1, 2]
        for point in curve.points:
            assert point.requests == 8 and point.drafts and point.tau and point.tau > 1.0
            # Each slot's own counts, request by request, beside the server's counters.
            assert point.request_drafted and point.request_drafted >= (point.request_accepted or 0) > 0
            assert 0 < point.output_tokens <= 8 * curve.conditions.max_new_tokens
        assert curve.crossover == crossover(curve.points)

    # A retry of the job (its worker died after storing) measures nothing again: the same curves, no duplicates.
    request = CurveRequest(target=str(qwen3_target), drafter=str(draft_lm), concurrency=(1, 2), lengths=(8, 16),
                           thinking=(True, False), prompt_sets=("code", "chat"))
    again = curve_now(store, request, job_id=1)
    assert sorted(c.curve_id for c in again) == sorted(c.curve_id for c in curves)
    assert len(store.curves.curves()) == 4


@needs_llama
def test_a_template_without_the_switch_records_thinking_unknown(llama_env: None, qwen3_target: Path,
                                                                draft_lm: Path, tmp_path: Path) -> None:
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home")}
    result = drafters("verify", str(qwen3_target), str(draft_lm), "--engine", "llamacpp", "--concurrency", "1",
                      "--max-new-tokens", "8", "--thinking", "--sets", "code", "--json", env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    store = Store.open(f"sqlite:///{tmp_path / 'home' / 'registry.db'}")
    [curve] = store.curves.curves()
    assert curve.job_id is None and curve.provenance["thinking_asked"] is True
    assert curve.conditions.thinking is None  # asked for, but the tiny template ignores it: never guessed
    assert "ignores enable_thinking" in (curve.conditions.thinking_note or "")


def test_a_curve_is_llamacpp_only_and_its_options_go_with_concurrency(tmp_path: Path) -> None:
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home")}
    pytorch = drafters("verify", "t", "d", "--concurrency", "1,2", env=env)
    assert pytorch.returncode == 2 and "batch 1 only" in pytorch.stderr
    lengths = drafters("verify", "t", "d", "--max-new-tokens", "8,16", env=env)
    assert lengths.returncode == 2 and "go with --concurrency" in lengths.stderr
    with pytest.raises(ValueError, match="batch 1 only"):
        CurveRequest(target="t", drafter="d", engine="pytorch")
    assert curve_engine() == "llama.cpp"
