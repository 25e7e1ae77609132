"""The same tiny trained EAGLE-3 pair in both engines: the head reads the same target layers, greedy output is
identical, and every prompt's drafted / accepted counts are the PyTorch rounds counted the way llama-server counts
them, so τ agrees.

llama-server counts a round differently from the PyTorch loop in two places only, both at the end of a generation
(tools/server `get_n_draft_max`, common/sampling `common_sampler_sample_and_accept_n`): it drafts at most
`n_remaining - 1` tokens (none when one token is left), and accepts no draft past an end-of-generation token unless
it is the last draft. The PyTorch loop drafts the full chain and counts drafts accepted past the end."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.llamacpp import skip_unless_wanted
from tests.llamacpp.counting import ServerCounts, counted_as_llama_server
from tests.tiny_models import cache_root
from verifier.engines.pytorch import RunSettings, TorchEngine
from verifier.harness.pair_check import check_pair
from verifier.engines.llamacpp.convert import cached_gguf, eagle3_target_layers
from verifier.engines.llamacpp.engine import load_llamacpp_engine
from verifier.engines.llamacpp.gguf import read_gguf_metadata
from verifier.engines.llamacpp.server import LlamaCppOptions
from registry.local import read_config
from verifier.methods.eagle3.config import SPECULATORS_LAYOUT, YUHUILI_LAYOUT, parse_eagle3_config
from verifier.metrics import RoundRecord
from verifier.prompts import bundled_set
from verifier.tiny.eagle3 import cached_eagle3_head

skip_unless_wanted()

MAX_NEW_TOKENS = 48
DRAFT_LENGTH = 5


def _round(accepted: int, emitted: int) -> RoundRecord:
    return RoundRecord(drafted=DRAFT_LENGTH, accepted=accepted, emitted=emitted, draft_seconds=0.0, verify_seconds=0.0)


def test_the_pure_counting_rules() -> None:
    rounds = [_round(accepted=5, emitted=6), _round(accepted=5, emitted=2)]
    # 48 new tokens: 1 + 6 + 2 = 9 tokens, no end-of-generation: nothing is cut.
    assert counted_as_llama_server(rounds, list(range(9)), {99}, 48, 5) == ServerCounts(2, 10, 10)
    # Only 9 new tokens: the second round may draft 9 - 7 - 1 = 1 token.
    assert counted_as_llama_server(rounds, list(range(9)), {99}, 9, 5) == ServerCounts(2, 6, 6)
    # An end-of-generation token as the second accepted draft of a round: one draft counts.
    eos_tokens = [0, 1, 99, 3, 4, 5, 6, 7, 8]
    assert counted_as_llama_server(rounds[:1], eos_tokens[:3], {99}, 48, 5) == ServerCounts(1, 5, 1)
    # One token left: llama-server takes a plain step.
    assert counted_as_llama_server([_round(accepted=0, emitted=1)], [0, 1], set(), 2, 5) == \
        ServerCounts(0, 0, 0)


@pytest.mark.parametrize("layout", [YUHUILI_LAYOUT, SPECULATORS_LAYOUT])
def test_the_gguf_reads_the_target_layers_the_pytorch_head_reads(
    layout: str, qwen3_target: Path, llama_options: LlamaCppOptions, server_binary
) -> None:
    head = cached_eagle3_head(cache_root(), qwen3_target, trained=True, layout=layout)
    config = parse_eagle3_config(read_config(head))
    layers = read_config(qwen3_target)["num_hidden_layers"]
    gguf = cached_gguf(head, llama_options.gguf_cache, source=llama_options.source_dir, build=server_binary.build,
                       target_dir=qwen3_target)

    written = read_gguf_metadata(gguf.path, ("eagle3.target_layers",))["eagle3.target_layers"]

    # Both count hidden states (0 = embeddings): the tiny heads fuse the outputs of layers 0, 1 and 2.
    assert written == list(config.hidden_state_indices(layers)) == [1, 2, 3]
    # yuhuili's layout keeps layer-output ids under eagle_config, which llama.cpp's converter does not read.
    assert (eagle3_target_layers(head) is not None) == (layout == YUHUILI_LAYOUT)


@pytest.mark.parametrize("layout", [YUHUILI_LAYOUT, SPECULATORS_LAYOUT])
def test_the_same_trained_head_drafts_the_same_in_both_engines(
    layout: str, qwen3_target: Path, llama_options: LlamaCppOptions
) -> None:
    head = cached_eagle3_head(cache_root(), qwen3_target, trained=True, layout=layout)
    settings = RunSettings(max_new_tokens=MAX_NEW_TOKENS, repeats=1, warmup=0, device="cpu",
                           draft_length=DRAFT_LENGTH)
    torch_engine = TorchEngine.load(check_pair(qwen3_target, head, settings.method), settings)
    llama_engine = load_llamacpp_engine(check_pair(qwen3_target, head, settings.method), settings, llama_options)
    expected: list[ServerCounts] = []
    measured: list[ServerCounts] = []
    torch_accepted = torch_steps = 0
    with tempfile.TemporaryDirectory(prefix="eagle3-agreement-") as logs, llama_engine.serving(512, Path(logs)):
        for prompt in bundled_set("chat").prompts:
            ids = torch_engine.encode(prompt)
            ours = torch_engine.generate(ids, speculative=True, seed=0)
            theirs = llama_engine.generate(ids, speculative=True, seed=0)
            assert theirs.tokens == ours.tokens  # greedy: both are the target's own output
            expected.append(counted_as_llama_server(ours.rounds, ours.tokens, torch_engine.eos_ids,
                                                    MAX_NEW_TOKENS, DRAFT_LENGTH))
            measured.append(ServerCounts(theirs.counts.drafting_steps, theirs.counts.drafted, theirs.counts.accepted))
            torch_accepted += ours.counts.accepted
            torch_steps += ours.counts.steps

    assert measured == expected
    llama_tau = 1 + sum(c.accepted for c in measured) / sum(c.drafting_steps for c in measured)
    assert llama_tau > 2.5  # a trained head: the same rounds, not merely the same (low) acceptance
    # The raw τ differ only by the drafts PyTorch counts past the end of a generation, never the other way.
    assert 1 + torch_accepted / torch_steps >= llama_tau
