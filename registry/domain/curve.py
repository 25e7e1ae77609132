"""A speedup curve (pure): what a drafter gives at each concurrency on a server a user runs, and where it stops paying.

Speculative decoding trades spare compute for fewer target passes; a batch of concurrent requests uses up that
spare compute, so the gain falls with concurrency and can fall below 1× (a slowdown). One sweep measures the
speculative server and a baseline server (same target, no drafter) under the same closed-loop load at each level;
the curve is one series with its conditions, and its crossover is the first level where the drafter costs more than
it gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# At or below this the drafter costs at least what it gives.
BREAK_EVEN = 1.0


@dataclass(frozen=True)
class CurvePoint:
    """One concurrency level: output tokens per second of all clients together, with and without the drafter."""

    concurrency: int
    requests: int
    output_tokens: int
    seconds: float
    tokens_per_s: float
    baseline_tokens_per_s: float
    # Request latency per output token (prefill included: the servers are read without streaming), median.
    latency_per_token_s: float
    baseline_latency_per_token_s: float
    tau: float | None  # from the speculative server's counters over this level; None when it counts no drafts
    drafts: int | None
    # Each request's own draft counts summed, as the slot that served it answered them (llama.cpp `timings`), beside
    # the server-wide counters τ is read from; None where the engine reports none per request.
    request_drafted: int | None = None
    request_accepted: int | None = None

    @property
    def speedup(self) -> float:
        return self.tokens_per_s / self.baseline_tokens_per_s


@dataclass(frozen=True)
class SweepConditions:
    max_new_tokens: int
    temperature: float
    prompt_set: str
    prompt_digest: str
    requests_per_level: int
    url: str  # the speculative server, without credentials
    baseline_url: str
    # "raw": each prompt sent as text through the engine's completion route (no chat template); "chat": as a
    # conversation through its chat route, rendered by the served chat template.
    prompt_format: str = "raw"
    # Thinking on or off, only where the served template was seen to read `enable_thinking` (the same prompt
    # renders to a different number of tokens with it on and off); None: unknown or not applicable, said in
    # thinking_note. Never the switch as asked for when the template ignores it.
    thinking: bool | None = None
    thinking_note: str | None = None


@dataclass(frozen=True)
class SpeedupCurve:
    target: str
    drafter: str | None
    engine: str
    engine_version: str | None
    hardware: str | None
    conditions: SweepConditions
    points: tuple[CurvePoint, ...]
    provenance: dict[str, Any] = field(default_factory=dict)
    job_id: int | None = None  # the verifier's curve job that measured it; None: a `drafters sweep`
    curve_id: int | None = None
    created_at: datetime | None = None

    @property
    def crossover(self) -> int | None:
        return crossover(self.points)

    @property
    def pays_up_to(self) -> int | None:
        return pays_up_to(self.points)


def crossover(points: Sequence[CurvePoint]) -> int | None:
    """The lowest measured concurrency at which the drafter no longer pays (speedup ≤ 1); None when it pays at
    every level measured (the crossover, if any, lies beyond the sweep)."""
    for point in sorted(points, key=lambda p: p.concurrency):
        if point.speedup <= BREAK_EVEN:
            return point.concurrency
    return None


def pays_up_to(points: Sequence[CurvePoint]) -> int | None:
    """The highest measured concurrency below the crossover; None when it does not pay even at the lowest level."""
    limit = crossover(points)
    return max((p.concurrency for p in points if limit is None or p.concurrency < limit), default=None)


def describe(curve: SpeedupCurve) -> str:
    """'pays up to c≈8 on RTX 3060 (llama.cpp b11434)', or why not, for find/launch and the dashboard."""
    where = f"on {curve.hardware or 'unnamed hardware'} ({curve.engine} {curve.engine_version or ''})".replace(" )", ")")
    highest = max(p.concurrency for p in curve.points)
    if curve.crossover is None:
        return f"pays at every measured concurrency up to c={highest} {where}"
    if curve.pays_up_to is None:
        return f"does not pay even at c={min(p.concurrency for p in curve.points)} {where}"
    return f"pays up to c≈{curve.pays_up_to} {where}; from c={curve.crossover} it is a slowdown"
