"""Which drafter to use for a target on a hardware class (and engine): the launchable pairs ranked, each with why.

Measured speedup of runs of the pair on the asked hardware class (and engine, when one is asked) first; else a
published τ, labelled "published, not measured" with its source and setting; else the rule below. `find`, the
API (`/v1/targets/{id}/drafters`, `/v1/targets/{id}/recommendation`), the dashboard and `drafters launch` without
`--drafter` all read this one order. Reads only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from registry.calibration import published_acceptance
from registry.calibration.launch_inputs import STORED_ENGINE, real_target_run, same_hardware
from registry.domain.gpus import Gpu
from registry.domain.launch import PairFacts
from registry.domain.records import DrafterRecord
from registry.domain.run import Run

MEASURED, PUBLISHED = "measured", "published"

# With nothing measured or published: drafters built into the checkpoint (trained with it, nothing to download),
# then block drafters (a whole block per draft forward), EAGLE-3 heads, assistants and MTP heads (one token per
# forward, on the target's states), DFlash 2 (llama.cpp only), and last a separate draft LM (no target states).
RULE_ORDER: dict[str, int] = {"dflash": 1, "dspark": 1, "eagle3": 2, "gemma4-assistant": 3, "mtp": 3,
                              "dflash2": 4, "draft-lm": 5}
_RULE_LABELS = {1: "a block drafter", 2: "an EAGLE-3 head", 3: "a one-token head", 4: "DFlash 2 (llama.cpp only)",
                5: "a separate draft LM"}
RULE = "rule"
RULE_WHY = "nothing measured or published: by rule, {label}"


def rule_why(pair: PairFacts) -> str:
    label = "built into the checkpoint" if pair.built_in else _RULE_LABELS.get(RULE_ORDER.get(pair.method, 9),
                                                                              f"a {pair.method} drafter")
    return RULE_WHY.format(label=label)


@dataclass(frozen=True)
class Ranked:
    pair: PairFacts
    basis: str  # MEASURED, PUBLISHED or RULE
    score: float | None  # the measured speedup, or the published τ; None by rule
    why: str
    caveats: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {"drafter": self.pair.drafter, "method": self.pair.method, "built_in": self.pair.built_in,
                "basis": self.basis, "score": self.score, "why": self.why, "caveats": list(self.caveats)}


def caveats(pair: PairFacts, record: DrafterRecord | None) -> tuple[str, ...]:
    """What travels with a row: license, gated access, the catalog's notes (e.g. "non-thinking only")."""
    if pair.built_in:
        return ("ships inside the checkpoint: no separate download",)
    if record is None:
        return ("license: unknown",)
    out = [f"license: {record.license or 'unknown'}"]
    if record.gated:
        out.append("gated: accept the publisher's terms on the Hub first")
    if record.notes:
        out.append(record.notes)
    return tuple(out)


def _measured(pair: PairFacts, runs: Sequence[Run], gpu: Gpu, engine: str | None,
              target_parameters: int | None) -> Run | None:
    stored = STORED_ENGINE.get(engine) if engine else None
    for run in runs:  # newest first
        if (run.status == "ok" and run.drafter == pair.drafter and run.target == pair.target
                and run.speedup is not None and (stored is None or run.engine == stored)
                and same_hardware(run, gpu) and real_target_run(run, target_parameters)):
            return run
    return None


def rank(pairs: Sequence[PairFacts], runs: Sequence[Run], gpu: Gpu, engine: str | None, *,
         records: Mapping[str, DrafterRecord | None], target_parameters: int | None = None) -> list[Ranked]:
    """`pairs` best first. `runs`: the target's runs, newest first."""
    ranked = []
    for pair in pairs:
        notes = caveats(pair, records.get(pair.drafter))
        run = _measured(pair, runs, gpu, engine, target_parameters)
        if run is not None and run.speedup is not None:
            ranked.append(Ranked(pair, MEASURED, run.speedup,
                                 f"measured: speedup {run.speedup:.2f}× (run {(run.run_id or '')[:12]}, {run.engine} "
                                 f"on {run.hardware}, draft length {run.draft_length})", notes))
            continue
        published = None if pair.built_in else published_acceptance(pair.target, pair.drafter)
        if published is not None:
            tau = published.tau(len(published.marginal))
            ranked.append(Ranked(pair, PUBLISHED, tau, published.source, notes))
            continue
        ranked.append(Ranked(pair, RULE, None, rule_why(pair), notes))

    order = {MEASURED: 0, PUBLISHED: 1, RULE: 2}

    def key(r: Ranked) -> tuple[object, ...]:
        rule = 0 if r.pair.built_in else RULE_ORDER.get(r.pair.method, 9)
        return (order[r.basis], -(r.score or 0.0), rule, r.pair.drafter)

    return sorted(ranked, key=key)
