"""Which engine can run a drafter: its drafting method and its weight layout, judged from the config and repo id
alone (pure, no I/O), so `drafters find` and `drafters catalog coverage` can say so without downloading weights.

The tables mirror what the engines implement (tests check them against `verifier.methods` and
`verifier.engines.llamacpp.engine.SPEC_TYPES`): the PyTorch engine runs a (method, layout) pair only when it has a loader for that
layout; llama.cpp runs a method when llama-server has a `--spec-type` for it and its converter reads the layout.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from registry.domain.engines import LLAMA_CPP, MEASURED, PYTORCH

# Layout names.
CAUSAL_LM = "causal-lm"
Z_LAB = "z-lab"  # DFlash v1 as z-lab publishes it (also modal-labs' retrains)
DFLASH2 = "dflash2"
SPECULATORS = "speculators"  # vLLM speculators (RedHatAI): names its verifier in speculators_config
EAGLE3_ORIGINAL = "eagle3"  # yuhuili / SpecForge: LlamaForCausalLMEagle3, one `midlayer`
DEEPSPEC = "deepspec"  # DeepSeek's research checkpoints: DFlash/DSpark/EAGLE-3 with their own embed/LM head
# DeepSpec's Gemma-4 EAGLE-3 head (Gemma4Eagle3Model): Gemma-4 decoder layers (v-norm, pre/post feed-forward norms,
# scaled embeddings, logit soft-capping) that no engine implements yet.
DEEPSPEC_GEMMA4 = "deepspec-gemma4"
GOOGLE = "google"  # Gemma 4 assistant (MTP) checkpoints
IN_CHECKPOINT = "in-checkpoint"  # a drafting module shipped inside the target's own checkpoint
GGUF = "gguf"  # already converted for llama.cpp

RUNS: Mapping[str, frozenset[tuple[str, str]]] = {
    PYTORCH: frozenset(
        {
            ("draft-lm", CAUSAL_LM),
            ("dflash", Z_LAB),
            ("dflash", SPECULATORS),
            ("dflash", DEEPSPEC),
            ("dflash2", DFLASH2),
            ("dspark", SPECULATORS),
            ("dspark", DEEPSPEC),
            ("eagle3", EAGLE3_ORIGINAL),
            ("eagle3", SPECULATORS),
            ("eagle3", DEEPSPEC),
            ("gemma4-assistant", GOOGLE),
        }
    ),
    LLAMA_CPP: frozenset(
        {
            ("draft-lm", CAUSAL_LM),
            ("draft-lm", GGUF),
            ("dflash", Z_LAB),
            ("dflash", GGUF),
            ("dflash2", DFLASH2),  # tests/llamacpp/test_dflash2_agreement.py
            ("dflash2", GGUF),
            ("dspark", DEEPSPEC),
            ("eagle3", EAGLE3_ORIGINAL),
            ("eagle3", SPECULATORS),  # tests/llamacpp/test_eagle3_agreement.py, both layouts
            ("eagle3", GGUF),
            ("gemma4-assistant", GOOGLE),
            ("gemma4-assistant", GGUF),
        }
    ),
}

_DEEPSPEC_REPO = re.compile(r"^deepseek-ai/(dflash|dspark|eagle3)_", re.IGNORECASE)
_DEEPSPEC_GEMMA4_EAGLE3_REPO = re.compile(r"^deepseek-ai/eagle3_gemma4_", re.IGNORECASE)
_DEEPSPEC_EAGLE3_ARCHITECTURES = {"Qwen3Eagle3Model": DEEPSPEC, "Gemma4Eagle3Model": DEEPSPEC_GEMMA4}
_SPECULATORS_REPO = re.compile(r"speculator|\.(dflash|dspark|eagle3|peagle)$", re.IGNORECASE)
_V4_DSPARK_REPO = re.compile(r"^deepseek-ai/DeepSeek-V4-.*DSpark", re.IGNORECASE)


@dataclass(frozen=True)
class Coverage:
    method: str
    layout: str
    engines: tuple[str, ...]  # the engines that run it; empty: none yet

    @property
    def runnable(self) -> bool:
        return bool(self.engines)

    def note(self) -> str | None:
        """One line for `drafters find` when no engine runs this drafter, else None."""
        if self.engines:
            return None
        return f"no engine runs {self.method} drafters in the {self.layout} layout yet"


def layout_of(method: str | None, config: Mapping[str, Any] | None, repo_id: str | None) -> str:
    """The weight layout a drafter most likely uses, from its config when there is one, else its repo id."""
    config = config if isinstance(config, Mapping) else {}
    repo = repo_id or ""
    if repo.upper().endswith("-GGUF"):
        return GGUF
    if config.get("speculators_model_type") is not None or "speculators_config" in config:
        return SPECULATORS
    if _V4_DSPARK_REPO.search(repo):
        return IN_CHECKPOINT
    if _SPECULATORS_REPO.search(repo) and repo.lower().startswith("redhatai/"):
        return SPECULATORS
    if method == "dflash2":
        return DFLASH2
    if method == "eagle3":
        architectures = config.get("architectures") if isinstance(config.get("architectures"), list) else []
        for architecture, layout in _DEEPSPEC_EAGLE3_ARCHITECTURES.items():
            if architecture in architectures:
                return layout
        if _DEEPSPEC_GEMMA4_EAGLE3_REPO.search(repo) and not architectures:
            return DEEPSPEC_GEMMA4
    if _DEEPSPEC_REPO.search(repo) or method == "dspark":
        return DEEPSPEC
    if method == "dflash":
        return Z_LAB
    if method == "eagle3":
        return EAGLE3_ORIGINAL
    if method == "gemma4-assistant":
        return GOOGLE
    return CAUSAL_LM


def coverage(method: str | None, config: Mapping[str, Any] | None, repo_id: str | None) -> Coverage:
    method = method or "draft-lm"
    layout = layout_of(method, config, repo_id)
    engines = tuple(engine for engine in MEASURED if (method, layout) in RUNS[engine])
    return Coverage(method=method, layout=layout, engines=engines)
