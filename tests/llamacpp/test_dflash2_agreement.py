"""The same tiny DFlash 2 pair in both engines: our converter path turns the drafter into a GGUF that llama-server
runs with `--spec-type draft-dflash` (its DFlash 2 selector path), greedy output is identical, and every prompt's
drafted / accepted counts are the PyTorch rounds counted the way llama-server counts them: the drafts agree.

The drafter is the trained tiny DFlash v1 backbone with small random convolutions and selector codebooks, so every
DFlash 2 part changes the drafts while some of them are still accepted."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.llamacpp import skip_unless_wanted
from tests.llamacpp.counting import ServerCounts, counted_as_llama_server
from verifier.engines.llamacpp.engine import load_llamacpp_engine
from verifier.engines.llamacpp.gguf import read_gguf_metadata
from verifier.engines.llamacpp.server import LlamaCppOptions
from verifier.engines.pytorch import RunSettings, TorchEngine
from verifier.harness.pair_check import check_pair
from verifier.prompts import bundled_set

skip_unless_wanted()

MAX_NEW_TOKENS = 32
KERNEL, GROUP, RANK, TOP_K = 3, 16, 8, 4


@pytest.fixture(scope="module")
def dflash2_dir(tmp_path_factory: pytest.TempPathFactory, tiny_dflash_dir: Path, tiny_target_dir: Path) -> Path:
    config = json.loads((tiny_dflash_dir / "config.json").read_text())
    vocab = json.loads((tiny_target_dir / "config.json").read_text())["vocab_size"]
    hidden = config["hidden_size"]
    generator = torch.Generator().manual_seed(0)
    tensors = load_file(tiny_dflash_dir / "model.safetensors")
    for i in range(config["num_hidden_layers"]):
        for conv in ("attention_conv", "mlp_conv"):
            base = torch.randn(2, KERNEL, hidden, generator=generator) * 0.05
            base[:, 0] += 1.0
            tensors[f"layers.{i}.{conv}.base_kernel"] = base
            projection = torch.randn(2 * KERNEL * (hidden // GROUP), hidden, generator=generator) * 0.02
            tensors[f"layers.{i}.{conv}.kernel_projection.weight"] = projection
    for name in ("predecessor_codebook", "successor_codebook"):
        tensors[f"candidate_selector.{name}"] = torch.randn(vocab, RANK, generator=generator) * 0.5
    tensors["candidate_selector.hidden_projection.weight"] = torch.randn(RANK, hidden, generator=generator) * 0.5
    config |= {
        "architectures": ["DFlash2DraftModel"],
        "dflash_config": config["dflash_config"]
        | {"conv_kernel_size": KERNEL, "conv_group_size": GROUP, "selector_rank": RANK, "selector_top_k": TOP_K},
    }
    folder = tmp_path_factory.mktemp("dflash2-agreement") / "drafter"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "model.safetensors")
    return folder


def test_llama_cpp_drafts_what_the_pytorch_engine_drafts(
    dflash2_dir: Path, tiny_target_dir: Path, llama_options: LlamaCppOptions
) -> None:
    block_size = json.loads((dflash2_dir / "config.json").read_text())["block_size"]
    draft_length = block_size - 1  # llama.cpp's block is draft_length + 1 tokens: the trained block, as ours
    settings = RunSettings(max_new_tokens=MAX_NEW_TOKENS, repeats=1, warmup=0, device="cpu", draft_length=draft_length)
    torch_engine = TorchEngine.load(check_pair(tiny_target_dir, dflash2_dir, settings.method), settings)
    llama_engine = load_llamacpp_engine(check_pair(tiny_target_dir, dflash2_dir, settings.method), settings, llama_options)
    assert llama_engine.draft is not None and llama_engine.draft.spec_type == "draft-dflash"
    written = read_gguf_metadata(llama_engine.draft.gguf, ("dflash.selector_top_k", "dflash.conv_kernel_size"))
    assert written == {"dflash.selector_top_k": TOP_K, "dflash.conv_kernel_size": KERNEL}
    expected: list[ServerCounts] = []
    measured: list[ServerCounts] = []
    with tempfile.TemporaryDirectory(prefix="dflash2-agreement-") as logs, llama_engine.serving(512, Path(logs)):
        for prompt in bundled_set("math").prompts[:4] + bundled_set("chat").prompts[:3]:
            ids = torch_engine.encode(prompt)
            ours = torch_engine.generate(ids, speculative=True, seed=0)
            theirs = llama_engine.generate(ids, speculative=True, seed=0)
            assert theirs.tokens == ours.tokens  # greedy: both are the target's own output
            expected.append(counted_as_llama_server(ours.rounds, ours.tokens, torch_engine.eos_ids,
                                                    MAX_NEW_TOKENS, draft_length))
            measured.append(ServerCounts(theirs.counts.drafting_steps, theirs.counts.drafted, theirs.counts.accepted))
    assert measured == expected
    assert sum(c.accepted for c in measured) >= 20  # drafts that are accepted, not merely equally rejected
