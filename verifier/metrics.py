"""Speculative-decoding metrics: pure functions over per-round records (no I/O, no torch).

Definitions (see /work/shared/reference/specdec.md §4):
- τ (mean acceptance length) = tokens committed per target step including the bonus, pooled over all steps
  = mean(accepted + 1); plain decoding gives exactly 1.
- acceptance rate = accepted drafts / drafted tokens.
- marginal m_i = rounds whose first i drafts were all accepted / rounds that drafted at least i tokens;
  conditional c_i = P(draft i accepted | drafts 1..i-1 accepted, round drafted >= i).
  τ = 1 + Σ m_i holds exactly when every round drafts the same k; `Acceptance.identity_gap` records the check.
- speedup = speculative tok/s ÷ baseline tok/s (same prompts, same token accounting).
- ideal speedup S = τ · T_t(1) / (T_draft + T_verify) from measured per-round costs; efficiency = realized ÷ ideal.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RoundRecord:
    drafted: int  # k proposed this round
    accepted: int  # drafts accepted by the target (before any end-of-generation trim)
    emitted: int  # tokens actually added to the output this round (accepted + 1, less if trimmed at the end)
    draft_seconds: float
    verify_seconds: float  # target forward + accept/reject + cache crop


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
    uniform_draft_length: bool  # every round drafted the same k: the identity below is exact
    identity_gap: float  # τ - (1 + Σ m_i)


def acceptance(rounds: Sequence[RoundRecord]) -> Acceptance:
    if not rounds:
        raise ValueError("no rounds to measure")
    max_k = max(r.drafted for r in rounds)
    histogram = [0] * (max_k + 1)
    for r in rounds:
        if not 0 <= r.accepted <= r.drafted:
            raise ValueError(f"a round accepted {r.accepted} of {r.drafted} drafts")
        histogram[r.accepted] += 1
    marginal: list[float] = []
    conditional: list[float | None] = []
    for i in range(1, max_k + 1):
        offered = [r for r in rounds if r.drafted >= i]
        reached = sum(1 for r in offered if r.accepted >= i - 1)
        passed = sum(1 for r in offered if r.accepted >= i)
        marginal.append(passed / len(offered))
        conditional.append(passed / reached if reached else None)
    drafted = sum(r.drafted for r in rounds)
    accepted = sum(r.accepted for r in rounds)
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


def ideal_speedup(tau: float, baseline_step_seconds: float, draft_seconds: float, verify_seconds: float) -> float:
    """S = τ · T_t(1) / (T_draft + T_verify): what the measured tokens per target step and per-round costs allow,
    without overheads. Pass tokens emitted per step when comparing with a realized speedup."""
    if draft_seconds + verify_seconds <= 0:
        raise ValueError("per-round draft + verify time must be positive")
    return tau * baseline_step_seconds / (draft_seconds + verify_seconds)


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
