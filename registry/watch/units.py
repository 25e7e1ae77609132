"""One model's unit of work: record a listed checkpoint or drafter (revisions, verdicts, events), follow a rename,
mark a repo gone, or apply a push hint for one repo.

The caller (poller.py) opens the transaction (`PollCache.unit`) around each unit and decides what a failure
means; this module gathers the unit's inputs (inputs.py: the Hub for the one repo, the store), hands them to the
pure decisions of classify.py, and writes through the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from typing import TypeVar

from registry import hub
from registry.domain import configs, hub_presence, pair
from registry.domain.drafter_facts import detect_method
from registry.domain.records import DrafterSpec, EventSpec, RevisionSpec
from registry.domain.watch_records import CheckpointState, CheckpointUnit, DrafterState, DrafterUnit, TargetRead
from registry.hub import HubClient, HubModel
from registry.store import Store, aware, utcnow
from registry.watch import classify, events, inputs
from registry.watch.classify import DraftedIndex
from registry.watch.poll_cache import PollCache

log = logging.getLogger(__name__)

_State = TypeVar("_State", CheckpointState, DrafterState)


class ModelUnits:
    def __init__(self, store: Store, client: HubClient, cache: PollCache,
                 on_pair: events.OnPair | None = None) -> None:
        self.store = store
        self.client = client
        self.cache = cache  # what the poll remembers of the store between units, and when it forgets
        self.on_pair = on_pair

    def prefetch(self, models: list[HubModel]) -> None:
        """Read what the store records for these listed models in one query (not one per model) for their units
        to come, and (one more query) whether the shas of the new ones are recorded heads."""
        missing = self.cache.unfetched([m.repo_id for m in models])
        if missing:
            found = self.store.watch.checkpoint_states(missing)
            self.cache.keep_states({repo_id: found.get(repo_id) for repo_id in missing})
            # A new one may be a repo moved here from another org: whether its sha is a recorded head, for all.
            heads = self.cache.head_shas
            new = {m.sha for m in models if found.get(m.repo_id) is None and m.sha not in heads}
            if new:
                recorded = self.store.watch_state.recorded_heads(new)
                heads.update({sha: sha in recorded for sha in new})

    def _checkpoint_state(self, repo_id: str) -> CheckpointState | None:
        prefetched, state = self.cache.take_state(repo_id)
        return state if prefetched else self.store.watch.checkpoint_state(repo_id)

    def _drafted(self) -> DraftedIndex:
        """Target repo id -> drafters declaring it; kept while the poll cache holds it."""
        return self.cache.drafted(lambda: inputs.drafted_index(self.store))

    # ---- one listed model ---------------------------------------------------------------------

    def process_listed(self, model: HubModel, *, baseline: bool, drafters_only: bool = False,
                       revealed: bool = False) -> None:
        """Process a listed model; a listing sha the Hub no longer has (it lags a force-push) is re-read from
        refs and tried once more, never stored as a missing revision. See process_model for the flags."""
        try:
            self.process_model(model, baseline=baseline, drafters_only=drafters_only, revealed=revealed)
        except hub.RevisionNotFound:
            head = self.client.head_sha(model.repo_id)
            if head == model.sha:
                raise
            log.info("%s: listed sha %s is gone; main is now %s", model.repo_id, model.sha[:12], head[:12])
            self.process_model(replace(model, sha=head), baseline=baseline, drafters_only=drafters_only,
                               revealed=revealed)

    def process_model(self, model: HubModel, *, baseline: bool, drafters_only: bool = False,
                      revealed: bool = False) -> None:
        """`drafters_only`: listed by a drafter tag, outside the watched orgs, so a model that is no drafter is
        none of the registry's business (the `speculative-decoding` tag carries targets too). `revealed`: public
        now, but its last commit is older than what the last poll saw, so it was private until now (a staged
        release): a new one is released today, not at its createdAt."""
        if model.repo_id in self._drafted().drafter_ids or classify.looks_like_drafter(model):
            self._process_drafter(model, baseline=baseline, drafters_only=drafters_only, revealed=revealed)
        elif not drafters_only:
            self._process_checkpoint(model, baseline=baseline, revealed=revealed)

    def _released_now(self, model: HubModel) -> tuple[date, str]:
        """The release day of a staged release seen public for the first time, and why."""
        created = f"created privately on {model.created_at:%Y-%m-%d}; " if model.created_at else ""
        return utcnow().date(), f"{created}public on the Hub by this day (first seen public by the watcher)"

    def _process_checkpoint(self, model: HubModel, *, baseline: bool, revealed: bool = False) -> None:
        """Read what the store knows, read the Hub, then hand the store one unit of work (rows, status, verdicts,
        events): one read and one write in the common case."""
        store = self.store
        state = self._followed(model, self._checkpoint_state(model.repo_id), store.watch.checkpoint_state,
                               drafter=False)
        known = state.record if state is not None else None
        unread = state is not None and state.needs_details
        back = known is not None and known.status == "gone"  # deleted or private once, public again now
        if known is not None and known.head_sha == model.sha and not unread and not back:
            return
        # From here on this sha is a recorded head of the org (a rolled-back unit leaves it here: harmless, a
        # rename check then asks the database).
        self.cache.head_shas[model.sha] = True
        announce = not baseline and known is None
        checkpoint_spec = classify.checkpoint_spec(model)
        if revealed and known is None and not baseline:
            day, note = self._released_now(model)
            checkpoint_spec = replace(checkpoint_spec, released=day, released_precision="day", released_note=note)
        # The drafted checkpoints a new one succeeds: what makes it worth a read, and (official) a base upgrade.
        preceding = classify.predecessors(self._drafted(), model) if known is None or unread else []
        if (known is None or unread) and not classify.interesting(self._drafted(), model, preceding):
            # Outside every drafted line: remember it exists, read its config only when it becomes relevant.
            store.watch.apply_checkpoint_unit(CheckpointUnit(
                spec=checkpoint_spec,
                revision=RevisionSpec(sha=model.sha, last_modified=model.last_modified),
                new=known is None,
                read=False,
                status=("ok", None) if back else None,
                events=(events.new_checkpoint(model),) if announce else (),
            ))
            return
        previous = state.head if state is not None else None
        spec = inputs.revision_spec(self.client, model.repo_id, model.sha, model.last_modified, with_tokenizer=True)
        checkpoint_spec = replace(checkpoint_spec, built_in=classify.built_in(spec))
        unit_events = []
        if announce:
            unit_events.append(events.new_checkpoint(model))
            upgraded = classify.base_upgrade(model, preceding)
            if upgraded:
                unit_events.append(events.base_upgrade(model, upgraded))
        applied = store.watch.apply_checkpoint_unit(CheckpointUnit(
            spec=checkpoint_spec,
            revision=spec,
            new=known is None,
            read=True,
            status=_status(spec),
            # Drafters whose repo name implies this checkpoint, and that declare no target yet, now declare it.
            name_matched=tuple(classify.name_matched_drafters(self._drafted(), model.repo_id,
                                                              without_targets_only=True)),
            events=tuple(unit_events),
        ))
        if applied.attached:
            self.cache.drop()  # drafters now declare it
        if baseline:
            return
        if known is not None and applied.created and previous is not None and classify.weights_changed(
                previous.weight_digest, applied.revision.weight_digest):
            store.events.record_event(events.weights_changed(model, previous.sha, drafter=False))
        events.notify_pairs(self.on_pair, applied.verdicts)

    def _followed(self, model: HubModel, state: _State | None, read: Callable[[str], _State | None], *,
                  drafter: bool) -> _State | None:
        """The recorded state of a listed model, else, when it is a recorded repo renamed (a checkpoint's or, with
        `drafter`, a drafter's), the move followed and the state `read` under the new id; None for a new repo."""
        if state is not None:
            return state
        renamed_from = self._renamed_from(model, drafter=drafter)
        if renamed_from is None:
            return None
        self.rename(renamed_from, model.repo_id)
        return read(model.repo_id)

    def _renamed_from(self, model: HubModel, *, drafter: bool) -> str | None:
        """A listed repo we don't know whose sha we do know under another id (a checkpoint's or, with `drafter`,
        a drafter's) may be that repo, renamed or moved to this org from another: the old id must redirect here.
        Another org's too, so that a repo moved into an org polled before its old one is not recorded (and
        announced) as a new repo."""
        heads = self.cache.head_shas
        if model.sha not in heads:
            heads[model.sha] = bool(self.store.watch_state.recorded_heads({model.sha}))
        if not heads[model.sha]:
            return None
        reads = self.store.reads
        records = reads.drafters_with_head(model.sha) if drafter else reads.checkpoints_with_head(model.sha)
        for record in records:
            if record.repo_id == model.repo_id:
                continue
            if self.canonical(record.repo_id) == model.repo_id:
                return record.repo_id
            # Gone or elsewhere, not moved here; any other failure stops the unit, so a rerun asks again.
        return None

    def _target_reads(self, targets: list[str]) -> tuple[TargetRead, ...]:
        """Targets (and their derivatives) recorded from a listing only get their config and tokenizer read once
        a drafter names them."""
        reads = []
        for head in self.store.watch.heads_needing_details(targets) if targets else []:
            try:
                spec = inputs.revision_spec(self.client, head.repo_id, head.sha, head.last_modified,
                                              with_tokenizer=True)
            except hub.RevisionNotFound:
                continue  # its recorded head was force-pushed away: the target's own listing updates it
            # A target first read here (say, gated) gets the same status as one read from the listing.
            reads.append(TargetRead(repo_id=head.repo_id, revision=spec, status=_status(spec)))
        return tuple(reads)

    def _process_drafter(self, model: HubModel, *, baseline: bool, drafters_only: bool = False,
                         revealed: bool = False) -> None:
        store = self.store
        state = self._followed(model, store.watch.drafter_state(model.repo_id), store.watch.drafter_state, drafter=True)
        known = state.record if state is not None else None
        # Known only from the catalog (its "catalog" revision, or the sha it names): never read from the Hub.
        unread = state is not None and state.unread
        # A drafter marked gone that is listed again is read again (its status is set ok below).
        if known is not None and known.head_sha == model.sha and not unread and known.status != "gone":
            return
        previous = state.head if state is not None else None
        catalog_revision = None
        if unread and previous is not None and previous.sha not in ("catalog", model.sha):
            # The catalog named a sha the Hub has moved on from: read that one too, so that whether the weights
            # changed is judged on their digests, as for any later move.
            try:
                catalog_revision = inputs.revision_spec(self.client, model.repo_id, previous.sha, None,
                                                          with_tokenizer=False)
            except hub.RevisionNotFound:
                pass  # force-pushed away: nothing to compare with
        spec = inputs.revision_spec(self.client, model.repo_id, model.sha, model.last_modified,
                                    with_tokenizer=False)
        # Parsed once, here: the method is detected from it and the store records its facts from it.
        config, config_problem = None, spec.config_problem
        if spec.config_raw is not None:
            try:
                config = configs.parse_config(spec.config_raw)
            except configs.ConfigError as exc:
                config, config_problem = None, str(exc)
        method = (detect_method(config) if config is not None else None) or (known.method if known else None)
        if method is None:
            if spec.config_problem is None and known is None:
                # Tagged or named like a drafter but its config says an ordinary model: a checkpoint after all
                # (recorded only when its org is watched).
                if not drafters_only:
                    self._process_checkpoint(model, baseline=baseline, revealed=revealed)
                return
            method = pair.method_to_run(config)
        first_hub_revision = known is None or unread
        released_on = model.created_at.date() if known is None and model.created_at else None
        if revealed and known is None and not baseline:
            released_on = self._released_now(model)[0]
        drafter_spec = DrafterSpec(
            repo_id=model.repo_id,
            method=method,
            publisher=model.repo_id.split("/", 1)[0],
            source="hub" if known is None else known.source,
            targets=inputs.declared_targets(store, model, config),
            released=released_on,
            released_precision="day" if released_on is not None else None,
            gated=bool(model.gated),
        )
        # The drafter's targets once upserted: those it declares already, then the new ones.
        targets = list(dict.fromkeys([t for t, _ in (known.targets if known else ())]
                                     + [t for t, _ in drafter_spec.targets]))
        applied = store.watch.apply_drafter_unit(DrafterUnit(
            spec=drafter_spec,
            status=_status(spec),
            revision=spec,
            config=config,
            config_problem=config_problem,
            catalog_revision=catalog_revision,
            targets_read=self._target_reads(targets),
            first_hub_revision=first_hub_revision and not baseline,
        ))
        self.cache.drop()  # a drafter changed
        if baseline:
            return
        verdicts = applied.verdicts
        later: list[EventSpec] = []
        if first_hub_revision:
            later.append(events.drafter_released(model, method, list(applied.targets), verdicts))
            for checkpoint_repo_id, checkpoint in applied.newly_exact:
                released = pair.checkpoint_release_date(checkpoint) if checkpoint is not None else None
                drafter_day = released_on or (model.created_at.date() if model.created_at else utcnow().date())
                verdict = next((v.verdict for v in verdicts if v.checkpoint_repo_id == checkpoint_repo_id), "exact")
                later.append(events.lag_closed(checkpoint_repo_id, model.repo_id, drafter_day, released, verdict))
        # Also on a first Hub read: the weights may differ from those of the sha the catalog named.
        previous = applied.previous
        if applied.created and previous is not None and classify.weights_changed(previous.weight_digest,
                                                                                 applied.revision.weight_digest):
            later.append(events.weights_changed(model, previous.sha, drafter=True))
        if later:
            store.watch.record_events(later)
        events.notify_pairs(self.on_pair, verdicts)

    # ---- one repo: renames, deletions, push hints ------------------------------------------------

    def recorded_id(self, repo_id: str) -> str | None:
        """The id the registry records `repo_id` under now (aliases followed), or None when it is not recorded."""
        recorded = self.store.watch.recorded_repo(repo_id)
        return recorded.repo_id if recorded is not None else None

    def canonical(self, repo_id: str) -> str | None:
        """Where the Hub sends a read of `repo_id` (its new id after a move), or None when it has no such repo."""
        try:
            return self.client.revision(repo_id).repo_id
        except hub.RepoNotFound:
            return None

    def mark_gone(self, repo_id: str, why: str) -> None:
        """The repo is no longer on the Hub (for us): say so on its record with the day, keep its revisions,
        verdicts and runs; if it comes back, the next read of it sets it ok again (no release: it was known).

        A drafter pulled from the Hub is announced (`drafter_gone`): whoever serves it can no longer fetch it.
        A checkpoint is not: the watched orgs hide and delete checkpoints (finetunes, quantizations) routinely,
        and every report marks it anyway. A repo already marked keeps its first day, and announces nothing again."""
        recorded = self.store.watch.recorded_repo(repo_id)
        if recorded is None or recorded.status == hub_presence.GONE:
            return
        announce = events.drafter_gone(recorded.drafter, why) if recorded.drafter is not None else None
        if self.store.watch.mark_repo_gone(repo_id, hub_presence.gone_detail(why, utcnow().date()), announce):
            log.info("%s: %s", repo_id, why)

    def rename(self, old: str, new: str) -> None:
        """Keep one record across a move on the Hub: the checkpoint or drafter takes the new id."""
        self.store.watch.rename_repo(old, new)
        self.cache.drop()  # ids moved
        log.info("%s was renamed to %s", old, new)

    def apply_hint(self, repo_id: str, head_sha: str | None = None, *, moved_from: str | None = None,
                   made_public: bool = False) -> None:
        """A push hint for one repo (see Watcher.poll_repo), each step in its own unit. A repo never recorded that
        the hint says went public (`made_public`), or that was created before its org's cursor (so private at the
        last poll), is a staged release: released today, as the poll would find it."""
        # The poll may have read this repo's state before the hint changes it (the webhook runs in its own thread).
        self.cache.drop()
        try:
            try:
                revision = self.client.revision(repo_id, head_sha)
            except hub.RevisionNotFound:
                revision = self.client.revision(repo_id)  # force-pushed away since: main is what there is
        except hub.RepoNotFound:
            revision = None
        if revision is None or revision.private:
            with self.cache.unit(self.store):
                self.mark_gone(repo_id, "no longer public on the Hub (deleted or made private)")
            return
        model = revision.as_model()
        with self.cache.unit(self.store):
            if moved_from is not None and self.recorded_id(moved_from) == moved_from \
                    and self.recorded_id(model.repo_id) is None and self.canonical(moved_from) == model.repo_id:
                self.rename(moved_from, model.repo_id)
            if head_sha is not None and self._older_than_head(model):
                log.info("%s: hint for %s is older than the recorded head; ignored", model.repo_id, model.sha[:12])
                return
            self.process_listed(model, baseline=False, revealed=made_public or self._private_at_last_poll(model))

    def _private_at_last_poll(self, model: HubModel) -> bool:
        """Created before the newest change its org's last poll read, yet not recorded: it was private then."""
        cursor = self.store.watch_state.cursor(model.repo_id.split("/", 1)[0])
        return cursor is not None and model.created_at is not None and model.created_at <= cursor

    def _older_than_head(self, model: HubModel) -> bool:
        recorded = self.store.watch.recorded_repo(model.repo_id)
        head = recorded.head if recorded is not None else None
        if recorded is None or head is None or head.sha == model.sha:
            return False
        if model.sha in recorded.shas:
            return True  # an earlier head of this repo
        return head.last_modified is not None and aware(head.last_modified) > model.last_modified


def _status(spec: RevisionSpec) -> tuple[str, str | None]:
    """A repo read gated is recorded gated, with why; any other read leaves it ok."""
    gated = (spec.config_problem or "").startswith("gated")
    return ("gated", spec.config_problem) if gated else ("ok", None)
