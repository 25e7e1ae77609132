"""The one measuring harness for every engine (PyTorch and llama.cpp).

The harness owns what must mean the same in both engines: the settings and their defaults, the repeats × prompt
sets loop (baseline and speculative interleaved per prompt, so drift in machine load hits both alike), the seed of
every decode, the draft length a method defaults to, the lossless check, the summaries and the common provenance.
An engine only generates (one prompt → tokens, step counts, timings), measures its bare forward costs when it can,
and describes itself. One result type, `PairRun`, flows from here to storage (`verifier.jobs.run_spec`) and the CLI.
Metric definitions live in `verifier.metrics`.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from verifier.metrics import (
    METRIC_VERSION,
    Acceptance,
    ForwardCosts,
    Spread,
    StepCounts,
    Throughput,
    acceptance,
    counts_acceptance,
    decode_speedup,
    ideal_speedup,
    speedup,
    spread,
    throughput,
)
from verifier.prompts import PromptSet

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
                   set_name: str, prompt_index: int, repeat: int) -> Any: ...

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
class SetResult:
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
    overall: SetResult
    per_set: list[SetResult]
    lossless: bool | None
    first_divergence: Any  # verifier.engine.Divergence or None
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


@dataclass
class _Trials:
    """Decodes of one prompt set: [repeat][prompt]."""

    baseline: list[list[Generation]] = field(default_factory=list)
    speculative: list[list[Generation]] = field(default_factory=list)


def decode_seed(seed: int, repeat: int, set_index: int, prompt_index: int) -> int:
    """The seed of one decode, the same in every engine (31 bits: llama-server takes a uint32)."""
    material = f"{seed}/{repeat}/{set_index}/{prompt_index}".encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big") >> 33


def resolve_draft_length(method: str | None, drafter: Path | None, requested: int | None) -> int | None:
    """Tokens drafted per round: the request (a block drafter clamps it to its trained block), else the method's
    default. None: the method has no default here (the engine's own applies). The one reader of `block_size`."""
    if method is None:
        return None
    folder = drafter if drafter is not None and drafter.is_dir() else None
    if method in ("dflash", "dspark"):
        block_size = DFLASH_DEFAULT_BLOCK_SIZE
        if folder is not None:
            from registry.domain.configs import drafter_facts
            from verifier.loading import read_config

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


def run(engine: Engine, prompt_sets: Sequence[PromptSet], settings: RunSettings,
        progress: Progress | None = None, *, target_dir: Path | None = None, drafter: Path | None = None) -> PairRun:
    """Measure `engine`'s pair (or its target alone) on `prompt_sets`."""
    if not prompt_sets or any(not s.prompts for s in prompt_sets):
        raise ValueError("a run needs at least one non-empty prompt set")
    speculative = engine.method is not None
    encoded = [[engine.encode(p) for p in s.prompts] for s in prompt_sets]

    for _ in range(settings.warmup):
        engine.generate(encoded[0][0], speculative=False, seed=settings.seed)
        if speculative:
            engine.generate(encoded[0][0], speculative=True, seed=settings.seed)
    engine.reset_peak_memory()

    trials = [_Trials() for _ in prompt_sets]
    divergence: Any = None
    set_lossless = [True] * len(prompt_sets)
    total = settings.repeats * sum(len(p) for p in encoded) * (2 if speculative else 1)
    done = 0
    for repeat in range(settings.repeats):
        for set_index, prompt_set in enumerate(prompt_sets):
            baseline_row: list[Generation] = []
            speculative_row: list[Generation] = []
            for prompt_index, prompt in enumerate(encoded[set_index]):
                seed = decode_seed(settings.seed, repeat, set_index, prompt_index)
                label = f"{prompt_set.name} #{prompt_index} (repeat {repeat + 1})"
                baseline_row.append(engine.generate(prompt, speculative=False, seed=seed))
                done += 1
                if progress is not None:
                    progress(done, total, f"{label}, baseline")
                if speculative:
                    speculative_row.append(engine.generate(prompt, speculative=True, seed=seed))
                    done += 1
                    if progress is not None:
                        progress(done, total, f"{label}, {engine.method}")
                    base, spec = baseline_row[-1].tokens, speculative_row[-1].tokens
                    if settings.temperature == 0 and base != spec:
                        set_lossless[set_index] = False
                        if divergence is None:
                            divergence = engine.divergence(prompt, base, spec, prompt_set.name, prompt_index, repeat)
            trials[set_index].baseline.append(baseline_row)
            if speculative:
                trials[set_index].speculative.append(speculative_row)

    costs = engine.forward_costs(_cost_context(encoded, trials), settings.cost_repeats) if speculative else None
    greedy_with_drafter = speculative and settings.temperature == 0
    per_set = [
        summarize(s.name, s.digest, t, costs, set_lossless[i] if greedy_with_drafter else None)
        for i, (s, t) in enumerate(zip(prompt_sets, trials, strict=True))
    ]
    combined = _Trials(
        baseline=[[g for t in trials for g in t.baseline[r]] for r in range(settings.repeats)],
        speculative=[[g for t in trials for g in t.speculative[r]] for r in range(settings.repeats)]
        if speculative else [],
    )
    sets_digest = hashlib.sha256("\n".join(s.digest for s in prompt_sets).encode()).hexdigest()
    lossless = all(set_lossless) if greedy_with_drafter else None
    overall = summarize("overall", sets_digest, combined, costs, lossless)
    report = engine.report()
    provenance = {
        **common_provenance(engine, prompt_sets, sets_digest, settings, target_dir, drafter),
        **report.provenance,
    }
    return PairRun(
        method=engine.method,
        overall=overall,
        per_set=per_set,
        lossless=lossless,
        first_divergence=divergence,
        peak_memory_bytes=report.peak_memory_bytes,
        peak_memory_kind=report.peak_memory_kind,
        target_weight_bytes=report.target_weight_bytes,
        drafter_weight_bytes=report.drafter_weight_bytes,
        provenance=provenance,
        settings=settings,
        draft_length=engine.draft_length,
        forward_costs=costs,
        generations={
            f"{s.name}/{i}": list(g.tokens)
            for s, t in zip(prompt_sets, trials, strict=True)
            for i, g in enumerate((t.speculative or t.baseline)[-1])
        },
    )


def _cost_context(encoded: list[list[list[int]]], trials: list[_Trials]) -> list[int]:
    """Real tokens at the run's typical decode context: the mean prompt plus half the mean generated length (the
    mean context over a decode), taken from a real prompt and its baseline output, repeated if too short."""
    prompts = [ids for prompt_set in encoded for ids in prompt_set]
    generated = [len(g.tokens) for t in trials for g in t.baseline[-1]]
    length = round(statistics.mean(len(p) for p in prompts) + statistics.mean(generated) / 2)
    longest = max(range(len(prompts)), key=lambda i: len(prompts[i]))
    outputs = [g.tokens for t in trials for g in t.baseline[-1]]
    sequence = [*prompts[longest], *outputs[longest]]
    while len(sequence) < length:
        sequence += sequence
    return sequence[: max(length, 2)]


def summarize(name: str, digest: str, trials: _Trials, costs: ForwardCosts | None,
              lossless: bool | None) -> SetResult:
    """One SetResult from [repeat][prompt] decodes; speed spreads are over repeats."""
    baseline_runs = [throughput(row) for row in trials.baseline]
    result = SetResult(
        name=name,
        prompts=len(trials.baseline[0]),
        digest=digest,
        baseline=throughput([g for row in trials.baseline for g in row]),
        baseline_tokens_per_s=spread([r.tokens_per_s for r in baseline_runs]),
    )
    if not trials.speculative:
        return result
    speculative_runs = [throughput(row) for row in trials.speculative]
    pairs = list(zip(speculative_runs, baseline_runs, strict=True))
    decode_speedups = [d for d in (decode_speedup(s, b) for s, b in pairs) if d is not None]
    generations = [g for row in trials.speculative for g in row]
    rounds = [r for g in generations for r in g.rounds]
    counts = StepCounts.total([g.counts for g in generations])
    # Engines that see every round (PyTorch) give the full histogram; the others their counters.
    measured = acceptance(rounds) if rounds else counts_acceptance(counts)
    tau_emitted = counts.tau_emitted
    ideal = None
    if costs is not None and tau_emitted is not None:
        # The decode-only speedup counts emitted tokens, so the ideal does too (τ also counts drafts accepted past
        # EOS or max_new_tokens in a final round, which are never output).
        ideal = ideal_speedup(tau_emitted, costs.target_step_s, costs.verify_step_s, costs.draft_step_s)
    decode_spread = spread(decode_speedups) if decode_speedups else None
    return replace(
        result,
        speculative=throughput(generations),
        tokens_per_s=spread([r.tokens_per_s for r in speculative_runs]),
        speedup=spread([speedup(s.tokens_per_s, b.tokens_per_s) for s, b in pairs]),
        decode_speedup=decode_spread,
        acceptance=measured,
        tau_emitted=tau_emitted,
        ideal_speedup=ideal,
        efficiency=decode_spread.median / ideal if ideal and decode_spread else None,
        lossless=lossless,
    )


def common_provenance(engine: Engine, prompt_sets: Sequence[PromptSet], sets_digest: str, settings: RunSettings,
                      target_dir: Path | None, drafter: Path | None) -> dict[str, Any]:
    """What both engines record the same way."""
    drafter_dir = drafter if drafter is not None and drafter.is_dir() else None
    return {
        "metric_version": METRIC_VERSION,
        "verifier_version": package_version(),
        "verifier_git_sha": git_sha(),
        "prompt_sets": {s.name: s.digest for s in prompt_sets},
        "prompt_sets_digest": sets_digest,
        "method": engine.method,
        "draft_length": engine.draft_length,
        "temperature": settings.temperature,
        "seed": settings.seed,
        "seed_scheme": "sha256(seed/repeat/set/prompt) >> 33",
        "max_new_tokens": settings.max_new_tokens,
        "repeats": settings.repeats,
        "warmup": settings.warmup,
        "dtype": settings.dtype,
        "target_tokenizer_digest": tokenizer_digest(target_dir) if target_dir is not None else None,
        "drafter_tokenizer_digest": tokenizer_digest(drafter_dir) if drafter_dir is not None else None,
        "target_generation_config_digest": file_digest(target_dir, "generation_config.json") if target_dir else None,
        "drafter_generation_config_digest": (
            file_digest(drafter_dir, "generation_config.json") if drafter_dir is not None else None
        ),
    }


def tokenizer_digest(folder: Path) -> str | None:
    from registry.domain.configs import tokenizer_digest as digest

    files = {name: (folder / name).read_bytes() for name in TOKENIZER_FILE_NAMES if (folder / name).is_file()}
    return digest(files) if files else None


def file_digest(folder: Path, name: str) -> str | None:
    path = folder / name
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def package_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("drafter-registry")
    except PackageNotFoundError:
        return None


def git_sha() -> str | None:
    """The commit of the verifier's checkout (with "-dirty" when it has local changes); None when installed."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha or None
