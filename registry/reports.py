"""What the CLI and the dashboard ask: which drafters fit a checkpoint, and how long targets waited for one."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date

from registry.domain import hub_presence, lag, names, reliance, upgrades
# The release rule is the pair's; reports, the API and the dashboard read it from here too.
from registry.domain.compat import VERDICT_ORDER
from registry.domain.pair import checkpoint_release_date, drafter_release_date
from registry.domain.records import CheckpointRecord, CompatRecord, DrafterRecord
from registry.store import NotFound, Store
from registry.typed_ids import not_in_registry


@dataclass(frozen=True)
class FindRow:
    drafter_repo_id: str
    method: str
    publisher: str
    verdict: str
    reasons: tuple[str, ...]
    drafter_sha: str
    checkpoint_sha: str
    drafter_released: date | None
    # "gone from the Hub since …" for a drafter deleted or made private (its verdict stands, it cannot be fetched)
    gone: str | None = None
    license: str | None = None  # the Hub license id the repo states; None: not known
    replaced_in_place: tuple[str, ...] = ()  # "YYYY-MM-DD: what changed": pin the drafter's commit
    notes: str | None = None  # the catalog's caveat for the pair ("non-thinking only"), shown wherever it is


@dataclass(frozen=True)
class LagRow:
    target_repo_id: str
    org: str
    family: str | None
    released: date | None
    released_precision: str | None
    first_drafter_repo_id: str | None
    first_drafter_released: date | None
    lag_days: int | None
    open: bool
    exact_drafters: tuple[str, ...]
    # "<repo id> gone from the Hub since …" for the target and each exact drafter no longer on the Hub
    hub_notes: tuple[str, ...] = ()
    # Drafting methods inside the target itself (MTP heads, DSpark): available from its release day, lag 0.
    built_in: tuple[str, ...] = ()
    # Drafters that count though not exact (reliance.py), each "<drafter> (<verdict>)": declared by, or named after
    # the target by, its own publisher or a trusted one (the catalog's and the watched orgs)
    declared_drafters: tuple[str, ...] = ()
    # "<drafter>: why" for each drafter named after or declaring this target that does not count (reliance.py)
    not_counted: tuple[str, ...] = ()
    # The lag of each drafting method on its own, so a built-in MTP head does not hide a DFlash months later.
    by_method: tuple[MethodLag, ...] = ()


@dataclass(frozen=True)
class MethodLag:
    method: str
    first_drafter_repo_id: str | None  # None for a built-in method: the target itself
    first_drafter_released: date | None
    lag_days: int | None  # None: undated


@dataclass(frozen=True)
class UpgradeRow:
    successor_repo_id: str
    predecessor_repo_id: str
    predecessor_drafters: tuple[str, ...]
    released: date | None
    lag_days: int | None
    open: bool


# How methods are named where a person reads them ("built-in MTP", "built-in DSpark").
_METHOD_LABELS = {"mtp": "MTP", "dspark": "DSpark", "dflash": "DFlash", "dflash2": "DFlash 2", "eagle3": "EAGLE-3"}


def built_in_label(methods: tuple[str, ...]) -> str | None:
    """"built-in MTP" for a checkpoint that ships its drafter inside; None when it ships none."""
    if not methods:
        return None
    return "built-in " + " + ".join(_METHOD_LABELS.get(m, m) for m in methods)


def find_for_checkpoint(store: Store, repo_id: str) -> tuple[CheckpointRecord, list[FindRow]]:
    checkpoint = store.reads.get_checkpoint(repo_id)
    if checkpoint is None:
        raise NotFound(not_in_registry(store.reads.checkpoints(), repo_id))
    store.verdicts.recompute_compatibility(checkpoint_repo_id=checkpoint.repo_id)
    drafters = {d.repo_id: d for d in store.reads.drafters()}
    rows = [
        FindRow(
            drafter_repo_id=v.drafter_repo_id,
            method=v.method,
            publisher=drafters[v.drafter_repo_id].publisher,
            verdict=v.verdict,
            reasons=v.reasons,
            drafter_sha=v.drafter_sha,
            checkpoint_sha=v.checkpoint_sha,
            drafter_released=drafter_release_date(drafters[v.drafter_repo_id]),
            gone=hub_presence.gone_marker(drafters[v.drafter_repo_id].status,
                                          drafters[v.drafter_repo_id].status_detail),
            license=drafters[v.drafter_repo_id].license,
            replaced_in_place=drafters[v.drafter_repo_id].replaced_in_place,
            notes=drafters[v.drafter_repo_id].notes,
        )
        for v in store.reads.verdicts(checkpoint_repo_id=checkpoint.repo_id)
    ]
    # Within a verdict, drafters still on the Hub come before those gone from it.
    rows.sort(key=lambda r: (VERDICT_ORDER.get(r.verdict, 9), r.gone is not None, r.method, r.drafter_repo_id))
    return checkpoint, rows


def relied_by_target(verdicts: list[CompatRecord], trusted_publishers: frozenset[str],
                     named: frozenset[tuple[str, str]]) -> dict[str, set[str]]:
    """Target -> the drafters a user can rely on for it (reliance.py): what closes its lag. `named`: the
    (drafter, target) pairs where the drafter's repo name implies the target."""
    relied: dict[str, set[str]] = defaultdict(set)
    for verdict in verdicts:
        if reliance.relied_on(verdict.verdict, verdict.publisher, verdict.checkpoint_repo_id, trusted_publishers,
                              named=(verdict.drafter_repo_id, verdict.checkpoint_repo_id) in named):
            relied[verdict.checkpoint_repo_id].add(verdict.drafter_repo_id)
    return relied


@dataclass(frozen=True)
class _LagInputs:
    """What lag reports read, loaded once: drafters, checkpoints, relied-on pairs, declared targets."""

    drafters: dict[str, DrafterRecord]
    checkpoints: list[CheckpointRecord]
    exact: dict[str, set[str]]  # target -> drafters relied on (registry.domain.reliance)
    by_target: dict[str, list[str]]
    verdicts: dict[str, dict[str, CompatRecord]]  # target -> drafter -> verdict between the heads
    trusted_publishers: frozenset[str]
    named: frozenset[tuple[str, str]]  # (drafter, target) its repo name implies

    @classmethod
    def load(cls, store: Store) -> _LagInputs:
        drafters = {d.repo_id: d for d in store.reads.drafters()}
        aliases = store.reads.aliases()
        by_target: dict[str, list[str]] = defaultdict(list)
        for drafter in drafters.values():
            for target, _ in drafter.targets:
                by_target[aliases.get(target, target)].append(drafter.repo_id)
        verdicts = store.reads.verdicts()
        by_pair: dict[str, dict[str, CompatRecord]] = defaultdict(dict)
        for verdict in verdicts:
            by_pair[verdict.checkpoint_repo_id][verdict.drafter_repo_id] = verdict
        publishers = store.reads.trusted_publishers()
        named = reliance.named_pairs(list(drafters.values()), aliases)
        return cls(drafters, store.reads.checkpoints(), relied_by_target(verdicts, publishers, named),
                   dict(by_target), dict(by_pair), publishers, named)

    def not_counted(self, target: str) -> tuple[str, ...]:
        """The drafters named after or declaring `target` that do not count for it, each with why."""
        notes = []
        for drafter in sorted(set(self.by_target.get(target, ()))):
            verdict = self.verdicts.get(target, {}).get(drafter)
            if verdict is None:
                continue  # not judged against its head yet: nothing to say
            why = reliance.why_not_relied_on(verdict.verdict, verdict.publisher, target, self.trusted_publishers,
                                             named=(drafter, target) in self.named)
            if why is not None:
                notes.append(f"{drafter}: {why}")
        return tuple(notes)

    def by_method(self, checkpoint: CheckpointRecord, released: date | None,
                  relied: list[str]) -> tuple[MethodLag, ...]:
        """The first relied-on drafter of each method (and each built-in method, from the release day)."""
        methods = [MethodLag(m, None, released, 0 if released is not None else None) for m in checkpoint.built_in]
        seen = set(checkpoint.built_in)
        for repo_id in relied:  # already in release order
            drafter = self.drafters[repo_id]
            if drafter.method in seen:
                continue
            seen.add(drafter.method)
            day = drafter_release_date(drafter)
            days = max((day - released).days, 0) if day is not None and released is not None else None
            methods.append(MethodLag(drafter.method, repo_id, day, days))
        return tuple(methods)


def lag_row(checkpoint: CheckpointRecord, drafters: Mapping[str, DrafterRecord], relied: Iterable[str],
            today: date, *, verdicts: Mapping[str, CompatRecord] | None = None, not_counted: tuple[str, ...] = (),
            by_method: tuple[MethodLag, ...] = ()) -> LagRow:
    """The lag of one target: the one computation `drafters lag`, `/v1/lag` and `/v1/targets/{id}/drafters` share.
    `relied`: the target's drafters a user can rely on (registry.domain.reliance), whose records `drafters` holds;
    `verdicts` (by drafter) tells the exact ones from the declared ones (without it every relied one is exact)."""
    built_in = checkpoint.built_in
    released = checkpoint_release_date(checkpoint)
    ordered = sorted(relied, key=lambda r: _release_order(drafters[r], released))
    dated = [d for d in (drafter_release_date(drafters[r]) for r in ordered) if d is not None]
    first = ordered[0] if ordered and not built_in else None
    if built_in and released is not None and released <= today:
        # A drafter inside the checkpoint is there the day the checkpoint is: nothing to wait for.
        measured: lag.Lag | None = lag.target_lag(released, [released], today)
    else:
        # Relied-on drafters that all lack a date close the lag without telling how long it was.
        measurable = released is not None and (dated or not ordered) and not built_in
        measured = lag.target_lag(released, dated, today) if measurable else None

    def level(repo_id: str) -> str:
        return verdicts[repo_id].verdict if verdicts is not None and repo_id in verdicts else "exact"

    return LagRow(
        target_repo_id=checkpoint.repo_id,
        org=checkpoint.org,
        family=checkpoint.family,
        released=released,
        released_precision=checkpoint.released_precision,
        first_drafter_repo_id=first,
        first_drafter_released=(released if built_in else drafter_release_date(drafters[first]) if first else None),
        lag_days=measured.days if measured else None,
        open=first is None and not built_in,
        exact_drafters=tuple(r for r in ordered if level(r) == "exact"),
        hub_notes=_hub_notes(checkpoint, [drafters[r] for r in ordered]),
        built_in=built_in,
        declared_drafters=tuple(f"{r} ({level(r)})" for r in ordered if level(r) != "exact"),
        not_counted=not_counted,
        by_method=by_method,
    )


def lag_table(store: Store, today: date, inputs: _LagInputs | None = None) -> list[LagRow]:
    """One row per target some drafter declares, worst (longest) lag first. A lag closes on a drafter a user can
    rely on (registry.domain.reliance): exact, or declared (or named after it) by the target's publisher or a
    trusted one."""
    inputs = inputs or _LagInputs.load(store)
    rows = []
    for checkpoint in inputs.checkpoints:
        if checkpoint.repo_id not in inputs.by_target and checkpoint.repo_id not in inputs.exact \
                and not checkpoint.built_in:
            continue
        released = checkpoint_release_date(checkpoint)
        relied = sorted(inputs.exact.get(checkpoint.repo_id, ()),
                        key=lambda r: _release_order(inputs.drafters[r], released))
        rows.append(lag_row(checkpoint, inputs.drafters, relied, today,
                            verdicts=inputs.verdicts.get(checkpoint.repo_id, {}),
                            not_counted=inputs.not_counted(checkpoint.repo_id),
                            by_method=inputs.by_method(checkpoint, released, relied)))
    rows.sort(key=lambda r: (-(r.lag_days if r.lag_days is not None else -1), r.target_repo_id))
    return rows


_PRECISION_RANK = {"day": 0, "approx": 1, "month": 2}


def _release_order(drafter: DrafterRecord, target_released: date | None) -> tuple[date, int, str]:
    """Which exact drafter came first. A month-precision date in the target's own release month only says "that
    month": it is not known to be before the target, so it ranks from the target's release day, after a drafter
    dated that day more precisely (Muse-Glimmer-30B: Meta's assistant of 2026-08-10 before "Aug 2026" DFlash 2)."""
    released = drafter_release_date(drafter)
    if released is None:
        return date.max, 9, drafter.repo_id
    precision = drafter.released_precision if drafter.released is not None else "day"
    if (precision == "month" and target_released is not None and released < target_released
            and (released.year, released.month) == (target_released.year, target_released.month)):
        released = target_released
    return released, _PRECISION_RANK.get(precision or "day", 3), drafter.repo_id


def _hub_notes(checkpoint: CheckpointRecord, drafters: list[DrafterRecord]) -> tuple[str, ...]:
    """The lag stays as measured when a repo leaves the Hub (it is history); the row says who left."""
    marked = [(checkpoint.repo_id, hub_presence.gone_marker(checkpoint.status, checkpoint.status_detail))]
    marked += [(d.repo_id, hub_presence.gone_marker(d.status, d.status_detail)) for d in drafters]
    return tuple(f"{repo_id} {marker}" for repo_id, marker in marked if marker is not None)


def lag_by(rows: list[LagRow], key: str, store: Store | None = None) -> dict[str, lag.GroupLag]:
    """Median and worst lag per family (key="family") or per drafter publisher (key="publisher")."""
    groups: dict[str, list[lag.Lag]] = defaultdict(list)
    publishers = {d.repo_id: d.publisher for d in store.reads.drafters()} if store is not None else {}
    for row in rows:
        if row.lag_days is None:
            continue
        measured = lag.Lag(days=row.lag_days, open=row.open, first_drafter_released=row.first_drafter_released)
        if key == "family":
            groups[row.family or "unknown"].append(measured)
        elif row.first_drafter_repo_id is not None:
            groups[publishers.get(row.first_drafter_repo_id, "unknown")].append(measured)
    return lag.summarize(dict(sorted(groups.items())))


def upgrade_table(store: Store, today: date, inputs: _LagInputs | None = None) -> list[UpgradeRow]:
    """Successors of checkpoints that have drafters: each stays open until it gets an exact drafter."""
    inputs = inputs or _LagInputs.load(store)
    drafters, exact = inputs.drafters, inputs.exact
    drafted: dict[tuple[str, str], dict[names.RepoName, str]] = defaultdict(dict)
    for target in inputs.by_target:
        if not names.is_repo_id(target):
            continue  # recorded before local paths were refused as targets: no line to succeed
        parsed = names.parse_repo_id(target)
        # An upgrade stays within its vendor's line: only those can pair, so group by them.
        drafted[(parsed.org.lower(), parsed.family)][parsed] = target
    rows = []
    for successor in inputs.checkpoints:
        if successor.kind not in ("base", "unknown"):
            continue
        new = names.parse_repo_id(successor.repo_id)
        line = {old: target for old, target in drafted.get((new.org.lower(), new.family), {}).items()
                if target != successor.repo_id}
        # The one rule of the `base_upgrade` alert (upgrades.upgraded_releases); the row names the newest release it
        # upgrades (Qwen3.5 -> Qwen3.6, not Qwen3 -> 3.6).
        upgraded = upgrades.upgraded_releases(new, list(line), post_trained=upgrades.is_post_trained(
            successor.repo_id, successor.bases))
        for old in sorted(upgraded, key=upgrades.release_key)[-1:]:
            predecessor = line[old]
            released = checkpoint_release_date(successor)
            successor_exact = exact.get(successor.repo_id, set())
            exact_dates = [d for d in (drafter_release_date(drafters[r]) for r in successor_exact) if d is not None]
            if successor.built_in and released is not None:
                exact_dates = [released]  # its own built-in drafter: no wait
            measured = lag.target_lag(released, exact_dates, today) if released is not None else None
            rows.append(
                UpgradeRow(
                    successor_repo_id=successor.repo_id,
                    predecessor_repo_id=predecessor,
                    predecessor_drafters=tuple(sorted(inputs.by_target[predecessor])),
                    released=released,
                    lag_days=measured.days if measured else None,
                    open=not successor_exact and not successor.built_in,
                )
            )
    rows.sort(key=lambda r: (not r.open, -(r.lag_days or 0)))
    return rows
