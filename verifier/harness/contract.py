"""The engine contract the harness drives: what an engine reports, the errors and divergences every engine speaks,
and the draft length a method defaults to. The run's settings and its result are registry.domain's (`RunSettings`,
`Run`): the registry stores and shows the same types.

Engines (`verifier.engines.*`) and methods (`verifier.methods.*`) import this module; it imports neither, so
calls run harness → engines → methods while imports only ever point down to the kit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from registry.domain.drafter_facts import drafter_facts
from registry.domain.measurement import Divergence, ForwardCosts, RunSettings
from verifier.metrics import StepCounts

# progress(done, total, label) after each decode of a measured repeat.
Progress = Callable[[int, int, str], None]
# z-lab's DFlash default when a config names no block size (as `verifier.methods.dflash.parse_dflash_config`).
DFLASH_DEFAULT_BLOCK_SIZE = 16
DRAFT_LM_DEFAULT_LENGTH = 4
GEMMA4_ASSISTANT_DEFAULT_LENGTH = 4


@dataclass(frozen=True)
class Generation:
    """One prompt's decode as an engine reports it."""

    tokens: tuple[int, ...]  # exactly as output (trimmed at EOS / max_new_tokens)
    prefill_seconds: float  # prompt prefill + first token = time to first token
    total_seconds: float
    counts: StepCounts  # verification steps, drafted / accepted / emitted tokens (see verifier.metrics)
    rounds: tuple[Any, ...] = ()  # per-round `RoundRecord`s where the engine sees them (PyTorch), else ()


class Engine(Protocol):
    """What the harness drives. An engine holds one loaded (target, drafter) pair."""

    name: str  # "pytorch", "llama.cpp"
    method: str | None  # None: baseline only
    draft_length: int  # 0 without a drafter
    settings: RunSettings  # as the engine runs them (a dtype of "auto" chosen for its device)

    def encode(self, prompt: Any) -> list[int]: ...

    def generate(self, prompt_ids: Sequence[int], *, speculative: bool, seed: int) -> Generation: ...

    def forward_costs(self, context_ids: Sequence[int], repeats: int) -> ForwardCosts | None:
        """Bare forward costs at this context (None: the engine cannot time its forwards)."""
        ...

    def divergence(self, prompt_ids: Sequence[int], baseline: Sequence[int], speculative: Sequence[int],
                   set_name: str, prompt_index: int, repeat: int) -> Divergence | None: ...

    def reset_peak_memory(self) -> None: ...

    def report(self) -> EngineReport: ...


@dataclass(frozen=True)
class EngineReport:
    """What an engine says about itself after the measurement."""

    peak_memory_bytes: int | None  # None: the engine cannot measure what it holds (a GPU-offloaded llama-server)
    peak_memory_kind: str | None  # a key of registry.domain.measurement.MEMORY_KINDS
    target_weight_bytes: int
    drafter_weight_bytes: int | None
    provenance: dict[str, Any]


class IncompatiblePair(ValueError):
    """The drafter cannot run on this target; `reasons` says why."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = tuple(reasons)
        super().__init__("drafter and target are incompatible: " + "; ".join(self.reasons))


def first_divergence(
    baseline: Sequence[int], speculative: Sequence[int], set_name: str, prompt_index: int, repeat: int
) -> Divergence | None:
    if list(baseline) == list(speculative):
        return None
    position = next(
        (i for i, (b, s) in enumerate(zip(baseline, speculative, strict=False)) if b != s),
        min(len(baseline), len(speculative)),
    )
    return Divergence(
        prompt_set=set_name,
        prompt_index=prompt_index,
        repeat=repeat,
        position=position,
        baseline_token=baseline[position] if position < len(baseline) else None,
        speculative_token=speculative[position] if position < len(speculative) else None,
    )


def given_draft_length(settings: RunSettings) -> int:
    """The draft length a method's builder is given: resolved once by `resolve_draft_length` before it runs
    (`verifier.methods.build_proposer`), never re-clamped or defaulted by the builder."""
    if settings.draft_length is None:
        raise ValueError("the draft length is resolved before a proposer is built (verifier.methods.build_proposer)")
    return settings.draft_length


def resolve_draft_length(method: str | None, drafter_dir: Path | None, drafter_config: Mapping[str, Any] | None,
                         requested: int | None) -> int | None:
    """Tokens drafted per round: the request (a block drafter clamps it to its trained block), else the method's
    default. None: the method has no default here (the engine's own applies). The one reader of `block_size`, from
    the drafter's config as the pre-check read it (`drafter_config`; None: a .gguf file, no folder)."""
    if method is None:
        return None
    folder = drafter_dir if drafter_dir is not None and drafter_dir.is_dir() else None
    if method in ("dflash", "dflash2", "dspark"):
        block_size = DFLASH_DEFAULT_BLOCK_SIZE
        if drafter_config is not None:
            block_size = drafter_facts(dict(drafter_config), method).block_size or DFLASH_DEFAULT_BLOCK_SIZE
        # DSpark drafts from the anchor slot too (slot k drafts the token after it): a whole block of drafts.
        drafts = block_size if method == "dspark" else block_size - 1
        return drafts if requested is None else min(requested, drafts)
    if requested is not None:
        return requested
    if method == "draft-lm":
        return DRAFT_LM_DEFAULT_LENGTH
    if method == "gemma4-assistant":
        generation_config = folder / "generation_config.json" if folder is not None else None
        if generation_config is not None and generation_config.is_file():
            tokens = json.loads(generation_config.read_text(encoding="utf-8")).get("num_assistant_tokens")
            if isinstance(tokens, int) and tokens > 0:
                return tokens
        return GEMMA4_ASSISTANT_DEFAULT_LENGTH
    return None
