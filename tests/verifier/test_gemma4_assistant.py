"""The Gemma-4 assistant method on a tiny trained Gemma-4 target + assistant, through the project's decode loop.

Checked against transformers' own assisted generation (`generate(assistant_model=...)`, which drives the assistant
through `SinglePositionMultiTokenCandidateGenerator`), instrumented to record each round's draft and acceptance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from verifier.decode import DecodeResult, decode, new_cache
from verifier.engines.pytorch import RunSettings
from verifier.loading import LoadedTarget, load_causal_lm, load_target
from verifier.methods import build_proposer as build
from verifier.methods.gemma4_assistant import (
    Gemma4AssistantProposer,
    IncompatibleAssistant,
    check_pairing,
)
from verifier.metrics import acceptance
from verifier.prompts import bundled_sets, encode_prompt
from verifier.proposer import Proposer, TargetOutput
from verifier.tiny.gemma4 import cached_gemma4_assistant

MAX_NEW_TOKENS = 64


@pytest.fixture(scope="module")
def untrained_assistant_dir(model_cache: Path, gemma4_target_dir: Path) -> Path:
    return cached_gemma4_assistant(model_cache, gemma4_target_dir, trained=False)


@pytest.fixture(scope="module")
def gemma4_target(gemma4_target_dir: Path) -> LoadedTarget:
    return load_target(gemma4_target_dir, device="cpu")


@pytest.fixture(scope="module")
def prompts(gemma4_target: LoadedTarget) -> list[list[int]]:
    """Every bundled prompt (code, math, chat, multilingual) as token ids."""
    return [encode_prompt(prompt, gemma4_target.tokenizer) for group in bundled_sets() for prompt in group.prompts]


def run_loop(target: LoadedTarget, proposer: Proposer, prompts: list[list[int]], temperature: float = 0.0):
    eos = frozenset({target.tokenizer.eos_token_id})
    generator = torch.Generator().manual_seed(0)
    return [
        decode(
            target.model,
            proposer,
            torch.tensor(ids),
            max_new_tokens=MAX_NEW_TOKENS,
            temperature=temperature,
            generator=generator,
            eos_token_ids=eos,
        )
        for ids in prompts
    ]


@pytest.fixture(scope="module")
def trained_runs(gemma4_target: LoadedTarget, assistant_dir: Path, prompts: list[list[int]]) -> list[DecodeResult]:
    return run_loop(gemma4_target, build("gemma4-assistant", assistant_dir, gemma4_target, RunSettings()), prompts)


@pytest.fixture(scope="module")
def untrained_runs(
    gemma4_target: LoadedTarget, untrained_assistant_dir: Path, prompts: list[list[int]]
) -> list[DecodeResult]:
    return run_loop(gemma4_target, build("gemma4-assistant", untrained_assistant_dir, gemma4_target, RunSettings()), prompts)


def tau(runs: list[DecodeResult]) -> float:
    return acceptance([record for run in runs for record in run.rounds]).tau


def test_assistant_is_greedy_lossless_on_every_bundled_prompt(
    gemma4_target: LoadedTarget,
    prompts: list[list[int]],
    trained_runs: list[DecodeResult],
    untrained_runs: list[DecodeResult],
) -> None:
    for ids, trained, untrained in zip(prompts, trained_runs, untrained_runs, strict=True):
        plain = gemma4_target.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
        expected = plain[0, len(ids) :].tolist()
        assert trained.tokens == expected
        assert untrained.tokens == expected
    assert any(record.accepted > 0 for run in trained_runs for record in run.rounds)


@contextmanager
def recorded_transformers_rounds(
    adjust_model_outputs: Callable[[torch.Tensor, Any], None] | None = None,
) -> Iterator[list[list[tuple[int, int]]]]:
    """Record (drafted, accepted) per round of transformers' Gemma-4 assisted generation, one list per generate.

    `accepted` is transformers' `n_matches` after its own end-of-generation trim.
    """
    from transformers.generation.candidate_generator import SinglePositionMultiTokenCandidateGenerator as Generator

    runs: list[list[tuple[int, int]]] = []
    original_get, original_update = Generator.get_candidates, Generator.update_candidate_strategy

    def get_candidates(self, input_ids, **kwargs):
        if kwargs.get("is_first_iteration"):
            runs.append([])
        elif adjust_model_outputs is not None:
            adjust_model_outputs(input_ids, kwargs["model_outputs"])
        candidates, logits = original_get(self, input_ids, **kwargs)
        self.recorded_draft = candidates.shape[1] - input_ids.shape[1]
        return candidates, logits

    def update_candidate_strategy(self, input_ids, scores, num_matches):
        if self.recorded_draft:  # the prefill pass drafts nothing
            runs[-1].append((self.recorded_draft, int(num_matches)))
        return original_update(self, input_ids, scores, num_matches)

    Generator.get_candidates, Generator.update_candidate_strategy = get_candidates, update_candidate_strategy
    try:
        yield runs
    finally:
        Generator.get_candidates, Generator.update_candidate_strategy = original_get, original_update


def transformers_assisted(target: LoadedTarget, assistant: Any, prompts: list[list[int]]) -> list[list[int]]:
    outputs = []
    for ids in prompts:
        generated = target.model.generate(
            torch.tensor([ids]), assistant_model=assistant, do_sample=False, max_new_tokens=MAX_NEW_TOKENS
        )
        outputs.append(generated[0, len(ids) :].tolist())
    return outputs


@pytest.fixture(scope="module")
def hf_assistant(assistant_dir: Path) -> Any:
    return load_causal_lm(assistant_dir, device=torch.device("cpu"), dtype=torch.float32)


def test_text_and_acceptance_agree_with_transformers_assisted_generation(
    gemma4_target: LoadedTarget, hf_assistant: Any, prompts: list[list[int]], trained_runs: list[DecodeResult]
) -> None:
    with recorded_transformers_rounds() as hf_runs:
        hf_texts = transformers_assisted(gemma4_target, hf_assistant, prompts)

    assert hf_texts == [run.tokens for run in trained_runs]
    assert len(hf_runs) == len(prompts)
    # Tokens committed by accepted drafts, after trimming at EOS / max_new_tokens (what transformers counts).
    ours = sum(record.emitted - 1 for run in trained_runs for record in run.rounds)
    theirs = sum(accepted for run in hf_runs for _, accepted in run)
    assert ours > 0
    assert abs(ours - theirs) <= 0.15 * ours


def test_drafting_equals_transformers_once_its_kv_slice_excludes_the_pending_position(
    gemma4_target: LoadedTarget, hf_assistant: Any, prompts: list[list[int]], trained_runs: list[DecodeResult]
) -> None:
    """After a rejection transformers slices the verify pass's K/V to the committed length, which keeps the K/V of
    the rejected draft at the pending token's position. With the slice ending before that position (what the
    loop's cache holds, and what transformers itself does after prefill or a fully accepted round) every round
    accepts exactly as many drafts as ours: the proposer reproduces transformers' drafting step for step."""
    window = gemma4_target.model.config.sliding_window

    def committed_kv_only(input_ids: torch.Tensor, model_outputs: Any) -> None:
        shared = model_outputs.shared_kv_states
        beyond = shared["full_attention"][0].shape[-2] - (input_ids.shape[1] - 1)
        trimmed = {}
        for layer_type, (keys, values) in shared.items():
            keys, values = keys[:, :, : keys.shape[-2] - beyond], values[:, :, : values.shape[-2] - beyond]
            if layer_type == "sliding_attention":  # the window the cache keeps
                keys, values = keys[:, :, -(window - 1) :], values[:, :, -(window - 1) :]
            trimmed[layer_type] = (keys, values)
        model_outputs.shared_kv_states = trimmed

    with recorded_transformers_rounds(committed_kv_only) as hf_runs:
        hf_texts = transformers_assisted(gemma4_target, hf_assistant, prompts)

    assert hf_texts == [run.tokens for run in trained_runs]
    for hf_rounds, run in zip(hf_runs, trained_runs, strict=True):
        # Near max_new_tokens transformers drafts fewer tokens; compare what each round committed.
        assert [accepted + 1 for _, accepted in hf_rounds] == [record.emitted for record in run.rounds]


def test_trained_assistant_accepts_far_more_than_untrained(
    trained_runs: list[DecodeResult], untrained_runs: list[DecodeResult]
) -> None:
    trained, untrained = tau(trained_runs), tau(untrained_runs)
    assert untrained < 1.3
    assert trained > 2.5
    assert trained > untrained + 1.5


def target_view_after_prefill(target: LoadedTarget, ids: list[int]) -> TargetOutput:
    prompt = torch.tensor(ids)
    cache = new_cache(target.model)
    with torch.inference_mode():
        out = target.model(input_ids=prompt[None], cache=cache, use_cache=True, output_hidden_states=True)
    return TargetOutput(
        start=0,
        input_ids=prompt,
        pending_token=int(out.logits[0, -1].argmax()),
        cache=cache,
        hidden_states=out.hidden_states,
    )


def test_sampling_returns_the_distributions_it_drew_from(
    gemma4_target: LoadedTarget, assistant_dir: Path, prompts: list[list[int]]
) -> None:
    proposer = build("gemma4-assistant", assistant_dir, gemma4_target, RunSettings())
    proposer.begin(torch.tensor(prompts[0]), target_view_after_prefill(gemma4_target, prompts[0]))

    first = proposer.propose(0.8, torch.Generator().manual_seed(7))
    again = proposer.propose(0.8, torch.Generator().manual_seed(7))
    greedy = proposer.propose(0.0, torch.Generator().manual_seed(7))

    vocab = gemma4_target.model.config.vocab_size
    assert first.q_probs is not None and first.q_probs.shape == (proposer.draft_length, vocab)
    assert torch.allclose(first.q_probs.sum(dim=-1), torch.ones(proposer.draft_length))
    assert bool((first.q_probs[torch.arange(first.k), first.tokens] > 0).all())
    assert torch.equal(first.tokens, again.tokens) and torch.equal(first.q_probs, again.q_probs)
    assert greedy.q_probs is None and greedy.k == proposer.draft_length
    # The first step's distribution does not depend on the sampled tokens: its mode is the greedy draft.
    assert int(first.q_probs[0].argmax()) == int(greedy.tokens[0])


def test_sampled_decoding_keeps_high_acceptance_with_q_probs(
    gemma4_target: LoadedTarget, assistant_dir: Path, prompts: list[list[int]]
) -> None:
    proposer = build("gemma4-assistant", assistant_dir, gemma4_target, RunSettings())
    runs = run_loop(gemma4_target, proposer, prompts[::4], temperature=0.7)
    assert all(run.tokens for run in runs)
    assert tau(runs) > 2.0


def test_draft_length_comes_from_settings_then_the_assistant_generation_config(
    gemma4_target: LoadedTarget, assistant_dir: Path, prompts: list[list[int]]
) -> None:
    default = build("gemma4-assistant", assistant_dir, gemma4_target, RunSettings())
    assert default.draft_length == 4  # the assistant's generation_config.num_assistant_tokens
    short = build("gemma4-assistant", assistant_dir, gemma4_target, RunSettings(draft_length=2))
    assert isinstance(short, Gemma4AssistantProposer) and short.draft_length == 2
    short.begin(torch.tensor(prompts[0]), target_view_after_prefill(gemma4_target, prompts[0]))
    assert short.propose(0.0, torch.Generator()).k == 2


def test_refuses_a_non_gemma_target(assistant_dir: Path, tiny_target: LoadedTarget) -> None:
    with pytest.raises(IncompatibleAssistant, match=r"model_type 'qwen3' \(Qwen3ForCausalLM\)"):
        build("gemma4-assistant", assistant_dir, tiny_target, RunSettings())


def test_refuses_a_drafter_that_is_not_a_gemma4_assistant(
    gemma4_target_dir: Path, gemma4_target: LoadedTarget
) -> None:
    with pytest.raises(IncompatibleAssistant, match="not a Gemma-4 assistant.*Gemma4ForCausalLM"):
        build("gemma4-assistant", gemma4_target_dir, gemma4_target, RunSettings())


def test_refuses_an_assistant_built_for_another_gemma4_geometry(
    assistant_dir: Path, gemma4_target: LoadedTarget
) -> None:
    from transformers import AutoConfig

    assistant_config = AutoConfig.from_pretrained(assistant_dir)
    target_config = replace_config(gemma4_target.model.config, hidden_size=128, vocab_size=2048)
    with pytest.raises(IncompatibleAssistant) as refused:
        check_pairing(assistant_config, target_config, "bigger-gemma")
    message = str(refused.value)
    assert "backbone_hidden_size 96 != target hidden_size 128" in message
    assert "vocab_size 1000 != target vocab_size 2048" in message


def replace_config(config: Any, **changes: Any) -> Any:
    """A copy of a transformers config with some fields changed."""
    return type(config).from_dict({**config.to_dict(), **changes})
