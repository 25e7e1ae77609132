"""Timelines of Hub states for tests: `Scenario.standard()` and its named steps, `Scenario.large()` for benchmarks.

Configs follow /work/shared/reference (hub-protocol.md §9, drafters.md §2.1/§7.1). Values the references do not
give are marked "synthetic". Known commit shas are real-world fixture values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tests.fakehub.state import (
    HubState,
    dflash_drafter_files,
    readme_with_card,
    target_files,
    tiny_safetensors,
    utc,
)

DAY_0 = utc(2026, 1, 5)

QWEN3_8B_SHA = "b968826d9c46dd6066d109eabc6255188de91218"
QWEN3_4B_SHA = "1cfa9a7208912126459214e8b04321603b3df60c"
LLAMA_31_8B_INSTRUCT_SHA = "0e9e39f249a16976918f6564b8830bc894c89659"
ZLAB_QWEN3_8B_DFLASH_SHA = "9b41424b7109f9c5413454f481b09a82b85333f4"

QWEN3_8B_CREATED = utc(2025, 4, 27, 3, 42, 21)  # hub-protocol.md §9 (uncertain)


def _qwen3_config(hidden: int, intermediate: int, tie: bool) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
        "hidden_size": hidden, "initializer_range": 0.02, "intermediate_size": intermediate,
        "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
        "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": tie,
        "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 151936,
    }


QWEN3_8B_CONFIG = _qwen3_config(4096, 12288, tie=False)
QWEN3_4B_CONFIG = _qwen3_config(2560, 9728, tie=True)
QWEN3_8B_FP8_CONFIG = {
    **QWEN3_8B_CONFIG,
    # synthetic in detail; FP8 block quantization as Qwen publishes it
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]},
}
LLAMA_31_8B_INSTRUCT_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256,
}


def _qwen3x_27b_config() -> dict[str, Any]:
    # Layers, hidden size and vocab are implied by the DFlash drafter config (hub-protocol.md §9); the rest is
    # synthetic: the real Qwen3.5/3.6 configs are not in the references, so this is a flat text config.
    return {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5", "hidden_size": 5120,
        "num_hidden_layers": 64, "vocab_size": 248320, "num_attention_heads": 24, "num_key_value_heads": 4,
        "head_dim": 256, "intermediate_size": 17408, "max_position_embeddings": 262144,
        "rope_theta": 10000000, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }


QWEN35_27B_CONFIG = _qwen3x_27b_config()
QWEN36_27B_CONFIG = _qwen3x_27b_config()


def _dflash_config(*, hidden: int, intermediate: int, target_layers: int, layer_ids: list[int], mask: int,
                   vocab: int, max_pos: int, tie: bool, transformers_version: str) -> dict[str, Any]:
    return {
        "architectures": ["DFlashDraftModel"], "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "model_type": "qwen3", "block_size": 16,
        "dflash_config": {"mask_token_id": mask, "target_layer_ids": layer_ids},
        "num_target_layers": target_layers, "num_hidden_layers": 5, "hidden_size": hidden,
        "intermediate_size": intermediate, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "layer_types": ["full_attention"] * 5, "sliding_window": None, "use_sliding_window": False,
        "rope_theta": 1000000, "rope_scaling": None, "max_position_embeddings": max_pos, "vocab_size": vocab,
        "tie_word_embeddings": tie, "rms_norm_eps": 1e-06, "attention_bias": False,
        "bos_token_id": 151643, "eos_token_id": 151645, "dtype": "bfloat16",
        "transformers_version": transformers_version,
    }


# drafters.md §7.1 (Qwen3-4B) and §2.1 (Qwen3-8B, Qwen3.5-27B).
QWEN3_4B_DFLASH_CONFIG = _dflash_config(hidden=2560, intermediate=9728, target_layers=36,
                                        layer_ids=[1, 9, 17, 25, 33], mask=151669, vocab=151936, max_pos=40960,
                                        tie=True, transformers_version="4.57.3")
QWEN3_8B_DFLASH_CONFIG = _dflash_config(hidden=4096, intermediate=12288, target_layers=36,
                                        layer_ids=[1, 9, 17, 25, 33], mask=151669, vocab=151936, max_pos=40960,
                                        tie=False, transformers_version="4.57.3")
QWEN35_27B_DFLASH_CONFIG = {
    **_dflash_config(hidden=5120, intermediate=17408, target_layers=64, layer_ids=[1, 16, 31, 46, 61],
                     mask=248070, vocab=248320, max_pos=262144, tie=False, transformers_version="4.57.3"),
    # synthetic: token ids of the Qwen3.5 vocabulary are not in the references
    "bos_token_id": None, "eos_token_id": None,
}
# Kimi-K2.5 geometry (drafters.md §2.1); Kimi-K2.6 is assumed identical. Everything else is unknown, so absent.
KIMI_K26_DFLASH_CONFIG = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "block_size": 16,
    "dflash_config": {"target_layer_ids": [1, 12, 24, 35, 47, 58]}, "num_target_layers": 61,
}


def dense_parameter_count(config: Mapping[str, Any]) -> int:
    """What the Hub reports for a dense Qwen3/Llama-style checkpoint (Qwen3-8B → 8,190,735,360).

    DFlash drafters have no embeddings or LM head but an `fc` over the fused target layers.
    """
    hidden, inter = int(config["hidden_size"]), int(config["intermediate_size"])
    heads, kv_heads = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    qk_norms = 2 * head_dim if str(config.get("model_type", "")).startswith("qwen3") else 0
    layer = attention + 3 * hidden * inter + 2 * hidden + qk_norms
    total = int(config["num_hidden_layers"]) * layer + hidden  # + final norm
    if "DFlashDraftModel" in config.get("architectures", []):
        fused = len(config["dflash_config"]["target_layer_ids"])
        return total + fused * hidden * hidden + hidden  # fc + hidden_norm
    embeddings = int(config["vocab_size"]) * hidden
    return total + embeddings * (1 if config.get("tie_word_embeddings") else 2)


def _bf16(config: Mapping[str, Any]) -> dict[str, int]:
    return {"BF16": dense_parameter_count(config)}


@dataclass
class Step:
    name: str
    date: datetime
    apply: Callable[[HubState, datetime], None]
    description: str


@dataclass
class Scenario:
    """A HubState plus a timeline of named steps that only moves forward."""

    state: HubState
    now: datetime
    steps: dict[str, Step] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)

    @property
    def day(self) -> int:
        return (self.now - DAY_0).days

    def advance(self, name: str) -> Step:
        """Apply one named step at its date. Steps can be skipped, not reordered."""
        step = self.steps.get(name)
        if step is None:
            raise ValueError(f"unknown step {name!r}; steps: {', '.join(self.steps)}")
        if name in self.applied:
            raise ValueError(f"step {name!r} was already applied")
        if step.date < self.now:
            raise ValueError(f"step {name!r} is dated {step.date:%Y-%m-%d}, before now ({self.now:%Y-%m-%d})")
        step.apply(self.state, step.date)
        self.now = step.date
        self.applied.append(name)
        return step

    def advance_through(self, name: str) -> None:
        """Apply every not-yet-applied step up to and including `name`, in timeline order."""
        if name not in self.steps:
            raise ValueError(f"unknown step {name!r}; steps: {', '.join(self.steps)}")
        for step_name in self.steps:
            if step_name not in self.applied:
                self.advance(step_name)
            if step_name == name:
                return

    # ---- the standard timeline ---------------------------------------------------------------------------
    @classmethod
    def standard(cls) -> Scenario:
        """Day 0 = 2026-01-05: Qwen3-4B/8B, their z-lab DFlash drafters, a gated drafter, a quantized derivative,
        another org's finetune and Llama 3.1 8B Instruct under its old name."""
        state = HubState()
        qwen_card = {"library_name": "transformers", "license": "apache-2.0", "pipeline_tag": "text-generation"}
        state.add_repo(
            "Qwen/Qwen3-8B", created_at=QWEN3_8B_CREATED, date=utc(2025, 7, 26, 8, 0, 0),  # date: synthetic
            files=target_files(QWEN3_8B_CONFIG, card_data={**qwen_card, "base_model": ["Qwen/Qwen3-8B-Base"]}),
            head_sha=QWEN3_8B_SHA, pipeline_tag="text-generation", library_name="transformers",
            tags=("conversational",), reported_parameters=_bf16(QWEN3_8B_CONFIG),
        )
        state.add_repo(
            "Qwen/Qwen3-4B", created_at=utc(2025, 4, 27, 3, 40, 8), date=utc(2025, 7, 26, 8, 5, 0),  # synthetic
            files=target_files(QWEN3_4B_CONFIG, card_data={**qwen_card, "base_model": ["Qwen/Qwen3-4B-Base"]},
                               weight_seed=1),
            head_sha=QWEN3_4B_SHA, pipeline_tag="text-generation", library_name="transformers",
            tags=("conversational",), reported_parameters=_bf16(QWEN3_4B_CONFIG),
        )
        state.add_repo(
            "Qwen/Qwen3-8B-FP8", created_at=utc(2025, 4, 28, 12, 0, 0), date=utc(2025, 7, 26, 9, 0, 0),  # synthetic
            files=target_files(QWEN3_8B_FP8_CONFIG, weight_seed=2, card_data={
                **qwen_card, "base_model": "Qwen/Qwen3-8B", "base_model_relation": "quantized"}),
            pipeline_tag="text-generation", library_name="transformers", tags=("conversational", "fp8"),
        )
        state.add_repo(
            "acme-labs/Qwen3-8B-Support-FT",  # synthetic org: a finetune by someone other than Qwen
            created_at=utc(2025, 11, 3, 10, 0, 0), date=utc(2025, 11, 3, 10, 30, 0),
            files=target_files(QWEN3_8B_CONFIG, weight_seed=3, card_data={
                "library_name": "transformers", "license": "apache-2.0", "base_model": "Qwen/Qwen3-8B"}),
            pipeline_tag="text-generation", library_name="transformers",
        )
        state.add_repo(
            "meta-llama/Meta-Llama-3.1-8B-Instruct", created_at=utc(2024, 7, 18, 8, 0, 0),  # synthetic
            date=utc(2024, 9, 25, 17, 0, 0),  # synthetic
            files=target_files(LLAMA_31_8B_INSTRUCT_CONFIG, weight_seed=4, card_data={
                "library_name": "transformers", "license": "llama3.1", "pipeline_tag": "text-generation",
                "base_model": "meta-llama/Meta-Llama-3.1-8B"}),
            head_sha=LLAMA_31_8B_INSTRUCT_SHA, gated="manual", pipeline_tag="text-generation",
            library_name="transformers", tags=("conversational", "facebook", "meta", "llama-3"),
            reported_parameters=_bf16(LLAMA_31_8B_INSTRUCT_CONFIG),
        )
        drafter_tags = ("dflash", "speculative-decoding", "diffusion-language-model")
        for target, config, seed, sha in (
            ("Qwen/Qwen3-4B", QWEN3_4B_DFLASH_CONFIG, 40, None),
            ("Qwen/Qwen3-8B", QWEN3_8B_DFLASH_CONFIG, 80, ZLAB_QWEN3_8B_DFLASH_SHA),
        ):
            name = target.split("/")[1]
            state.add_repo(
                f"z-lab/{name}-DFlash-b16", created_at=DAY_0, date=DAY_0 + timedelta(hours=2),
                files=dflash_drafter_files(config, seed, target_repo=target), head_sha=sha, tags=drafter_tags,
                card_data={"license": "mit", "library_name": "transformers"}, library_name="transformers",
                reported_parameters=_bf16(config),
            )
        # Gated drafter. Synthetic date: the real repo appeared 2026-05; here it exists from day 0 so that
        # gating is testable without advancing the timeline.
        state.add_repo(
            "z-lab/Kimi-K2.6-DFlash", created_at=DAY_0 - timedelta(days=2), date=DAY_0 - timedelta(days=2),
            files={"config.json": (json.dumps(KIMI_K26_DFLASH_CONFIG, indent=2) + "\n").encode(),
                   "model.safetensors": tiny_safetensors({"fc.weight": (8, 48)}, 260),
                   "README.md": readme_with_card({"license": "mit"}, "# Kimi-K2.6-DFlash (preview)\n")},
            gated="manual", tags=drafter_tags, library_name="transformers",
        )
        scenario = cls(state=state, now=DAY_0)
        for step in _standard_steps():
            scenario.steps[step.name] = step
        return scenario

    # ---- a big Hub for benchmarks ------------------------------------------------------------------------
    @classmethod
    def large(cls, n_models: int = 10_000, n_orgs: int = 10) -> Scenario:
        """`n_models` small repos spread round-robin over `n_orgs` orgs (`org00`…), one hour apart, newest last."""
        if n_models < 0 or n_orgs < 1:
            raise ValueError("need n_models >= 0 and n_orgs >= 1")
        state = HubState()
        start = DAY_0 - timedelta(hours=n_models)
        for index in range(n_models):
            org = f"org{index % n_orgs:02d}"
            created = start + timedelta(hours=index)
            config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
                      "num_hidden_layers": 2, "vocab_size": 256, "index": index}
            state.add_repo(
                f"{org}/model-{index:05d}", created_at=created, date=created + timedelta(minutes=30),
                files={"config.json": json.dumps(config).encode(), "README.md": f"# model {index}\n".encode()},
                library_name="transformers", pipeline_tag="text-generation",
            )
        return cls(state=state, now=DAY_0)


def _standard_steps() -> list[Step]:
    def qwen35_27b_appears(state: HubState, date: datetime) -> None:
        state.add_repo(
            "Qwen/Qwen3.5-27B", created_at=date, date=date + timedelta(hours=1),
            files=target_files(QWEN35_27B_CONFIG, weight_seed=3527, card_data={
                "library_name": "transformers", "license": "apache-2.0", "pipeline_tag": "text-generation"}),
            pipeline_tag="text-generation", library_name="transformers", tags=("conversational",),
            reported_parameters=_bf16(QWEN35_27B_CONFIG),
        )

    def drafter_for_qwen35_27b(state: HubState, date: datetime) -> None:
        state.add_repo(
            "z-lab/Qwen3.5-27B-DFlash", created_at=date, date=date + timedelta(hours=1),
            files=dflash_drafter_files(QWEN35_27B_DFLASH_CONFIG, 27, target_repo="Qwen/Qwen3.5-27B"),
            card_data={"license": "mit", "library_name": "transformers"}, library_name="transformers",
            tags=("dflash", "speculative-decoding"), reported_parameters=_bf16(QWEN35_27B_DFLASH_CONFIG),
        )

    def weights_replaced(state: HubState, date: datetime) -> None:
        new_weights = dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 81)["model.safetensors"]
        state.commit("z-lab/Qwen3-8B-DFlash-b16", {"model.safetensors": new_weights},
                     title="Upload retrained weights", date=date)

    def readme_only_commit(state: HubState, date: datetime) -> None:
        repo = state.repo("z-lab/Qwen3-8B-DFlash-b16")
        assert repo is not None
        readme = repo.files["README.md"] + b"\n## Benchmarks\n\nAcceptance length 6.5 on GSM8K (synthetic).\n"
        state.commit("z-lab/Qwen3-8B-DFlash-b16", {"README.md": readme}, title="Update README.md", date=date)

    def repo_renamed(state: HubState, date: datetime) -> None:
        state.rename("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")

    def qwen36_27b_appears(state: HubState, date: datetime) -> None:
        state.add_repo(
            "Qwen/Qwen3.6-27B", created_at=date, date=date + timedelta(hours=1),
            files=target_files(QWEN36_27B_CONFIG, weight_seed=3627, card_data={
                "library_name": "transformers", "license": "apache-2.0", "pipeline_tag": "text-generation"}),
            pipeline_tag="text-generation", library_name="transformers", tags=("conversational",),
            reported_parameters=_bf16(QWEN36_27B_CONFIG),
        )

    base_day = utc(2026, 2, 28)  # "≈late Feb 2026" (drafters.md §2)
    return [
        Step("qwen35_27b_appears", base_day, qwen35_27b_appears, "Qwen/Qwen3.5-27B is published"),
        Step("drafter_for_qwen35_27b", base_day + timedelta(days=14), drafter_for_qwen35_27b,
             "z-lab/Qwen3.5-27B-DFlash is published 14 days later"),
        Step("weights_replaced", utc(2026, 3, 20), weights_replaced,
             "z-lab/Qwen3-8B-DFlash-b16 gets new model.safetensors in place"),
        Step("readme_only_commit", utc(2026, 3, 25), readme_only_commit,
             "z-lab/Qwen3-8B-DFlash-b16 changes only README.md"),
        Step("repo_renamed", utc(2026, 4, 1), repo_renamed,
             "meta-llama/Meta-Llama-3.1-8B-Instruct becomes meta-llama/Llama-3.1-8B-Instruct (same sha)"),
        Step("qwen36_27b_appears", utc(2026, 4, 22), qwen36_27b_appears,
             "Qwen/Qwen3.6-27B, the successor of Qwen3.5-27B, is published"),
    ]
