"""The engine contract the harness drives: run settings and their defaults, what an engine reports, the one
result type (`PairRun`), the errors and divergences every engine speaks, and the draft length a method defaults to.

Engines (`verifier.engines.*`) and methods (`verifier.methods.*`) import this module; it imports neither, so
calls run harness → engines → methods while imports only ever point down to the kit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from registry.domain.drafter_facts import drafter_facts
from verifier.folders import read_config
from verifier.metrics import METRIC_VERSION, Acceptance, ForwardCosts, Spread, StepCounts, Throughput

# progress(done, total, label) after each decode of a measured repeat.
Progress = Callable[[int, int, str], None]
# Benchmarks take at least this many repeats unless a caller (a test) asks for fewer.
DEFAULT_REPEATS = 5
# z-lab's DFlash default when a config names no block size (as `verifier.methods.dflash.parse_dflash_config`).
DFLASH_DEFAULT_BLOCK_SIZE = 16
DRAFT_LM_DEFAULT_LENGTH = 4
GEMMA4_ASSISTANT_DEFAULT_LENGTH = 4
TOKENIZER_FILE_NAMES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")
DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class RunSettings:
    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    repeats: int = DEFAULT_REPEATS
    warmup: int = 1
    device: str = "auto"  # "auto" = cuda when available, else cpu
    dtype: str = "float32"
    draft_length: int | None = None  # None = the method's default (`resolve_draft_length`)
    method: str | None = None  # override the method detected from the drafter's config
    enable_thinking: bool = False
    cost_repeats: int = 10  # timed repeats of each bare forward (after one warm-up); the fastest is the cost

    def __post_init__(self) -> None:
        problems = []
        if self.max_new_tokens < 1:
            problems.append("max_new_tokens must be at least 1")
        if self.temperature < 0:
            problems.append("temperature must be >= 0")
        if self.repeats < 1:
            problems.append("repeats must be at least 1")
        if self.warmup < 0:
            problems.append("warmup must be >= 0")
        if self.cost_repeats < 1:
            problems.append("cost_repeats must be at least 1")
        if self.draft_length is not None and self.draft_length < 1:
            problems.append("draft_length must be at least 1 (or unset for the method's default)")
        if self.dtype not in DTYPES:
            problems.append(f"dtype must be one of {', '.join(DTYPES)}")
        if problems:
            raise ValueError("invalid run settings: " + "; ".join(problems))


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

    peak_memory_bytes: int
    peak_memory_kind: str
    target_weight_bytes: int
    drafter_weight_bytes: int | None
    provenance: dict[str, Any]


@dataclass(frozen=True)
class SetMeasurement:
    """One prompt set's (or the whole run's) measurement, as the harness summarizes it."""

    name: str
    prompts: int
    digest: str
    baseline: Throughput  # pooled over repeats
    baseline_tokens_per_s: Spread  # over repeats
    speculative: Throughput | None = None
    tokens_per_s: Spread | None = None
    speedup: Spread | None = None  # end to end (prefill included)
    decode_speedup: Spread | None = None  # decode only: time per token after the first
    acceptance: Acceptance | None = None  # pooled over repeats
    tau_emitted: float | None = None
    ideal_speedup: float | None = None  # from the run's bare forward costs; None without them
    efficiency: float | None = None  # median decode-only speedup ÷ ideal speedup
    lossless: bool | None = None  # greedy runs only


@dataclass
class PairRun:
    method: str | None  # None: baseline only
    overall: SetMeasurement
    per_set: list[SetMeasurement]
    lossless: bool | None
    first_divergence: Divergence | None
    peak_memory_bytes: int
    peak_memory_kind: str  # "cuda_max_memory_allocated", "process_rss_peak", "llama_server_rss_peak"
    target_weight_bytes: int
    drafter_weight_bytes: int | None
    provenance: dict[str, Any]
    settings: RunSettings
    draft_length: int = 0
    forward_costs: ForwardCosts | None = None
    # "set/index" → generated token ids of the last repeat (speculative when there is a drafter).
    generations: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        overall = self.overall
        acc = overall.acceptance
        measured = overall.speculative or overall.baseline
        return {
            "metric_version": METRIC_VERSION,
            "method": self.method,
            "lossless": self.lossless,
            "first_divergence": asdict(self.first_divergence) if self.first_divergence else None,
            "tau": acc.tau if acc else None,
            "tau_emitted": overall.tau_emitted,
            "acceptance_rate": acc.acceptance_rate if acc else None,
            "per_position_acceptance": (
                {"marginal": list(acc.marginal), "conditional": list(acc.conditional)} if acc else None
            ),
            "acceptance_histogram": list(acc.histogram) if acc else None,
            "identity_check": (
                {"uniform_draft_length": acc.uniform_draft_length, "gap": acc.identity_gap} if acc else None
            ),
            "baseline_tokens_per_s": overall.baseline_tokens_per_s.median,
            "tokens_per_s": overall.tokens_per_s.median if overall.tokens_per_s else None,
            "speedup": overall.speedup.median if overall.speedup else None,
            "speedup_spread": asdict(overall.speedup) if overall.speedup else None,
            "decode_speedup": overall.decode_speedup.median if overall.decode_speedup else None,
            "decode_speedup_spread": asdict(overall.decode_speedup) if overall.decode_speedup else None,
            "ideal_speedup": overall.ideal_speedup,
            "efficiency": overall.efficiency,
            "forward_costs": self.forward_costs.to_dict() if self.forward_costs else None,
            "ttft_s": measured.ttft_s,
            "tpot_s": measured.tpot_s,
            "draft_time_share": overall.speculative.draft_time_share if overall.speculative else None,
            "peak_memory_bytes": self.peak_memory_bytes,
            "peak_memory_kind": self.peak_memory_kind,
            "target_weight_bytes": self.target_weight_bytes,
            "drafter_weight_bytes": self.drafter_weight_bytes,
            "draft_length": self.draft_length,
            "repeats": self.settings.repeats,
            "overall": asdict(overall),
            "per_set": {result.name: asdict(result) for result in self.per_set},
            "provenance": dict(self.provenance),
            "settings": asdict(self.settings),
        }


class IncompatiblePair(ValueError):
    """The drafter cannot run on this target; `reasons` says why."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = tuple(reasons)
        super().__init__("drafter and target are incompatible: " + "; ".join(self.reasons))


@dataclass(frozen=True)
class Divergence:
    """First token where the speculative output left the baseline's in a greedy run."""

    prompt_set: str
    prompt_index: int
    repeat: int
    position: int
    baseline_token: int | None  # None: the baseline output ended here
    speculative_token: int | None
    # The target's top-1 minus top-2 logit on the baseline's prefix at `position` (one forward after the run):
    # a gap near 0 is a numerical near-tie (bf16), a wide one is a bug. None when the baseline ended there.
    target_logit_margin: float | None = None
    # The target's logit of the baseline token minus that of the speculative token at the same position.
    speculative_token_gap: float | None = None


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


def resolve_draft_length(method: str | None, drafter: Path | None, requested: int | None) -> int | None:
    """Tokens drafted per round: the request (a block drafter clamps it to its trained block), else the method's
    default. None: the method has no default here (the engine's own applies). The one reader of `block_size`."""
    if method is None:
        return None
    folder = drafter if drafter is not None and drafter.is_dir() else None
    if method in ("dflash", "dflash2", "dspark"):
        block_size = DFLASH_DEFAULT_BLOCK_SIZE
        if folder is not None:
            block_size = drafter_facts(read_config(folder), method).block_size or DFLASH_DEFAULT_BLOCK_SIZE
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
