"""What a speculative-decoding run measured, as typed values: spreads over repeats, acceptance, throughput, bare
forward costs, the settings it ran under and one prompt set's summary (`SetMeasurement`).

These are the parts of `registry.domain.run.Run`, the one shape a measurement has from the verifier's harness,
which makes it, through the store, which keeps it, to the command line and the dashboard, which show it. The
arithmetic that produces them from decodes lives in `verifier.metrics`; the definitions are written there too.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

METRIC_VERSION = 3  # the metric definitions of verifier.metrics; runs stored before versions existed are 1
DTYPES = ("float32", "float16", "bfloat16")
# A dtype to choose by device: bfloat16 on CUDA (what serving engines and autoverify run), float32 on a CPU (where
# bfloat16 matmuls are slow and float32 is exact). A run stores the dtype it chose, never "auto".
AUTO_DTYPE = "auto"


def dtype_for(device_type: str) -> str:
    """The dtype "auto" stands for on a device of this type ("cuda", "cpu", …)."""
    return "bfloat16" if device_type == "cuda" else "float32"
DEFAULT_REPEATS = 5  # benchmarks take at least this many repeats unless a caller (a test) asks for fewer
# New tokens per decode unless asked otherwise: a whole answer (a chat reply, a function) rather than its first
# lines, since acceptance changes along an answer. The references measure 1-2k (z-lab's benchmark); 512 keeps a
# CPU run of a real model within minutes. Tests ask for fewer.
DEFAULT_MAX_NEW_TOKENS = 512


# What a run's one memory figure (`Run.peak_memory_bytes`) is, by `Run.peak_memory_kind`. Each is measured for
# the run alone (reset when its measurement starts), weights and caches included.
MEMORY_KINDS = {
    "cuda_max_memory_allocated": "peak CUDA memory allocated by torch during the run (reset at its start; the "
                                 "allocator's reserve and the CUDA context are not counted)",
    "process_rss_peak_of_run": "peak resident memory of the verifying process during the run (Linux VmHWM, reset "
                               "at its start: the weights it holds are counted, an earlier job's peak is not)",
    "process_rss_peak": "peak resident memory of the whole process so far (ru_maxrss; may include earlier jobs of "
                        "the same worker): stored by older runs, or where the peak cannot be reset",
    "llama_server_rss_peak": "peak resident host memory of the llama-server that ran the pair (Linux VmHWM over "
                             "its life, which is this run)",
}


@dataclass(frozen=True)
class Spread:
    median: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    n: int


def spread(values: Sequence[float]) -> Spread:
    """Median, min/max and quartiles (inclusive method) over repeats."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    if len(ordered) == 1:
        q1 = q3 = ordered[0]
    else:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return Spread(
        median=statistics.median(ordered), minimum=ordered[0], maximum=ordered[-1], q1=q1, q3=q3, n=len(ordered)
    )


@dataclass(frozen=True)
class Acceptance:
    rounds: int
    drafted: int
    accepted: int
    tau: float
    acceptance_rate: float | None  # None when nothing was drafted
    histogram: tuple[int, ...]  # histogram[n] = rounds that accepted exactly n drafts
    marginal: tuple[float, ...]  # m_1..m_K
    conditional: tuple[float | None, ...]  # c_1..c_K; None where no round reached position i
    uniform_draft_length: bool  # every round drafted the same k: the identity τ = 1 + Σ m_i is exact
    identity_gap: float  # τ - (1 + Σ m_i)


@dataclass(frozen=True)
class Throughput:
    prompts: int
    output_tokens: int
    seconds: float
    tokens_per_s: float  # pooled: all output tokens / all decode wall time
    ttft_s: float  # mean time to first token (prefill + first token)
    tpot_s: float | None  # time per output token after the first, pooled; None if no prompt made 2+ tokens
    target_steps: int  # verify passes after prefill
    draft_seconds_per_step: float
    verify_seconds_per_step: float
    draft_time_share: float  # draft time ÷ (draft + verify) time


@dataclass(frozen=True)
class ForwardCosts:
    """Bare forward costs of a pair at one context length: the fastest of `repeats` timings, in seconds."""

    context_length: int
    gamma: int  # drafted tokens per step
    target_step_s: float  # T(1)
    verify_step_s: float  # T(γ+1)
    draft_step_s: float  # one drafting step
    repeats: int
    spread: dict[str, dict[str, float]] = field(default_factory=dict)  # per cost: min, max, q1, q3

    @classmethod
    def from_timings(cls, context_length: int, gamma: int, target: Sequence[float], verify: Sequence[float],
                     draft: Sequence[float]) -> ForwardCosts:
        def summary(values: Sequence[float]) -> dict[str, float]:
            s = spread(values)
            return {"min": s.minimum, "q1": s.q1, "median": s.median, "q3": s.q3, "max": s.maximum}

        # The fastest repeat is the bare cost: interference (other processes, the OS) only ever adds to it.
        return cls(context_length=context_length, gamma=gamma, target_step_s=min(target),
                   verify_step_s=min(verify), draft_step_s=min(draft),
                   repeats=len(target), spread={"target_step_s": summary(target),
                                                "verify_step_s": summary(verify), "draft_step_s": summary(draft)})


@dataclass(frozen=True)
class RunSettings:
    """What a verification run was asked to do; a run stores the settings it ran under."""

    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.0
    seed: int = 0
    repeats: int = DEFAULT_REPEATS
    warmup: int = 1
    device: str = "auto"  # "auto" = cuda when available, else cpu
    dtype: str = "float32"
    draft_length: int | None = None  # None = the method's default
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
        if self.dtype not in (*DTYPES, AUTO_DTYPE):
            problems.append(f"dtype must be one of {', '.join((*DTYPES, AUTO_DTYPE))}")
        if problems:
            raise ValueError("invalid run settings: " + "; ".join(problems))


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
    # "tie": the run's dtype cannot tell the two tokens apart at this position (`TIE_RULE`); "diverged": it can, so
    # the speculative output left the target's; None: not judged (an engine that cannot re-score, an older run).
    verdict: str | None = None
    # The same gap from a float32 copy of the target (the weights the run ran, scored without rounding to its dtype).
    float32_gap: float | None = None
    # The largest gap the rule calls a tie here: one unit in the last place of the run's dtype at these logits.
    tie_tolerance: float | None = None


TIE = "tie"
DIVERGED = "diverged"
# How `Divergence.verdict` is decided (verifier.engines.pytorch.judge_divergence); printed with a tie.
TIE_RULE = ("re-scored on the baseline's prefix: the two tokens' logits in the run's dtype and in float32 both lie "
            "within one unit in the last place of the run's dtype at that magnitude")


@dataclass(frozen=True)
class SetMeasurement:
    """One prompt set's (or the whole run's) measurement. A run read from a server's counters (`drafters ingest`)
    has no baseline and no repeats: its throughput is one reading, and SGLang gives only a mean τ
    (`reported_tau`) without draft counts."""

    name: str
    prompts: int
    digest: str
    baseline: Throughput | None = None  # pooled over repeats
    baseline_tokens_per_s: Spread | None = None  # over repeats
    speculative: Throughput | None = None
    tokens_per_s: Spread | None = None
    speedup: Spread | None = None  # end to end (prefill included)
    decode_speedup: Spread | None = None  # decode only: time per token after the first
    acceptance: Acceptance | None = None  # pooled over repeats
    tau_emitted: float | None = None
    # τ as z-lab's benchmark counts it (drafts accepted past the end of the output included); None where the engine
    # does not see it (llama-server) or the run predates it
    tau_verified: float | None = None
    tau_per_prompt: float | None = None  # the mean over prompts of each prompt's τ (z-lab's average)
    ideal_speedup: float | None = None  # from the run's bare forward costs; None without them
    efficiency: float | None = None  # median decode-only speedup ÷ ideal speedup
    lossless: bool | None = None  # greedy runs only
    reported_tau: float | None = None  # a server's own mean acceptance length, where it counts no drafts

    @property
    def tau(self) -> float | None:
        return self.acceptance.tau if self.acceptance is not None else self.reported_tau

    @property
    def acceptance_rate(self) -> float | None:
        return self.acceptance.acceptance_rate if self.acceptance is not None else None

    @property
    def per_position_acceptance(self) -> tuple[float, ...]:
        return self.acceptance.marginal if self.acceptance is not None else ()

    @property
    def measured(self) -> Throughput | None:
        """The decode this set's speed is of: the speculative one, or the baseline without a drafter."""
        return self.speculative or self.baseline
