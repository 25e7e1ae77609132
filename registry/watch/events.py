"""The events the watcher raises and their texts, and the pairs it hands on for verification.

Each event is built here as an EventSpec with a dedupe key; the store records it once per key, so recording the
same fact twice (a rerun, a repeated hint) adds nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from registry.domain import names
from registry.domain.records import CompatRecord, DrafterRecord, EventSpec
from registry.hub import HubModel
from registry.watch.classify import kind

# Called with (drafter repo, drafter sha, target repo, target sha, verdict) for new exact/declared/structural pairs.
OnPair = Callable[[str, str, str, str, str], None]


def record(type_: str, subject: str, key: str, message: str, **payload: object) -> EventSpec:
    """The event, with its dedupe key; the store records it once (in a unit of work, or `record_events`)."""
    parsed = names.parse_repo_id(subject)
    return EventSpec(
        type=type_,
        subject=subject,
        dedupe_key=key,
        payload={"message": message, **payload},
        org=parsed.org,
        family=parsed.family,
    )


def new_checkpoint(model: HubModel) -> EventSpec:
    kind_ = kind(model)
    return record("new_checkpoint", model.repo_id, f"new_checkpoint:{model.repo_id}",
           f"new {kind_} checkpoint {model.repo_id}", kind=kind_, bases=list(model.base_models))


def base_upgrade(model: HubModel, predecessors: list[tuple[str, tuple[str, ...]]]) -> EventSpec:
    names_ = [p for p, _ in predecessors]
    drafters = sorted({d for _, ds in predecessors for d in ds})
    return record(
        "base_upgrade",
        model.repo_id,
        f"base_upgrade:{model.repo_id}",
        f"{model.repo_id} succeeds {', '.join(names_)}, which have drafters ({', '.join(drafters)}); "
        "none declared for the successor yet",
        predecessors=names_,
        predecessor_drafters=drafters,
    )


def weights_changed(model: HubModel, old_sha: str, *, drafter: bool) -> EventSpec:
    if drafter:
        message = (f"drafter {model.repo_id} weights replaced in place ({old_sha[:8]} -> {model.sha[:8]}); "
                   "earlier benchmarks no longer describe it")
    else:
        message = f"{model.repo_id} weights replaced in place ({old_sha[:8]} -> {model.sha[:8]})"
    return record("weights_changed", model.repo_id, f"weights_changed:{model.repo_id}:{model.sha}", message,
           old_sha=old_sha, new_sha=model.sha)


def drafter_released(model: HubModel, method: str, targets: list[str],
                     verdicts: list[CompatRecord]) -> EventSpec:
    """Each target with its verdict, so that an upload named after a model reads as what it is."""
    judged = {v.checkpoint_repo_id: v.verdict for v in verdicts}
    return record(
        "drafter_released",
        model.repo_id,
        f"drafter_released:{model.repo_id}",
        f"{method} drafter {model.repo_id} released for "
        + (", ".join(f"{t} ({judged.get(t, 'not judged yet')})" for t in targets) or "an unresolved target"),
        method=method,
        targets=targets,
        verdicts={v.checkpoint_repo_id: v.verdict for v in verdicts},
    )


def drafter_gone(drafter: DrafterRecord, why: str) -> EventSpec:
    """A recorded drafter the Hub no longer shows (deleted or made private); once per drafter and head sha."""
    return record(
        "drafter_gone",
        drafter.repo_id,
        f"drafter_gone:{drafter.repo_id}:{drafter.head_sha}",
        f"{drafter.method} drafter {drafter.repo_id} is gone from the Hub: {why}; its verdicts and benchmark "
        "runs are kept",
        method=drafter.method,
        last_sha=drafter.head_sha,
    )


def lag_closed(checkpoint_repo_id: str, drafter_repo_id: str, drafter_day: date,
               released: date | None, verdict: str = "exact") -> EventSpec:
    """The checkpoint got its first drafter a user can rely on (domain/reliance.py: exact, or declared by a trusted
    publisher); the lag is counted from its release (may be negative when the dates say the drafter came first:
    the event reports the dates as they are)."""
    days = (drafter_day - released).days if released else None
    which = {"exact": "exact drafter",
             "declared": "drafter, declared by its publisher (configs not checked),",
             "structural": "drafter, named after it by its publisher (structural: no metadata declares it),",
             }.get(verdict, f"drafter ({verdict})")
    return record(
        "lag_closed",
        checkpoint_repo_id,
        f"lag_closed:{checkpoint_repo_id}",
        f"{checkpoint_repo_id} got its first {which} {drafter_repo_id}"
        + (f" after {days} days" if days is not None else ""),
        drafter=drafter_repo_id,
        lag_days=days,
        verdict=verdict,
    )


def notify_pairs(on_pair: OnPair | None, verdicts: list[CompatRecord]) -> None:
    if on_pair is None:
        return
    for verdict in verdicts:
        # The planner decides which of these it measures (store/plan_facts.py); a declared pair is one to look at.
        if verdict.verdict in ("exact", "declared", "structural"):
            on_pair(verdict.drafter_repo_id, verdict.drafter_sha, verdict.checkpoint_repo_id, verdict.checkpoint_sha,
                    verdict.verdict)
