"""Speculative-decoding metrics: pure functions over per-round records and step counts (no I/O, no torch).

The one place the definitions live; both engines (PyTorch, llama.cpp) report against them (docs/metrics.md sets
them beside the references' own, with sources). METRIC_VERSION 3:
- verification step: one target forward after the first token (a plain decode step counts too: it verifies no
  drafts). The first token comes from the prefill and is no step.
- τ (mean acceptance length) = 1 + accepted drafts / verification steps, pooled over every step of every prompt.
  Accepted drafts are counted as output (a final step trimmed at EOS or max_new_tokens counts only the drafts it
  kept), the way llama-server counts `timings.draft_n_accepted`, so both engines count alike. Plain decoding gives
  exactly 1. llama.cpp: steps = its drafting steps (`/metrics` spec_decode_num_drafts) plus plain steps (emitted −
  accepted − drafting steps, when positive).
- τ_verified = 1 + drafts the target accepted / steps, past the end of the output included: how z-lab's benchmark
  counts (its acceptance length is accepted + 1 per verify pass); PyTorch only (llama-server does not report it).
- τ per prompt = the mean over prompts of each prompt's τ: how z-lab's benchmark averages ("Average Acceptance
  length"); the pooled τ weighs long outputs more.
- τ_emitted = tokens output after the first / verification steps: what the decode actually gained per target step.
- acceptance rate = accepted drafts / drafted tokens.
- marginal m_i = steps whose first i drafts were all accepted / steps that drafted at least i tokens;
  conditional c_i = P(draft i accepted | drafts 1..i-1 accepted, step drafted >= i).
  τ = 1 + Σ m_i holds exactly when every step drafts the same k; `Acceptance.identity_gap` records the check.
- speedup = speculative tok/s ÷ baseline tok/s (same prompts, same token accounting, prefill included);
  decode speedup = baseline time per output token after the first ÷ speculative time per such token (TTFT out).
- forward costs, measured outside the decode loop at the run's context length after a warm-up (synchronised on
  CUDA), the fastest of several repeats: T(1) = target forward on 1 token, T(γ+1) = target forward on γ+1 tokens,
  T_draft = one drafting step (one block forward for DFlash, γ draft-model steps for a draft LM).
- ideal speedup S = τ_emitted · T(1) / (T(γ+1) + T_draft); efficiency = decode speedup ÷ S. The loop's overheads
  (and anything slowing a drafter inside the loop) lower the efficiency; nothing in it is measured by the loop.
  Runs stored before version 2 built S from the loop's own rounds (efficiency ≈ 1 by construction); version 2
  counted drafts accepted past the end in τ (PyTorch only), version 3 counts output drafts in both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from registry.domain.measurement import (
    METRIC_VERSION,
    Acceptance,
    ForwardCosts,
    Spread,
    Throughput,
    spread,
)
from registry.domain.run import Run

__all__ = ["METRIC_VERSION", "Acceptance", "ForwardCosts", "RoundRecord", "Spread", "StepCounts", "Throughput",
           "acceptance", "counts_acceptance", "decode_speedup", "ideal_speedup", "recompute_efficiency", "speedup",
           "spread", "step_acceptance", "throughput"]


@dataclass(frozen=True)
class RoundRecord:
    drafted: int  # k proposed this round
    accepted: int  # drafts accepted by the target (before any end-of-generation trim)
    emitted: int  # tokens actually added to the output this round (accepted + 1, less if trimmed at the end)
    draft_seconds: float
    verify_seconds: float  # target forward + accept/reject + cache crop

    @property
    def accepted_output(self) -> int:
        """Accepted drafts that were output: all of them, unless the round was trimmed at EOS or max_new_tokens."""
        return min(self.accepted, self.emitted)


class Generation(Protocol):
    """One prompt's decode (`verifier.decode.DecodeResult` satisfies it)."""

    @property
    def tokens(self) -> Sequence[int]: ...
    @property
    def prefill_seconds(self) -> float: ...
    @property
    def total_seconds(self) -> float: ...
    @property
    def rounds(self) -> Sequence[RoundRecord]: ...


def acceptance(rounds: Sequence[RoundRecord]) -> Acceptance:
    if not rounds:
        raise ValueError("no rounds to measure")
    max_k = max(r.drafted for r in rounds)
    histogram = [0] * (max_k + 1)
    for r in rounds:
        if not 0 <= r.accepted <= r.drafted:
            raise ValueError(f"a round accepted {r.accepted} of {r.drafted} drafts")
        histogram[r.accepted_output] += 1
    marginal: list[float] = []
    conditional: list[float | None] = []
    for i in range(1, max_k + 1):
        offered = [r for r in rounds if r.drafted >= i]
        reached = sum(1 for r in offered if r.accepted_output >= i - 1)
        passed = sum(1 for r in offered if r.accepted_output >= i)
        marginal.append(passed / len(offered))
        conditional.append(passed / reached if reached else None)
    drafted = sum(r.drafted for r in rounds)
    accepted = sum(r.accepted_output for r in rounds)
    tau = 1.0 + accepted / len(rounds)
    return Acceptance(
        rounds=len(rounds),
        drafted=drafted,
        accepted=accepted,
        tau=tau,
        acceptance_rate=accepted / drafted if drafted else None,
        histogram=tuple(histogram),
        marginal=tuple(marginal),
        conditional=tuple(conditional),
        uniform_draft_length=len({r.drafted for r in rounds}) == 1,
        identity_gap=tau - (1.0 + sum(marginal)),
    )


def throughput(generations: Sequence[Generation]) -> Throughput:
    if not generations:
        raise ValueError("no generations to measure")
    tokens = sum(len(g.tokens) for g in generations)
    seconds = sum(g.total_seconds for g in generations)
    later_tokens = sum(len(g.tokens) - 1 for g in generations)
    later_seconds = sum(g.total_seconds - g.prefill_seconds for g in generations)
    rounds = [r for g in generations for r in g.rounds]
    draft_seconds = sum(r.draft_seconds for r in rounds)
    verify_seconds = sum(r.verify_seconds for r in rounds)
    steps = len(rounds)
    return Throughput(
        prompts=len(generations),
        output_tokens=tokens,
        seconds=seconds,
        tokens_per_s=tokens / seconds if seconds > 0 else 0.0,
        ttft_s=sum(g.prefill_seconds for g in generations) / len(generations),
        tpot_s=later_seconds / later_tokens if later_tokens else None,
        target_steps=steps,
        draft_seconds_per_step=draft_seconds / steps if steps else 0.0,
        verify_seconds_per_step=verify_seconds / steps if steps else 0.0,
        draft_time_share=draft_seconds / (draft_seconds + verify_seconds) if draft_seconds + verify_seconds else 0.0,
    )


def speedup(speculative_tokens_per_s: float, baseline_tokens_per_s: float) -> float:
    if baseline_tokens_per_s <= 0:
        raise ValueError("baseline throughput must be positive")
    return speculative_tokens_per_s / baseline_tokens_per_s


def ideal_speedup(tau: float, target_step_s: float, verify_step_s: float, draft_step_s: float) -> float:
    """S = τ · T(1) / (T(γ+1) + T_draft) from bare forward costs. Pass τ_emitted when comparing with a realized
    (decode-only) speedup, which counts emitted tokens."""
    if verify_step_s + draft_step_s <= 0:
        raise ValueError("verify + draft step time must be positive")
    return tau * target_step_s / (verify_step_s + draft_step_s)


def decode_speedup(speculative: Throughput, baseline: Throughput) -> float | None:
    """Baseline time per output token after the first ÷ speculative time per such token; None when either side
    made no token after its first."""
    if speculative.tpot_s is None or baseline.tpot_s is None or speculative.tpot_s <= 0:
        return None
    return baseline.tpot_s / speculative.tpot_s


def recompute_efficiency(run: Run) -> float | None:
    """A stored (version 2) run's efficiency from its stored forward costs, τ_emitted and decode speedup."""
    if run.forward_costs is None or run.tau_emitted is None or run.decode_speedup is None:
        return None
    costs = run.forward_costs
    return run.decode_speedup / ideal_speedup(run.tau_emitted, costs.target_step_s, costs.verify_step_s,
                                              costs.draft_step_s)


@dataclass(frozen=True)
class StepCounts:
    """Token accounting of decodes after the first token, the same in every engine (definitions above)."""

    steps: int  # verification steps
    drafting_steps: int  # steps that verified at least one draft
    drafted: int
    accepted: int  # accepted drafts that were output (as llama-server's draft_n_accepted counts them)
    emitted: int  # tokens output after the first
    accepted_per_position: tuple[int, ...] = ()  # [i] = drafting steps that accepted at least i + 1 drafts
    # Drafts the target accepted, past the end of the output included (what z-lab's benchmark counts); None where
    # the engine does not see it (llama-server).
    verified_accepted: int | None = None

    @property
    def tau(self) -> float | None:
        return 1.0 + self.accepted / self.steps if self.steps else None

    @property
    def tau_verified(self) -> float | None:
        return 1.0 + self.verified_accepted / self.steps if self.steps and self.verified_accepted is not None \
            else None

    @property
    def tau_emitted(self) -> float | None:
        return self.emitted / self.steps if self.steps else None

    @classmethod
    def from_rounds(cls, rounds: Sequence[RoundRecord]) -> StepCounts:
        longest = max((r.drafted for r in rounds), default=0)
        return cls(
            steps=len(rounds),
            drafting_steps=sum(1 for r in rounds if r.drafted > 0),
            drafted=sum(r.drafted for r in rounds),
            accepted=sum(r.accepted_output for r in rounds),
            emitted=sum(r.emitted for r in rounds),
            accepted_per_position=tuple(sum(1 for r in rounds if r.accepted_output > i) for i in range(longest)),
            verified_accepted=sum(r.accepted for r in rounds),
        )

    @classmethod
    def total(cls, counts: Sequence[StepCounts]) -> StepCounts:
        positions = max((len(c.accepted_per_position) for c in counts), default=0)
        return cls(
            steps=sum(c.steps for c in counts),
            drafting_steps=sum(c.drafting_steps for c in counts),
            drafted=sum(c.drafted for c in counts),
            accepted=sum(c.accepted for c in counts),
            emitted=sum(c.emitted for c in counts),
            accepted_per_position=tuple(
                sum(c.accepted_per_position[i] for c in counts if i < len(c.accepted_per_position))
                for i in range(positions)
            ),
            verified_accepted=None if any(c.verified_accepted is None for c in counts)
            else sum(c.verified_accepted or 0 for c in counts),
        )


def counts_acceptance(counts: StepCounts) -> Acceptance | None:
    """Acceptance from step counts alone (an engine that reports counters, not rounds); None without steps."""
    return step_acceptance(steps=counts.steps, drafting_steps=counts.drafting_steps, drafted=counts.drafted,
                           accepted=counts.accepted, accepted_per_position=counts.accepted_per_position)


def step_acceptance(*, steps: int, drafting_steps: int, drafted: int, accepted: int,
                    accepted_per_position: Sequence[int] = ()) -> Acceptance | None:
    """The one definition of acceptance from counts (no rounds); None without steps.

    τ is over all verification steps; marginal acceptance is over drafting steps (how llama.cpp and vLLM report it);
    accepted_per_position[i] = drafting steps that accepted at least i + 1 drafts. A server's counters
    (`verifier.counters`) count drafting steps only: steps = drafting_steps there. Without per-position counts the
    histogram is unknown: empty, not every step at 0.
    """
    if steps <= 0:
        return None
    per_position = tuple(accepted_per_position)
    drafting = max(drafting_steps, 1)
    reached = (steps, *per_position)  # a plain step accepted 0 drafts
    histogram = (
        tuple(reached[n] - reached[n + 1] for n in range(len(reached) - 1)) + (reached[-1],)
        if per_position else ()
    )
    marginal = tuple(count / drafting for count in per_position)
    offered = (drafting_steps, *per_position)
    conditional = tuple((count / offered[i] if offered[i] else None) for i, count in enumerate(per_position))
    tau = 1.0 + accepted / steps
    return Acceptance(
        rounds=steps,
        drafted=drafted,
        accepted=accepted,
        tau=tau,
        acceptance_rate=accepted / drafted if drafted else None,
        histogram=histogram,
        marginal=marginal,
        conditional=conditional,
        uniform_draft_length=bool(marginal) and drafted == steps * len(marginal),
        identity_gap=tau - (1.0 + sum(marginal)),
    )
