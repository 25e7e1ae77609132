"""The config fixtures in tests/data/configs, and a hypothesis helper that damages a config, shared by the config
and compatibility tests."""

from __future__ import annotations

import copy
from pathlib import Path

from hypothesis import strategies as st

from registry.domain.configs import parse_config

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"

# Where each fixture's values come from (/work/shared/reference). Only facts stated there are in the files;
# fields the reference does not give are left out rather than invented.
FIXTURE_SOURCES = {
    "Qwen__Qwen3-4B.json": "hub-protocol.md §9",
    "Qwen__Qwen3-8B.json": "hub-protocol.md §9",
    "meta-llama__Llama-3.1-8B-Instruct.json": "hub-protocol.md §9",
    "openai__gpt-oss-20b.json": "hub-protocol.md §9",
    "google__gemma-3-12b-it.json": "hub-protocol.md §9 (text dims under text_config)",
    "google__gemma-4-31B-it.json": "hub-protocol.md §9 + values implied by the gemma-4-31B-it-DFlash config",
    "deepseek-ai__DeepSeek-V3.json": "hub-protocol.md §9",
    "z-lab__Qwen3-4B-DFlash-b16.json": "drafters.md §7.1 (full field list)",
    "z-lab__Qwen3-8B-DFlash-b16.json": "drafters.md §2.1 geometry in the §7.1 layout",
    "z-lab__gpt-oss-20b-DFlash.json": "drafters.md §2.1 (vocab and num_target_layers unknown, so absent)",
    "z-lab__Qwen3.5-27B-DFlash.json": "drafters.md §2.1",
    "z-lab__gemma-4-31B-it-DFlash.json": "drafters.md §2.1 + §7.1 variants (rope_parameters, softcapping)",
    "RedHatAI__Qwen3-8B-speculator.eagle3.json": "drafters.md §7.3 shape; aux ids = EAGLE-3 default for N=36",
    "yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json": "drafters.md §7.4",
    "google__gemma-4-31B-it-assistant.json": "drafters.md §5 + transformers-notes.md (backbone_hidden_size)",
    "deepseek-ai__dspark_qwen3_4b_block7.json": "drafters.md §4 (export format, Qwen3-4B geometry)",
    "synthetic__Qwen3-8B-DFlash2.json": "drafters.md §7.2 field names; geometry synthetic (Qwen3-8B's)",
    "bad_truncated.json": "Qwen3-4B config cut in half",
    "bad_non_utf8.json": "a Latin-1 byte in a string",
    "bad_array.json": "a JSON array instead of an object",
    "bad_negative_sizes.json": "Qwen3-4B config with negative hidden_size and vocab_size",
}
BAD_FIXTURES = {name for name in FIXTURE_SOURCES if name.startswith("bad_")}
GOOD_FIXTURES = sorted(set(FIXTURE_SOURCES) - BAD_FIXTURES - {"bad_negative_sizes.json"})


def fixture_bytes(name: str) -> bytes:
    return (CONFIGS / name).read_bytes()


def fixture_config(name: str) -> dict:
    return parse_config(fixture_bytes(name))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
CONFIG_KEYS = st.sampled_from(
    [
        "architectures", "model_type", "vocab_size", "hidden_size", "num_hidden_layers", "text_config",
        "dflash_config", "target_layer_ids", "mask_token_id", "block_size", "num_target_layers", "eos_token_id",
        "bos_token_id", "speculators_model_type", "speculators_config", "transformer_layer_config",
        "draft_vocab_size", "eagle_config", "quantization_config", "layer_types", "final_logit_softcapping",
        "backbone_hidden_size", "target_hidden_size", "sliding_window", "tie_word_embeddings",
    ]
)  # fmt: skip


def damaged(config: dict, data: st.DataObject) -> dict:
    """A copy of config with a few known keys (at top level or in a nested section) set to arbitrary JSON."""
    config = copy.deepcopy(config)
    for _ in range(data.draw(st.integers(1, 4))):
        sections = [config, *(v for v in config.values() if isinstance(v, dict))]
        data.draw(st.sampled_from(sections))[data.draw(CONFIG_KEYS)] = data.draw(JSON_VALUES)
    return config
