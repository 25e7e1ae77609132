"""Every target architecture of the catalog, tiny and random, through the real engine: a rejecting draft LM, an
accepting one (the target itself), DFlash, and the real drafters' own method where the verifier has it. Each run is
lossless or refused up front with its reason. Plus the rollback machinery on its own, hybrid draft LMs, and the
first divergence's report."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig

from registry.domain.configs import model_facts
from registry.domain.run import Run
from verifier.decode import decode, new_cache, rollback_problem
from verifier.engines.pytorch import IncompatiblePair, RunSettings, run_pair, with_target_margin
from registry.local import read_config
from verifier.folders import LoadError
from verifier.harness.contract import first_divergence
from verifier.loading import load_causal_lm, load_target, refuse_remote_code
from verifier.methods.draft_lm import DraftLMProposer
from verifier.prompts import Message, Prompt, PromptSet
from verifier.proposer import NoDraft, TargetOutput
from tests.tiny_architectures import ARCHITECTURES, FULL, cached_architecture, cached_gemma4_assistant_for
from verifier.tiny.dflash import DrafterShape, cached_dflash_drafter

REPO_ROOT = Path(__file__).resolve().parents[2]
SETTINGS = RunSettings(max_new_tokens=24, repeats=1, warmup=0, device="cpu")
PROMPTS = [
    PromptSet(
        name="arch",
        prompts=(
            Prompt(messages=(Message("user", "Write a Python function that adds two numbers."),)),
            Prompt(text="<|user|>\nWhat is 4 plus 5?\n<|assistant|>\n"),
        ),
    )
]
# Every catalog target, by the tiny architecture that stands for it (a new catalog target must be added here).
CATALOG_TARGET_ARCHITECTURES = {
    "Qwen/Qwen3-4B": "qwen3",
    "Qwen/Qwen3-8B": "qwen3",
    "Qwen/Qwen3-14B": "qwen3",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": "qwen3_moe",
    "meta-llama/Llama-3.1-8B-Instruct": "llama",
    "meta-llama/Llama-3.3-70B-Instruct": "llama",
    "openai/gpt-oss-20b": "gpt_oss",
    "openai/gpt-oss-120b": "gpt_oss",
    "Qwen/Qwen3-Coder-Next": "qwen3_next",
    "Qwen/Qwen3.5-4B": "qwen3_5",
    "Qwen/Qwen3.5-9B": "qwen3_5",
    "Qwen/Qwen3.5-27B": "qwen3_5",
    "Qwen/Qwen3.6-27B": "qwen3_5",
    "Qwen/Qwen3.8-27B": "qwen3_5",  # no published config in the catalog; assumed to keep the Qwen3.5 layout
    "Qwen/Qwen3.5-35B-A3B": "qwen3_5_moe",
    "Qwen/Qwen3.5-122B-A10B": "qwen3_5_moe",
    "Qwen/Qwen3.5-397B-A17B": "qwen3_5_moe",
    "Qwen/Qwen3.6-35B-A3B": "qwen3_5_moe",
    "moonshotai/Kimi-K2.5": "kimi_k25",
    "moonshotai/Kimi-K2.6": "kimi_k25",
    "moonshotai/Kimi-K2-Instruct": "deepseek_v3",
    "deepseek-ai/DeepSeek-V3": "deepseek_v3",
    "deepseek-ai/DeepSeek-V4-Flash": "deepseek_v4",
    "deepseek-ai/DeepSeek-V4-Pro": "deepseek_v4",
    "MiniMaxAI/MiniMax-M2.5": "minimax_m2",
    "MiniMaxAI/MiniMax-M2.7": "minimax_m2",
    "zai-org/GLM-5.1-FP8": "glm_moe_dsa",
    "google/gemma-4-31B-it": "gemma4",
    "google/gemma-4-26B-A4B-it": "gemma4_moe",
    "google/gemma-4-12B-it": "gemma4",
    "google/gemma-4-E2B-it": "gemma4_e",
    "google/gemma-4-E4B-it": "gemma4_e",
    "google/gemma-4-12B-it-qat-q4_0-unquantized": "gemma4",
    "google/gemma-3-12b-it": "gemma3",
    "mistralai/Mistral-Small-4-119B-2603": "mistral3",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": "llama",
    "lmsys/vicuna-13b-v1.3": "llama",
    "Qwen/Qwen3-32B": "qwen3",
    "meta-models/Muse-Glimmer-30B": "muse_glimmer",  # no published config in the catalog; transformers' own layout
    # No published config in the catalog for these; each is assumed to keep its family's last published layout.
    "moonshotai/Kimi-K2.7-Code": "kimi_k25",
    "moonshotai/Kimi-K3": "kimi_k25",
    "moonshotai/Kimi-K3.1-Pro": "kimi_k25",
    "zai-org/GLM-5.3-Flash": "glm_moe_dsa",
    # Vision-language-action models (FlashDrive); no published config: their text decoder stands in as a plain one.
    "z-lab/Alpamayo-1.5-10B": "qwen3",
    "z-lab/Alpamayo-R1-10B": "qwen3",
    # Targets the public drafter lists name (issue 28); no published config in the catalog, so the family's layout.
    "Qwen/Qwen3-1.7B": "qwen3",
    "nex-agi/Qwen3-32B-Nex-N1": "qwen3",
    "Qwen/Qwen3-30B-A3B": "qwen3_moe",
    "Qwen/Qwen3-30B-A3B-Instruct-2507": "qwen3_moe",
    "Qwen/Qwen3-235B-A22B": "qwen3_moe",
    "Qwen/Qwen3-235B-A22B-Instruct-2507": "qwen3_moe",
    "Qwen/Qwen3-Coder-480B-A35B-Instruct": "qwen3_moe",
    "nex-agi/Qwen3-30B-A3B-Nex-N1": "qwen3_moe",
    "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": "qwen3_next",
    "zai-org/GLM-5.1": "glm_moe_dsa",
    "zai-org/GLM-5.2-FP8": "glm_moe_dsa",
}
# Catalog targets of an architecture no tiny stand-in is built for yet: nothing here has run a pair on them.
UNBUILT_TARGETS = {
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "llama4",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": "llama4",
    "allenai/OLMoE-1B-7B-0125-Instruct": "olmoe",
    "ibm-granite/granite-3.1-1b-a400m-instruct": "granitemoe",
    "zai-org/GLM-4.7-Flash": "glm4_moe_lite",
}
# Catalog targets the verifier refuses by design, with the reason it gives.
REFUSED_TARGETS = {
    # Published as the publisher's own code (auto_map); model_type not built into transformers.
    "inclusionAI/Ling-flash-2.0": {"model_type": "bailing_moe_v2", "auto_map": {"AutoModelForCausalLM": "x.Y"}},
}
# Architectures whose transformers cache keeps state the loop cannot roll back: refused up front, never run.
UNROLLABLE = {"deepseek_v4": "DeepseekV4HCACache"}
NAMES = sorted(ARCHITECTURES)


@pytest.fixture(scope="module")
def target_dirs(model_cache: Path) -> dict[str, Path]:
    return {name: cached_architecture(model_cache, name) for name in NAMES}


def _num_layers(folder: Path) -> int:
    config = read_config(folder)
    return int((config.get("text_config") or config)["num_hidden_layers"])


def _dflash_for(model_cache: Path, target_dir: Path) -> Path:
    layers = _num_layers(target_dir)
    shape = DrafterShape(target_layer_ids=(0, 2) if layers > 2 else (0, layers - 1))
    return cached_dflash_drafter(model_cache, target_dir, trained=False, shape=shape)


def _assert_exact(run: Run) -> None:
    assert run.first_divergence is None, run.first_divergence
    assert run.lossless is True


def test_every_catalog_target_has_a_tiny_architecture(target_dirs: dict[str, Path]) -> None:
    catalog = json.loads((REPO_ROOT / "registry" / "data" / "catalog.json").read_text())
    targets = {t["repo_id"]: t for t in catalog["targets"]}
    assert set(targets) == set(CATALOG_TARGET_ARCHITECTURES) | set(REFUSED_TARGETS) | set(UNBUILT_TARGETS)
    assert set(CATALOG_TARGET_ARCHITECTURES.values()) <= set(ARCHITECTURES)
    assert not set(UNBUILT_TARGETS.values()) & set(ARCHITECTURES)  # once built, a target moves to the table above
    for repo_id, target in targets.items():
        if repo_id in REFUSED_TARGETS or repo_id in UNBUILT_TARGETS:
            continue
        published = target.get("config") or {}
        tiny = read_config(target_dirs[CATALOG_TARGET_ARCHITECTURES[repo_id]])
        # Where the catalog holds the published config, the tiny stand-in has its model type and class.
        if "model_type" in published:
            assert tiny["model_type"] == published["model_type"], repo_id
        if "architectures" in published:
            assert tiny["architectures"] == published["architectures"], repo_id


@pytest.mark.parametrize("repo_id", sorted(REFUSED_TARGETS))
def test_remote_code_only_targets_are_refused_by_name(repo_id: str) -> None:
    with pytest.raises(LoadError, match="never runs remote code"):
        refuse_remote_code(Path(repo_id), REFUSED_TARGETS[repo_id])


@pytest.mark.parametrize("name", NAMES)
def test_tiny_models_keep_the_published_layer_kinds(name: str, target_dirs: dict[str, Path]) -> None:
    config = read_config(target_dirs[name])
    assert config["architectures"] == [ARCHITECTURES[name].model_class]
    text = config.get("text_config") or config
    assert text["hidden_size"] <= 64 and text["num_hidden_layers"] <= 4
    assert set(ARCHITECTURES[name].layer_types) <= set(text.get("layer_types") or [])
    if name in ("deepseek_v3", "kimi_k25", "glm_moe_dsa"):
        assert text["kv_lora_rank"] > 0  # multi-head latent attention
    if name == "glm_moe_dsa":
        assert text["index_topk"] < SETTINGS.max_new_tokens  # the sparse indexer really selects
    if name == "gemma4_moe":
        assert text["enable_moe_block"] is True and text["num_experts"] > 1
    if name == "gemma4_e":
        assert text["hidden_size_per_layer_input"] > 0 and text["num_kv_shared_layers"] > 0
    if name == "mistral":  # every layer slides
        assert text["sliding_window"] < SETTINGS.max_new_tokens + 10
    if name == "muse_glimmer":  # the full-attention layers are the NoPE ones (rope theta 0)
        assert [theta == 0 for theta in text["layer_rope_theta"]] == [t == FULL for t in text["layer_types"]]
        assert text["sliding_window"] < SETTINGS.max_new_tokens + 10
    if name == "gpt_oss":
        model = load_causal_lm(target_dirs[name], device=torch.device("cpu"), dtype=torch.float32)
        assert all(layer.self_attn.sinks.numel() > 0 for layer in model.model.layers)
        assert text["sliding_window"] < SETTINGS.max_new_tokens + 10


@pytest.mark.parametrize("name", NAMES)
def test_registry_reads_the_dimensions_transformers_builds(name: str, target_dirs: dict[str, Path]) -> None:
    # The registry reads configs without transformers; for nested publications (Muse-Glimmer, Gemma-4 …) it must
    # take the text model's dimensions from text_config, as transformers does, and the class from the top level.
    config = read_config(target_dirs[name])
    facts = model_facts(config)
    text = AutoConfig.from_pretrained(target_dirs[name], local_files_only=True).get_text_config()
    assert facts.problems == ()
    assert facts.architectures == (ARCHITECTURES[name].model_class,) and facts.model_type == config["model_type"]
    assert facts.nested is ("text_config" in config)
    for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
        assert getattr(facts, field) == getattr(text, field), field


@pytest.mark.parametrize("name", NAMES)
def test_rejecting_draft_lm_is_lossless(name: str, target_dirs: dict[str, Path], random_llama_draft_dir: Path) -> None:
    if name in UNROLLABLE:
        with pytest.raises(IncompatiblePair, match=UNROLLABLE[name]):
            run_pair(target_dirs[name], random_llama_draft_dir, PROMPTS, SETTINGS)
        return
    run = run_pair(target_dirs[name], random_llama_draft_dir, PROMPTS, SETTINGS)
    _assert_exact(run)
    # Almost every draft was rejected, so the rollback ran in nearly every round.
    assert run.overall.acceptance.tau < 1.5


@pytest.mark.parametrize("name", NAMES)
def test_target_as_its_own_draft_is_lossless_and_accepted(name: str, target_dirs: dict[str, Path]) -> None:
    if name in UNROLLABLE:
        with pytest.raises(IncompatiblePair, match="cannot roll back"):
            run_pair(target_dirs[name], target_dirs[name], PROMPTS, SETTINGS)
        return
    run = run_pair(target_dirs[name], target_dirs[name], PROMPTS, SETTINGS)
    _assert_exact(run)
    assert run.overall.acceptance.tau > 3.0


@pytest.mark.parametrize("name", NAMES)
def test_dflash_is_lossless(name: str, target_dirs: dict[str, Path], model_cache: Path) -> None:
    drafter = _dflash_for(model_cache, target_dirs[name])
    if name in UNROLLABLE:
        with pytest.raises(IncompatiblePair, match="cannot roll back"):
            run_pair(target_dirs[name], drafter, PROMPTS, SETTINGS)
        return
    run = run_pair(target_dirs[name], drafter, PROMPTS, SETTINGS)
    assert run.method == "dflash"
    _assert_exact(run)


@pytest.mark.parametrize("name", ["gemma4", "gemma4_moe", "gemma4_e"])
def test_gemma4_assistant_is_lossless_on_the_published_gemma4_layouts(
    name: str, target_dirs: dict[str, Path], model_cache: Path
) -> None:
    assistant = cached_gemma4_assistant_for(model_cache, target_dirs[name])
    run = run_pair(target_dirs[name], assistant, PROMPTS, SETTINGS)
    assert run.method == "gemma4-assistant"
    _assert_exact(run)


# ---------------------------------------------------------------------------------------------------------------
# The rollback itself
# ---------------------------------------------------------------------------------------------------------------


def _next_logits(model, ids: torch.Tensor, cache) -> torch.Tensor:
    return model(input_ids=ids[None], cache=cache, use_cache=True).logits[0, -1]


def _recurrent_states(cache) -> list[torch.Tensor]:
    return [state.clone() for layer in cache.layers if hasattr(layer, "recurrent_states")
            for state in layer.recurrent_states.values() if state is not None]


@pytest.mark.parametrize("name", ["qwen3_next", "qwen3_5_moe"])
def test_crop_takes_back_the_recurrent_state_of_the_last_kept_position(name: str, target_dirs: dict[str, Path]) -> None:
    model = load_causal_lm(target_dirs[name], device=torch.device("cpu"), dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    prompt, tokens = torch.randint(5, 900, (12,), generator=generator), torch.randint(5, 900, (5,), generator=generator)
    kept = 2

    with torch.inference_mode():
        reference = new_cache(model)
        _next_logits(model, prompt, reference)
        for token in tokens[:kept]:  # the baseline's way: one token at a time
            expected = _next_logits(model, token[None], reference)
            reference.crop(0)

        cache = new_cache(model, verify_width=tokens.shape[0])
        _next_logits(model, prompt, cache)
        cache.crop(0)
        _next_logits(model, tokens, cache)  # a verify pass, then all but `kept` rejected
        after_pass = _recurrent_states(cache)
        cache.crop(-(tokens.shape[0] - kept))
        restored = _recurrent_states(cache)
        assert restored and all(float((a - b).abs().max()) > 1e-3 for a, b in zip(after_pass, restored))
        # The kept position's state is the one the one-at-a-time baseline reached: same next-token logits.
        assert torch.allclose(_next_logits(model, tokens[kept : kept + 1], cache),
                              _next_logits(model, tokens[kept : kept + 1], reference), atol=1e-4)
    assert expected is not None


class _RejectingLast:
    """A draft LM whose last draft of each round is changed to a token the target will not pick."""

    needs_hidden_states = False

    def __init__(self, inner: DraftLMProposer) -> None:
        self.inner, self.draft_length = inner, inner.draft_length

    def begin(self, prompt_ids, target_out) -> None:
        self.inner.begin(prompt_ids, target_out)

    def propose(self, temperature, generator):
        proposal = self.inner.propose(temperature, generator)
        tokens = proposal.tokens.clone()
        tokens[-1] = (tokens[-1] + 1) % self.inner.target_vocab
        return replace(proposal, tokens=tokens)

    def observe(self, n_accepted, committed_tokens, target_out) -> None:
        self.inner.observe(n_accepted, committed_tokens, target_out)


@pytest.mark.parametrize("name", ["qwen3_next", "qwen3_5"])
def test_a_partial_accept_costs_no_second_target_pass(name: str, target_dirs: dict[str, Path]) -> None:
    """One target forward per round plus the prefill, whatever is rejected (vLLM, SGLang and llama.cpp do the same)."""
    cpu, float32 = torch.device("cpu"), torch.float32
    model = load_causal_lm(target_dirs[name], device=cpu, dtype=float32)
    draft = load_causal_lm(target_dirs[name], device=cpu, dtype=float32)  # drafts what the target would pick
    prompt = torch.randint(5, 900, (10,), generator=torch.Generator().manual_seed(2))
    settings = dict(max_new_tokens=16, temperature=0.0, eos_token_ids=frozenset())
    baseline = decode(model, NoDraft(), prompt, generator=torch.Generator().manual_seed(0), **settings)
    passes: list[int] = []
    hook = model.register_forward_pre_hook(lambda module, args, kwargs: passes.append(1), with_kwargs=True)
    try:
        vocab = model.config.get_text_config().vocab_size
        proposer = _RejectingLast(DraftLMProposer(draft, draft_length=3, target_vocab=vocab))
        result = decode(model, proposer, prompt, generator=torch.Generator().manual_seed(0), **settings)
    finally:
        hook.remove()
    assert result.tokens == baseline.tokens
    assert result.rounds and all(r.accepted == r.drafted - 1 for r in result.rounds[:-1])  # partial accepts
    assert len(passes) == 1 + len(result.rounds)


def test_a_transformers_older_than_the_tested_release_is_refused_up_front(
    target_dirs: dict[str, Path], model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers before 5.25 (a GPU image's preinstalled one): its `Cache.activate_past_recording` takes no
    `recurrent_states_to_keep`, so every run would crash with a TypeError in the loop; it is refused before a weight
    is loaded, with the release to install, for any model and with or without a drafter."""
    import transformers
    import transformers.cache_utils as cache_utils

    def older_signature(self):  # the shape of the method before 5.25: no per-position recording to ask for
        for layer in self.layers:
            layer.record_past = True

    monkeypatch.setattr(transformers, "__version__", "5.24.0")
    monkeypatch.setattr(cache_utils.Cache, "activate_past_recording", older_signature)
    for name in ("qwen3", "qwen3_next"):
        problem = rollback_problem(load_causal_lm(target_dirs[name], device=torch.device("cpu"), dtype=torch.float32))
        assert problem is not None and "transformers 5.24.0 is older than 5.25.0" in problem
        for drafter in (_dflash_for(model_cache, target_dirs[name]), None):
            with pytest.raises(IncompatiblePair, match="install transformers==5.25.0"):
                run_pair(target_dirs[name], drafter, PROMPTS, SETTINGS)


def test_a_hybrid_cache_that_keeps_no_per_position_state_is_refused(
    target_dirs: dict[str, Path], model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A linear-attention layer that records only its final state (whatever the release): refused with the reason."""
    import transformers.cache_utils as cache_utils

    def record_final_state_only(self, recurrent_states_to_keep=None):
        self.record_past = True

    monkeypatch.setattr(cache_utils.LinearAttentionCacheLayerMixin, "activate_past_recording", record_final_state_only)
    problem = rollback_problem(load_causal_lm(target_dirs["qwen3_next"], device=torch.device("cpu"),
                                              dtype=torch.float32))
    assert problem is not None and "hybrid rollback not supported" in problem and "tested on transformers" in problem
    with pytest.raises(IncompatiblePair, match="hybrid rollback not supported"):
        run_pair(target_dirs["qwen3_next"], _dflash_for(model_cache, target_dirs["qwen3_next"]), PROMPTS, SETTINGS)
    assert rollback_problem(load_causal_lm(target_dirs["qwen3"], device=torch.device("cpu"),
                                           dtype=torch.float32)) is None


@pytest.mark.parametrize("name", ["qwen3_next", "qwen3_5_text"])
def test_a_hybrid_draft_lm_drafts_as_if_fed_from_scratch_after_rejections(
    name: str, target_dirs: dict[str, Path]
) -> None:
    draft = load_causal_lm(target_dirs[name], device=torch.device("cpu"), dtype=torch.float32)
    proposer = DraftLMProposer(draft, draft_length=4, target_vocab=draft.config.get_text_config().vocab_size)
    generator = torch.Generator().manual_seed(1)
    prompt = torch.randint(5, 900, (10,), generator=generator)
    sequence = [*prompt.tolist(), 7]

    def greedy_from_scratch(committed: list[int], count: int) -> list[int]:
        ids = list(committed)
        with torch.inference_mode():
            for _ in range(count):
                ids.append(int(draft(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
        return ids[len(committed) :]

    proposer.begin(prompt, TargetOutput(start=0, input_ids=prompt, pending_token=7, cache=None))
    for n_accepted in (0, 2, 4, 1, 3, 0):
        drafts = proposer.propose(0.0, generator).tokens.tolist()
        assert drafts == greedy_from_scratch(sequence, 4)
        correction = (drafts[n_accepted] + 1) % 900 if n_accepted < 4 else 11  # any token but the draft
        committed = [*drafts[:n_accepted], correction]
        sequence += committed
        proposer.observe(n_accepted, torch.tensor(committed), TargetOutput(0, prompt, correction, None))


def test_models_whose_cache_cannot_roll_back_are_named(target_dirs: dict[str, Path]) -> None:
    cpu, float32 = torch.device("cpu"), torch.float32
    problem = rollback_problem(load_causal_lm(target_dirs["deepseek_v4"], device=cpu, dtype=float32))
    assert problem is not None and "deepseek_v4" in problem and "DeepseekV4HCACache" in problem
    qwen3_next = load_causal_lm(target_dirs["qwen3_next"], device=cpu, dtype=float32)
    assert rollback_problem(qwen3_next) is None


# ---------------------------------------------------------------------------------------------------------------
# The first divergence
# ---------------------------------------------------------------------------------------------------------------


def test_a_divergence_carries_the_targets_logit_margin(target_dirs: dict[str, Path]) -> None:
    target = load_target(target_dirs["qwen3"], device="cpu")
    prompt = torch.tensor(target.tokenizer.encode("<|user|>\nHello"))
    position = 5
    with torch.inference_mode():
        baseline: list[int] = []
        for _ in range(8):
            ids = torch.cat([prompt, torch.tensor(baseline, dtype=torch.long)])
            baseline.append(int(target.model(input_ids=ids[None]).logits[0, -1].argmax()))
        logits = target.model(input_ids=torch.tensor([[*prompt.tolist(), *baseline[:position]]])).logits[0, -1]
    runner_up = int(torch.topk(logits, 2).indices[1])
    speculative = [*baseline[:position], runner_up, *baseline[position + 1 :]]

    divergence = first_divergence(baseline, speculative, "arch", 1, 0)
    assert divergence is not None and divergence.position == position
    divergence = with_target_margin(divergence, target.model, prompt, baseline)
    top = torch.topk(logits, 2).values
    assert divergence.target_logit_margin == pytest.approx(float(top[0] - top[1]), abs=1e-4)
    assert divergence.speculative_token_gap == pytest.approx(divergence.target_logit_margin, abs=1e-4)
    assert (divergence.baseline_token, divergence.speculative_token) == (baseline[position], runner_up)
    assert asdict(divergence)["target_logit_margin"] > 0

    ended = first_divergence(baseline[:position], baseline, "arch", 1, 0)
    assert ended is not None and ended.baseline_token is None
    assert with_target_margin(ended, target.model, prompt, baseline[:position]).target_logit_margin is None
