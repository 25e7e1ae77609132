"""A target's launch commands on one engine, ranked (registry.calibration.ranking), the recommended one first: what
`drafters launch` prints and `GET /v1/targets/{id}/recommendation` answers. Reads only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from registry.calibration.concurrency import Concurrency, concurrency_for, target_curves
from registry.calibration.launch_inputs import (
    STORED_ENGINE,
    built_in_pairs,
    exact_pairs,
    measured_draft_length,
    pick_gpu,
    side_parameters,
)
from registry.calibration.ranking import Ranked, rank
from registry.domain.launch import Launch, PairFacts, launch_command
from registry.domain.run import Run
from registry.store import Store


@dataclass(frozen=True)
class Recommendation:
    ranked: Ranked
    launch: Launch
    # What measured speedup curves of this engine on this GPU class say at concurrency > 1; shown, never chosen by.
    concurrency: Concurrency


def launchable_pairs(store: Store, target: str, drafter: str | None = None) -> list[PairFacts]:
    """The drafter built into the checkpoint (if any) and every exact pair."""
    pairs = built_in_pairs(store, target) + exact_pairs(store, target)
    return [p for p in pairs if drafter is None or p.drafter == drafter]


def recommendations(store: Store, target: str, engine: str, gpu: str | None, *, drafter: str | None = None,
                    runs: Sequence[Run] | None = None) -> list[Recommendation]:
    """Every launchable pair's command on `engine`, best first; pairs the engine cannot run after those it can."""
    chosen = pick_gpu(gpu)
    pairs = launchable_pairs(store, target, drafter)
    if runs is None:
        runs = [r for r in store.runs.list_runs(target=target) if r.status == "ok"]
    records = {p.drafter: None if p.built_in else store.reads.get_drafter(p.drafter) for p in pairs}
    ranked = rank(pairs, runs, chosen, engine, records=records,
                  target_parameters=side_parameters(store, target, pairs[0].target_sha if pairs else None))
    curves = target_curves(store, target)
    out = [Recommendation(r, launch_command(r.pair, engine, measured_draft_length(store, r.pair, chosen, engine, runs)),
                          concurrency_for(curves.get(r.pair.drafter, []), chosen, STORED_ENGINE[engine]))
           for r in ranked]
    return sorted(out, key=lambda r: not r.launch.supported)  # stable: the ranking within each group stands


def recommendation_body(store: Store, target: str, engine: str, gpu: str | None) -> dict[str, object]:
    """One drafter, one command, why: the first supported recommendation (None when the engine runs none)."""
    chosen = pick_gpu(gpu)
    results = recommendations(store, target, engine, gpu)
    best = next((r for r in results if r.launch.supported), None)
    return {
        "target": target, "engine": engine, "gpu": chosen.name,
        "recommendation": None if best is None else {**best.ranked.as_json(), "launch": best.launch.as_json(),
                                                     "concurrency": best.concurrency.as_json()},
        "why": best.ranked.why if best is not None else (
            f"{engine} runs none of the {len(results)} launchable drafters of {target}" if results
            else f"no drafter is an exact pair of {target}"),
        "considered": [{**r.ranked.as_json(), "supported": r.launch.supported, "reason": r.launch.reason}
                       for r in results],
    }
