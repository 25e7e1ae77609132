"""The one measuring loop for every engine (PyTorch and llama.cpp).

The harness owns what must mean the same in both engines: the repeats × prompt sets loop (baseline and speculative
interleaved per prompt, so drift in machine load hits both alike), the seed of every decode, the lossless check and
the summaries. An engine only generates (one prompt → tokens, step counts, timings), measures its bare forward costs
when it can, and describes itself (`verifier.harness.contract.Engine`). One result type, `registry.domain.run.Run`,
flows from here to storage (the runner names the pair: `verifier.harness.record`) and the CLI. Metric definitions
live in `verifier.metrics`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import statistics
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from registry.domain.measurement import METRIC_VERSION, TIE, Divergence, RunSettings, SetMeasurement
from registry.domain.run import Run
from verifier.harness.contract import Engine, Generation, Progress
from verifier.harness.pair_check import CheckedPair, check_pair
from verifier.harness.provenance import common_provenance, machine_load
from verifier.metrics import (
    ForwardCosts,
    StepCounts,
    acceptance,
    counts_acceptance,
    decode_speedup,
    ideal_speedup,
    speedup,
    spread,
    throughput,
)
from verifier.prompts import PromptSet

log = logging.getLogger(__name__)


@dataclass
class _Trials:
    """Decodes of one prompt set: [repeat][prompt]."""

    baseline: list[list[Generation]] = field(default_factory=list)
    speculative: list[list[Generation]] = field(default_factory=list)


def decode_seed(seed: int, repeat: int, set_index: int, prompt_index: int) -> int:
    """The seed of one decode, the same in every engine (31 bits: llama-server takes a uint32)."""
    material = f"{seed}/{repeat}/{set_index}/{prompt_index}".encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big") >> 33


class EngineLoader(Protocol):
    """An engine loaded from a checked pair, for as long as the context lasts (llama.cpp's servers run inside it)."""

    def __call__(self, checked: CheckedPair, settings: RunSettings) -> AbstractContextManager[Engine]: ...


def measure_pair(load: EngineLoader, target_dir: Path, drafter: Path | None, prompt_sets: Sequence[PromptSet],
                 settings: RunSettings, progress: Progress | None = None) -> Run:
    """Measure the pair of folders (`drafter` None: the target alone) in the engine `load` gives: refused before
    it loads anything when the pair is incompatible (`check_pair`), and measured under the settings as the engine
    runs them."""
    _refuse_empty(prompt_sets)  # before anything is read or loaded
    checked = check_pair(Path(target_dir), drafter, settings.method)
    with load(checked, settings) as engine:
        return run(engine, prompt_sets, engine.settings, progress, target_dir=Path(target_dir),
                   drafter=checked.drafter_path)


def run(engine: Engine, prompt_sets: Sequence[PromptSet], settings: RunSettings,
        progress: Progress | None = None, *, target_dir: Path | None = None, drafter: Path | None = None) -> Run:
    """Measure `engine`'s pair (or its target alone) on `prompt_sets`."""
    _refuse_empty(prompt_sets)
    speculative = engine.method is not None
    encoded = [[engine.encode(p) for p in s.prompts] for s in prompt_sets]
    load_before = os.getloadavg()[0]

    for _ in range(settings.warmup):
        engine.generate(encoded[0][0], speculative=False, seed=settings.seed)
        if speculative:
            engine.generate(encoded[0][0], speculative=True, seed=settings.seed)
    engine.reset_peak_memory()

    trials = [_Trials() for _ in prompt_sets]
    # Greedy decodes whose output differs from the baseline's: judged after the measurement (a re-score must not
    # count in its peak memory): (set index, prompt, baseline, speculative, set name, prompt index, repeat).
    differing: list[tuple[int, list[int], tuple[int, ...], tuple[int, ...], str, int, int]] = []
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
                        differing.append((set_index, prompt, base, spec, prompt_set.name, prompt_index, repeat))
            trials[set_index].baseline.append(baseline_row)
            if speculative:
                trials[set_index].speculative.append(speculative_row)

    costs = engine.forward_costs(_cost_context(encoded, trials), settings.cost_repeats) if speculative else None
    report = engine.report()
    judged = [(d[0], engine.divergence(*d[1:])) for d in differing]
    set_lossless = [all(_is_tie(found) for index, found in judged if index == i) for i in range(len(prompt_sets))]
    divergence = next((found for _, found in judged if not _is_tie(found)), None) or next(
        (found for _, found in judged), None)
    ties = sum(1 for _, found in judged if _is_tie(found))
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
    provenance = {
        **common_provenance(engine, prompt_sets, sets_digest, settings, target_dir, drafter),
        **report.provenance,
        "machine_load": machine_load(load_before),
    }
    if provenance["machine_load"]["contended"]:
        log.warning("measured on a busy machine (load %s on %d CPUs): tok/s and speedup are unreliable, τ is not",
                    provenance["machine_load"]["load_average"], provenance["machine_load"]["cpus"])
    return Run(
        target=str(target_dir) if target_dir is not None else "",
        drafter=str(drafter) if speculative and drafter is not None else None,
        engine=engine.name,
        engine_version=provenance.get("engine_version"),
        method=engine.method,
        draft_length=engine.draft_length,
        settings=settings,
        overall=overall,
        per_set=tuple(per_set),
        lossless=lossless,
        first_divergence=divergence,
        ties=ties if greedy_with_drafter else None,
        peak_memory_bytes=report.peak_memory_bytes,
        peak_memory_kind=report.peak_memory_kind,
        target_weight_bytes=report.target_weight_bytes,
        drafter_weight_bytes=report.drafter_weight_bytes,
        forward_costs=costs,
        metric_version=METRIC_VERSION,
        hardware=str(provenance.get("device") or "unknown"),
        device_name=provenance.get("device"),
        torch_version=provenance.get("torch_version"),
        transformers_version=provenance.get("transformers_version"),
        target_revision=provenance.get("target_sha") or provenance.get("target_files_digest"),
        drafter_revision=(provenance.get("drafter_sha") or provenance.get("drafter_files_digest")) if speculative
        else None,
        provenance=provenance,
        generations={
            f"{s.name}/{i}": list(g.tokens)
            for s, t in zip(prompt_sets, trials, strict=True)
            for i, g in enumerate((t.speculative or t.baseline)[-1])
        },
    )


def _refuse_empty(prompt_sets: Sequence[PromptSet]) -> None:
    if not prompt_sets or any(not s.prompts for s in prompt_sets):
        raise ValueError("a run needs at least one non-empty prompt set")


def _is_tie(divergence: Divergence | None) -> bool:
    """A decode that left the baseline only where the run's dtype ties the two tokens (an unjudged one did not)."""
    return divergence is not None and divergence.verdict == TIE


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
              lossless: bool | None) -> SetMeasurement:
    """One SetMeasurement from [repeat][prompt] decodes; speed spreads are over repeats."""
    baseline_runs = [throughput(row) for row in trials.baseline]
    result = SetMeasurement(
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
    per_prompt = [tau for g in generations if (tau := g.counts.tau) is not None]
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
        tau_verified=counts.tau_verified,
        tau_per_prompt=statistics.mean(per_prompt) if per_prompt else None,
        ideal_speedup=ideal,
        efficiency=decode_spread.median / ideal if ideal and decode_spread else None,
        lossless=lossless,
    )
