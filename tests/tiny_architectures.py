"""Tiny random targets of every architecture the catalog's drafters target, built from the real config classes.

Each is the real transformers config class with the dimensions shrunk (hidden 32-64, 2-4 layers, few experts) and
every layer type kept (linear + full attention for the Gated DeltaNet hybrids, sliding + full for gpt_oss,
Gemma-4 and Muse-Glimmer, MLA for the DeepSeek family, sparse indexed attention for GLM-5), random weights saved as
safetensors with the project's shared tiny tokenizer. Multimodal publications (Qwen3.5, Gemma-4, Kimi-K2.5,
Muse-Glimmer) are saved as published: the `...ForConditionalGeneration` class with a tiny vision tower and the text
model under `text_config`.

Random weights are drawn with a wider spread than transformers' 0.02 so that greedy choices are rarely near-ties.

It stays over 400 lines: a table of 26 architecture builders, each a few lines of one real config class.
Only tests use it (tests/verifier/test_architectures.py, the fixtures of tests/tiny_models.py), so it lives here;
the tiny models the product builds too stay in verifier/tiny/.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import verifier.tiny
from verifier.build_cache import cached_build
from verifier.tiny.gemma4 import NUM_ASSISTANT_TOKENS, Gemma4Geometry, new_assistant, token_frequencies
from verifier.tiny.qwen3 import corpus_token_stream, save_model
from verifier.tiny.tokenizer import build_tokenizer

TINY = Path(verifier.tiny.__file__).parent
SOURCE_FILES = (Path(__file__), TINY / "tokenizer.py", TINY / "corpus.txt")
TOKENIZER_FILES = ("tokenizer.model", "tokenizer_config.json")
INITIALIZER_RANGE = 0.1
SEED = 0
LINEAR = "linear_attention"
FULL = "full_attention"
SLIDING = "sliding_attention"


@dataclass(frozen=True)
class Tokens:
    """The shared tokenizer's ids every config needs."""

    vocab_size: int
    bos: int
    eos: int
    pad: int

    def common(self) -> dict[str, Any]:
        return {
            "vocab_size": self.vocab_size,
            "bos_token_id": self.bos,
            "eos_token_id": self.eos,
            "pad_token_id": self.pad,
            "max_position_embeddings": 512,
            "initializer_range": INITIALIZER_RANGE,
        }


@dataclass(frozen=True)
class Architecture:
    """One catalog target architecture: how to build its tiny config and which model class saves it."""

    name: str
    real_targets: tuple[str, ...]  # catalog targets of this architecture
    config: Callable[[Tokens], Any]
    model_class: str  # the transformers class the publication's `architectures` names
    # The layer types that must be present in the tiny model (checked by the tests).
    layer_types: tuple[str, ...] = ()
    # Methods of the real drafters for these targets (catalog), besides draft-lm.
    drafter_methods: tuple[str, ...] = ("dflash",)


def _attention(hidden: int = 64, heads: int = 4, kv_heads: int = 2, head_dim: int = 16) -> dict[str, Any]:
    return {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
    }


def _llama(tokens: Tokens) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(**tokens.common(), **_attention(), intermediate_size=128, num_hidden_layers=2)


def _mistral(tokens: Tokens) -> Any:
    from transformers import MistralConfig

    # A window smaller than the generated sequences so the sliding cache really drops positions.
    return MistralConfig(
        **tokens.common(), **_attention(), intermediate_size=128, num_hidden_layers=2, sliding_window=24
    )


def _qwen3(tokens: Tokens) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(**tokens.common(), **_attention(), intermediate_size=128, num_hidden_layers=2)


def _qwen3_moe(tokens: Tokens) -> Any:
    from transformers import Qwen3MoeConfig

    return Qwen3MoeConfig(
        **tokens.common(),
        **_attention(),
        intermediate_size=128,
        moe_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=2,
    )


def _gated_deltanet() -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5 linear-attention geometry, shrunk; 3 linear layers then 1 full (the published ratio)."""
    return {
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "num_hidden_layers": 4,
        "layer_types": [LINEAR, LINEAR, LINEAR, FULL],
    }


def _qwen3_next(tokens: Tokens) -> Any:
    from transformers import Qwen3NextConfig

    return Qwen3NextConfig(
        **tokens.common(),
        **_attention(),
        **_gated_deltanet(),
        intermediate_size=128,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
    )


def _qwen3_5_text(tokens: Tokens) -> Any:
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(**tokens.common(), **_attention(), **_gated_deltanet(), intermediate_size=128)


def _qwen3_5_moe_text(tokens: Tokens) -> Any:
    from transformers import Qwen3_5MoeTextConfig

    return Qwen3_5MoeTextConfig(
        **tokens.common(),
        **_attention(),
        **_gated_deltanet(),
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
    )


def _qwen_vision(config_class: Any, hidden: int) -> Any:
    return config_class(
        depth=1,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        out_hidden_size=hidden,
        num_position_embeddings=16,
        patch_size=14,
        temporal_patch_size=2,
        spatial_merge_size=2,
    )


def _qwen3_5(tokens: Tokens) -> Any:
    """As published (Qwen3.5-4B/9B/27B): `Qwen3_5ForConditionalGeneration` with the text model in `text_config`."""
    from transformers import Qwen3_5Config
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5VisionConfig

    text = _qwen3_5_text(tokens)
    return Qwen3_5Config(
        text_config=text.to_dict(),
        vision_config=_qwen_vision(Qwen3_5VisionConfig, text.hidden_size).to_dict(),
        image_token_id=tokens.vocab_size - 4,
        video_token_id=tokens.vocab_size - 3,
        vision_start_token_id=tokens.vocab_size - 2,
        vision_end_token_id=tokens.vocab_size - 1,
    )


def _qwen3_5_moe(tokens: Tokens) -> Any:
    """As published (Qwen3.5-35B-A3B …): `Qwen3_5MoeForConditionalGeneration` with `text_config`."""
    from transformers import Qwen3_5MoeConfig
    from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeVisionConfig

    text = _qwen3_5_moe_text(tokens)
    return Qwen3_5MoeConfig(
        text_config=text.to_dict(),
        vision_config=_qwen_vision(Qwen3_5MoeVisionConfig, text.hidden_size).to_dict(),
        image_token_id=tokens.vocab_size - 4,
        video_token_id=tokens.vocab_size - 3,
        vision_start_token_id=tokens.vocab_size - 2,
        vision_end_token_id=tokens.vocab_size - 1,
    )


def _gpt_oss(tokens: Tokens) -> Any:
    from transformers import GptOssConfig

    # Alternating sliding/full layers with attention sinks, as published; window below the sequence lengths.
    return GptOssConfig(
        **tokens.common(),
        **_attention(),
        intermediate_size=64,
        num_local_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=4,
        sliding_window=24,
        layer_types=[SLIDING, FULL, SLIDING, FULL],
    )


def _gemma4_text(tokens: Tokens) -> Any:
    from transformers import Gemma4TextConfig

    config = Gemma4TextConfig(
        **tokens.common(),
        **_attention(),
        global_head_dim=16,
        intermediate_size=128,
        num_hidden_layers=4,
        layer_types=[SLIDING, SLIDING, SLIDING, FULL],
        sliding_window=24,
        final_logit_softcapping=30.0,
        hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=0,
        tie_word_embeddings=True,
    )
    config.serialize_explicit_per_layer_config = True
    return config


def _gemma4_moe_text(tokens: Tokens) -> Any:
    """gemma-4-26B-A4B: the MoE block next to the dense MLP in every layer."""
    config = _gemma4_text(tokens)
    config.enable_moe_block = True
    config.num_experts = 4
    config.top_k_experts = 2
    config.moe_intermediate_size = 32
    return config


def _gemma4_e_text(tokens: Tokens) -> Any:
    """gemma-4-E2B/E4B: per-layer input embeddings, and the last layers reuse earlier layers' K/V (shared KV)."""
    from transformers import Gemma4TextConfig

    config = Gemma4TextConfig(
        **tokens.common(),
        **_attention(),
        global_head_dim=16,
        intermediate_size=128,
        num_hidden_layers=4,
        layer_types=[SLIDING, FULL, SLIDING, FULL],
        sliding_window=24,
        final_logit_softcapping=30.0,
        hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=tokens.vocab_size,
        num_kv_shared_layers=2,
        tie_word_embeddings=True,
    )
    config.serialize_explicit_per_layer_config = True
    return config


def _gemma4(tokens: Tokens, text_config: Callable[[Tokens], Any] = _gemma4_text) -> Any:
    """As published (gemma-4-31B-it …): `Gemma4ForConditionalGeneration` with text and vision configs."""
    from transformers import Gemma4Config
    from transformers.models.gemma4.configuration_gemma4 import Gemma4VisionConfig

    vision = Gemma4VisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        position_embedding_size=64,
    )
    return Gemma4Config(
        text_config=text_config(tokens).to_dict(),
        vision_config=vision.to_dict(),
        audio_config=None,
        boi_token_id=tokens.vocab_size - 4,
        eoi_token_id=tokens.vocab_size - 3,
        image_token_id=tokens.vocab_size - 2,
        video_token_id=tokens.vocab_size - 1,
        boa_token_id=None,
        eoa_token_index=None,
        audio_token_id=None,
        initializer_range=INITIALIZER_RANGE,
    )


def _mla() -> dict[str, Any]:
    """DeepSeek multi-head latent attention, shrunk."""
    return {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "kv_lora_rank": 32,
        "q_lora_rank": 48,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
    }


def _deepseek_v3(tokens: Tokens) -> Any:
    from transformers import DeepseekV3Config

    # Layer 0 dense, layer 1 MoE (first_k_dense_replace), as the published models alternate at their scale.
    return DeepseekV3Config(
        **tokens.common(),
        **_mla(),
        intermediate_size=128,
        moe_intermediate_size=32,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=1,
        topk_group=1,
        first_k_dense_replace=1,
        num_hidden_layers=2,
    )


def _kimi_k25(tokens: Tokens) -> Any:
    """As published (Kimi-K2.5/K2.6): a DeepSeek-V3 text model under a vision wrapper."""
    from transformers import Kimi_K25Config
    from transformers.models.kimi_k25.configuration_kimi_k25 import Kimi_K25VisionConfig

    vision = Kimi_K25VisionConfig(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2, pos_emb_height=8,
        pos_emb_width=8,
    )  # fmt: skip
    return Kimi_K25Config(
        text_config=_deepseek_v3(tokens).to_dict(),
        vision_config=vision.to_dict(),
        projection_hidden_size=32,
        image_token_id=tokens.vocab_size - 4,
        video_token_id=tokens.vocab_size - 3,
        vision_start_token_id=tokens.vocab_size - 2,
        vision_end_token_id=tokens.vocab_size - 1,
    )


def _minimax_m2(tokens: Tokens) -> Any:
    from transformers import MiniMaxM2Config

    return MiniMaxM2Config(
        **tokens.common(),
        **_attention(),
        intermediate_size=32,
        num_local_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=2,
    )


def _glm_moe_dsa(tokens: Tokens) -> Any:
    from transformers import GlmMoeDsaConfig

    # index_topk below the sequence length so the sparse indexer really selects.
    return GlmMoeDsaConfig(
        **tokens.common(),
        **_mla(),
        intermediate_size=128,
        moe_intermediate_size=32,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        first_k_dense_replace=1,
        num_hidden_layers=2,
        index_topk=16,
        index_head_dim=16,
        index_n_heads=8,
        head_dim=8,
    )


def _mistral_small_4(tokens: Tokens) -> Any:
    """As published (Mistral-Small-4-119B-2603): `Mistral3ForConditionalGeneration` around a Mistral-4 text model
    (MLA attention, MoE) with a Pixtral vision tower."""
    from transformers import Mistral3Config, Mistral4Config, PixtralVisionConfig

    text = Mistral4Config(
        **tokens.common(),
        **_mla(),
        intermediate_size=128,
        moe_intermediate_size=32,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        first_k_dense_replace=1,
        num_hidden_layers=2,
    )
    vision = PixtralVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, head_dim=16, image_size=28,
        patch_size=14,
    )  # fmt: skip
    return Mistral3Config(
        text_config=text.to_dict(), vision_config=vision.to_dict(), image_token_index=tokens.vocab_size - 1
    )


def _deepseek_v4(tokens: Tokens) -> Any:
    from transformers import DeepseekV4Config

    # Both compressed attention kinds, with compression rates small enough to compress within the test sequences.
    return DeepseekV4Config(
        **tokens.common(),
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        q_lora_rank=32,
        moe_intermediate_size=32,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        o_groups=2,
        o_lora_rank=16,
        index_n_heads=4,
        index_head_dim=16,
        index_topk=16,
        sliding_window=16,
        hc_mult=2,
        num_hidden_layers=2,
        layer_types=["compressed_sparse_attention", "heavily_compressed_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
    )


def _gemma3(tokens: Tokens) -> Any:
    """As published (gemma-3-12b-it): `Gemma3ForConditionalGeneration` with a SigLIP tower."""
    from transformers import Gemma3Config, SiglipVisionConfig
    from transformers.models.gemma3.configuration_gemma3 import Gemma3TextConfig

    text = Gemma3TextConfig(
        **tokens.common(),
        **_attention(),
        intermediate_size=128,
        num_hidden_layers=4,
        layer_types=[SLIDING, SLIDING, SLIDING, FULL],
        sliding_window=24,
        final_logit_softcapping=30.0,
    )
    vision = SiglipVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14
    )
    return Gemma3Config(
        text_config=text.to_dict(),
        vision_config=vision.to_dict(),
        mm_tokens_per_image=4,
        boi_token_index=tokens.vocab_size - 3,
        eoi_token_index=tokens.vocab_size - 2,
        image_token_index=tokens.vocab_size - 1,
        initializer_range=INITIALIZER_RANGE,
    )


def _muse_glimmer(tokens: Tokens) -> Any:
    """As published (Muse-Glimmer-30B): `MuseGlimmerForConditionalGeneration` with the text model in `text_config`.

    The text model keeps the config class's own layout: sliding layers with every 4th (counted back from the last)
    full-attention and NoPE, centered RMSNorm, a normed embedding and a gated, QK-normed attention."""
    from transformers import MuseGlimmerConfig, MuseGlimmerTextConfig
    from transformers.models.muse_glimmer.configuration_muse_glimmer import MuseGlimmerVisionConfig

    hidden = 64
    text = MuseGlimmerTextConfig(
        **tokens.common(),
        **_attention(hidden),
        intermediate_size=128,
        num_hidden_layers=4,
        sliding_window=24,
        # The released checkpoint's 1/sqrt(hidden_size / 256), kept at the tiny width.
        output_multiplier=(hidden / 256) ** -0.5,
    )
    vision = MuseGlimmerVisionConfig(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2, pos_emb_height=8,
        pos_emb_width=8, max_position_embeddings=64,
    )  # fmt: skip
    return MuseGlimmerConfig(
        text_config=text.to_dict(),
        vision_config=vision.to_dict(),
        # The vision tower's output after its 2x2 patch merge.
        out_hidden_size=vision.hidden_size * vision.merge_size**2,
        projector_hidden_size=32,
        image_token_id=tokens.vocab_size - 2,
        video_token_id=tokens.vocab_size - 1,
        initializer_range=INITIALIZER_RANGE,
    )


ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture("llama", ("meta-llama/Llama-3.1-8B-Instruct",), _llama, "LlamaForCausalLM",
                     drafter_methods=("dflash", "eagle3")),
        Architecture("mistral", ("mistralai/Mistral-7B-style targets",), _mistral, "MistralForCausalLM"),
        Architecture("mistral3", ("mistralai/Mistral-Small-4-119B-2603",), _mistral_small_4,
                     "Mistral3ForConditionalGeneration", drafter_methods=("dflash", "dspark")),
        Architecture("qwen3", ("Qwen/Qwen3-4B", "Qwen/Qwen3-8B"), _qwen3, "Qwen3ForCausalLM",
                     drafter_methods=("dflash", "eagle3", "dspark")),
        Architecture("qwen3_moe", ("Qwen/Qwen3-Coder-30B-A3B-Instruct",), _qwen3_moe, "Qwen3MoeForCausalLM"),
        Architecture("qwen3_next", ("Qwen/Qwen3-Coder-Next",), _qwen3_next, "Qwen3NextForCausalLM",
                     layer_types=(LINEAR, FULL)),
        Architecture("qwen3_5", ("Qwen/Qwen3.5-4B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.6-27B"), _qwen3_5,
                     "Qwen3_5ForConditionalGeneration", layer_types=(LINEAR, FULL)),
        Architecture("qwen3_5_text", ("Qwen/Qwen3.5-4B (text backbone)",), _qwen3_5_text, "Qwen3_5ForCausalLM",
                     layer_types=(LINEAR, FULL)),
        Architecture("qwen3_5_moe", ("Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.6-35B-A3B"), _qwen3_5_moe,
                     "Qwen3_5MoeForConditionalGeneration", layer_types=(LINEAR, FULL)),
        Architecture("gpt_oss", ("openai/gpt-oss-20b", "openai/gpt-oss-120b"), _gpt_oss, "GptOssForCausalLM",
                     layer_types=(SLIDING, FULL), drafter_methods=("dflash", "eagle3")),
        Architecture("gemma4", ("google/gemma-4-31B-it", "google/gemma-4-12B-it"), _gemma4,
                     "Gemma4ForConditionalGeneration", layer_types=(SLIDING, FULL),
                     drafter_methods=("dflash", "eagle3", "dspark", "gemma4-assistant")),
        Architecture("gemma4_moe", ("google/gemma-4-26B-A4B-it",), lambda t: _gemma4(t, _gemma4_moe_text),
                     "Gemma4ForConditionalGeneration", layer_types=(SLIDING, FULL),
                     drafter_methods=("dflash", "gemma4-assistant")),
        Architecture("gemma4_e", ("google/gemma-4-E2B-it", "google/gemma-4-E4B-it"),
                     lambda t: _gemma4(t, _gemma4_e_text), "Gemma4ForConditionalGeneration",
                     layer_types=(SLIDING, FULL), drafter_methods=("gemma4-assistant",)),
        Architecture("deepseek_v3", ("deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct"), _deepseek_v3,
                     "DeepseekV3ForCausalLM", drafter_methods=("eagle3",)),
        Architecture("kimi_k25", ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.6"), _kimi_k25,
                     "Kimi_K25ForConditionalGeneration"),
        Architecture("minimax_m2", ("MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M2.7"), _minimax_m2,
                     "MiniMaxM2ForCausalLM"),
        Architecture("glm_moe_dsa", ("zai-org/GLM-5.1-FP8",), _glm_moe_dsa, "GlmMoeDsaForCausalLM"),
        Architecture("deepseek_v4", ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro"), _deepseek_v4,
                     "DeepseekV4ForCausalLM", drafter_methods=("dspark",)),
        Architecture("gemma3", ("google/gemma-3-12b-it",), _gemma3, "Gemma3ForConditionalGeneration",
                     layer_types=(SLIDING, FULL), drafter_methods=()),
        Architecture("muse_glimmer", ("meta-models/Muse-Glimmer-30B",), _muse_glimmer,
                     "MuseGlimmerForConditionalGeneration", layer_types=(SLIDING, FULL),
                     drafter_methods=("dflash2",)),
    )
}  # fmt: skip


def shared_tokenizer(cache_root: Path) -> Path:
    """The project's tiny SentencePiece tokenizer, built once."""
    return cached_build(
        cache_root, "tiny-tokenizer", build_tokenizer, source_files=SOURCE_FILES[1:], settings={"tokenizer": 1}
    )


def _tokens(tokenizer_dir: Path) -> Tokens:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    return Tokens(len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id)


def build_architecture(name: str, tokenizer_dir: Path, out_dir: Path) -> Path:
    """Write the tiny random `name` model (config.json, model.safetensors, tokenizer) into `out_dir`."""
    import transformers

    architecture = ARCHITECTURES[name]
    config = architecture.config(_tokens(tokenizer_dir))
    config.architectures = [architecture.model_class]
    torch.manual_seed(SEED)
    model = getattr(transformers, architecture.model_class)(config).eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    for file_name in TOKENIZER_FILES:
        shutil.copyfile(tokenizer_dir / file_name, out_dir / file_name)
    return out_dir


def cached_architecture(cache_root: Path, name: str) -> Path:
    """The tiny random `name` target under `cache_root`, built once per builder source."""
    tokenizer_dir = shared_tokenizer(cache_root)
    import transformers

    return cached_build(
        cache_root,
        f"tiny-arch-{name}",
        lambda out_dir: build_architecture(name, tokenizer_dir, out_dir),
        source_files=SOURCE_FILES,
        settings={"name": name, "seed": SEED, "transformers": transformers.__version__, "torch": torch.__version__},
    )


def build_random_draft_lm(tokenizer_dir: Path, out_dir: Path) -> Path:
    """A random 1-layer Llama over the shared tokenizer: a draft LM whose drafts are almost always rejected."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        **_tokens(tokenizer_dir).common(), **_attention(32, 2, 1, 16), intermediate_size=64, num_hidden_layers=1
    )
    torch.manual_seed(SEED + 1)
    LlamaForCausalLM(config).eval().save_pretrained(out_dir)
    for file_name in TOKENIZER_FILES:
        shutil.copyfile(tokenizer_dir / file_name, out_dir / file_name)
    return out_dir


def cached_random_draft_lm(cache_root: Path) -> Path:
    tokenizer_dir = shared_tokenizer(cache_root)
    return cached_build(
        cache_root,
        "tiny-random-llama-draft",
        lambda out_dir: build_random_draft_lm(tokenizer_dir, out_dir),
        source_files=SOURCE_FILES,
        settings={"seed": SEED + 1, "torch": torch.__version__},
    )


def build_gemma4_assistant_for(target_dir: Path, out_dir: Path) -> Path:
    """An untrained Gemma-4 assistant (MTP drafter) for a tiny published-layout Gemma-4 target from this module."""
    from transformers import AutoConfig, AutoTokenizer

    text_config = AutoConfig.from_pretrained(target_dir, local_files_only=True).get_text_config()
    tokenizer = AutoTokenizer.from_pretrained(target_dir, local_files_only=True)
    # Query heads only: K/V come from the target, so head_dim and num_key_value_heads follow the target's.
    geometry = Gemma4Geometry(
        hidden_size=32,
        intermediate_size=64,
        layer_types=(SLIDING, FULL),
        num_attention_heads=4,
        num_key_value_heads=text_config.num_key_value_heads,
        head_dim=text_config.head_dim,
    )
    torch.manual_seed(SEED + 2)
    frequencies = token_frequencies(corpus_token_stream(tokenizer), len(tokenizer))
    assistant = new_assistant(text_config, geometry, tokenizer, frequencies)
    assistant.generation_config.num_assistant_tokens = NUM_ASSISTANT_TOKENS
    out_dir.mkdir(parents=True, exist_ok=True)
    save_model(assistant, target_dir, out_dir)
    return out_dir


def cached_gemma4_assistant_for(cache_root: Path, target_dir: Path) -> Path:
    return cached_build(
        cache_root,
        "tiny-arch-gemma4-assistant",
        lambda out_dir: build_gemma4_assistant_for(target_dir, out_dir),
        source_files=(*SOURCE_FILES, TINY / "gemma4.py"),
        settings={"seed": SEED + 2, "target": target_dir.name, "torch": torch.__version__},
    )
