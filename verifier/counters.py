"""Speculative-decoding counters as inference servers expose them (pure): Prometheus text parsed into samples, the
spec counters of llama.cpp and vLLM, and τ / acceptance computed from them.

Counter semantics (llama.cpp and vLLM agree): `drafts` = verification steps, `draft_tokens` = drafted tokens,
`accepted` = accepted drafts, `accepted_per_position[i]` = steps whose draft i + 1 was accepted (drafts are
accepted as a prefix, so it also counts the steps that accepted more than i).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from registry.errors import UserError
from verifier.metrics import Acceptance, step_acceptance


LLAMACPP_PREFIX = "llamacpp:"
VLLM_PREFIX = "vllm:"

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_LABEL_ESCAPE = re.compile(r"\\(.)")
_LABEL_ESCAPES = {"n": "\n"}  # Prometheus escapes only backslash, double quote and newline in label values


class ServerReadError(UserError, ValueError):
    """A server's answer could not be read as speculative-decoding counters; the message says what is missing."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def parse_prometheus(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition; a malformed line is an error naming its number."""
    samples = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ServerReadError(f"metrics line {number} is not a Prometheus sample: {line[:120]!r}")
        name, label_text, value_text = match.groups()
        try:
            value = float(value_text)
        except ValueError:
            raise ServerReadError(f"metrics line {number}: {value_text!r} is not a number") from None
        samples.append(Sample(name=name, labels=_parse_labels(label_text or "", number), value=value))
    return samples


def _parse_labels(text: str, number: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    text, position = text.strip(), 0
    while position < len(text):
        match = _LABEL.match(text, position)
        if match is None:
            raise ServerReadError(f"metrics line {number}: malformed labels {{{text[:120]}}}")
        labels[match.group(1)] = _LABEL_ESCAPE.sub(lambda m: _LABEL_ESCAPES.get(m.group(1), m.group(1)), match.group(2))
        position = match.end()
    return labels


@dataclass(frozen=True)
class SpecCounters:
    drafts: int
    draft_tokens: int
    accepted: int
    accepted_per_position: tuple[int, ...] = ()

    def minus(self, earlier: SpecCounters) -> SpecCounters:
        """What happened between `earlier` and this reading of the same server."""
        positions = max(len(self.accepted_per_position), len(earlier.accepted_per_position))
        mine = _padded(self.accepted_per_position, positions)
        theirs = _padded(earlier.accepted_per_position, positions)
        return SpecCounters(
            drafts=self.drafts - earlier.drafts,
            draft_tokens=self.draft_tokens - earlier.draft_tokens,
            accepted=self.accepted - earlier.accepted,
            accepted_per_position=tuple(a - b for a, b in zip(mine, theirs, strict=True)),
        )

    def plus(self, other: SpecCounters) -> SpecCounters:
        positions = max(len(self.accepted_per_position), len(other.accepted_per_position))
        return SpecCounters(
            drafts=self.drafts + other.drafts,
            draft_tokens=self.draft_tokens + other.draft_tokens,
            accepted=self.accepted + other.accepted,
            accepted_per_position=tuple(
                a + b
                for a, b in zip(
                    _padded(self.accepted_per_position, positions),
                    _padded(other.accepted_per_position, positions),
                    strict=True,
                )
            ),
        )


NO_COUNTS = SpecCounters(drafts=0, draft_tokens=0, accepted=0)


def _padded(values: tuple[int, ...], length: int) -> tuple[int, ...]:
    return values + (0,) * (length - len(values))


def counter_total(samples: Iterable[Sample], name: str) -> float | None:
    """The sum of a counter over its label sets (vLLM reports one per engine), with or without `_total`."""
    values = [s.value for s in samples if s.name in (name, f"{name}_total")]
    return sum(values) if values else None


def spec_counters(samples: list[Sample], prefix: str) -> SpecCounters | None:
    """llama.cpp's (`llamacpp:`) or vLLM's (`vllm:`) speculative counters; None when the server drafts nothing."""
    drafts = counter_total(samples, f"{prefix}spec_decode_num_drafts")
    if drafts is None:
        return None
    draft_tokens = counter_total(samples, f"{prefix}spec_decode_num_draft_tokens")
    accepted = counter_total(samples, f"{prefix}spec_decode_num_accepted_tokens")
    if draft_tokens is None or accepted is None:
        raise ServerReadError(f"{prefix}spec_decode_num_drafts is there but the drafted or accepted counter is not")
    per_position: dict[int, float] = {}
    for sample in samples:
        if sample.name in (f"{prefix}spec_decode_num_accepted_tokens_per_pos",
                           f"{prefix}spec_decode_num_accepted_tokens_per_pos_total"):
            try:
                position = int(sample.labels["position"])
            except (KeyError, ValueError):
                raise ServerReadError(f"{sample.name} has no integer 'position' label") from None
            per_position[position] = per_position.get(position, 0.0) + sample.value
    return SpecCounters(
        drafts=int(drafts),
        draft_tokens=int(draft_tokens),
        accepted=int(accepted),
        accepted_per_position=tuple(int(per_position.get(i, 0.0)) for i in range(max(per_position, default=-1) + 1)),
    )


def counter_acceptance(counters: SpecCounters) -> Acceptance | None:
    """τ, acceptance rate and per-position acceptance from a server's counters, by the verifier's one definition
    (`verifier.metrics.step_acceptance`) over the server's verification steps; None when nothing was verified.

    The counters count drafting steps only, so marginal m_i is over all the steps they count; it equals the
    verifier's definition when every step drafted at least i tokens (`uniform_draft_length` says whether they did).
    """
    if counters.drafts <= 0:
        return None
    reached = (counters.drafts, *counters.accepted_per_position)  # reached[i] = steps that accepted at least i drafts
    if any(later > earlier for earlier, later in zip(reached, reached[1:], strict=False)) or reached[-1] < 0:
        raise ServerReadError(f"per-position acceptance counters {list(counters.accepted_per_position)} are not "
                              f"non-increasing within {counters.drafts} steps")
    return step_acceptance(steps=counters.drafts, drafting_steps=counters.drafts, drafted=counters.draft_tokens,
                           accepted=counters.accepted, accepted_per_position=counters.accepted_per_position)
