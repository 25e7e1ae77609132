"""The Hub watcher: reads each watched org incrementally, records what changed, and raises events.

Each listed model is one unit of work (one transaction, cursor included), so a poll that is killed or cut off
leaves the database as it was or with whole units, and the next poll resumes where the last unit ended.

Per org, a poll reads the org's cheap id listing first (ids, head shas, visibility: one call for up to 1000 repos)
and compares it with what the registry knows. Nothing changed: done. Otherwise the detailed listing is read
newest change first down to the cursor, and repos that changed without a newer commit (a private release made
public, a rename or transfer of an older repo) are read one by one. Recorded repos the listing no longer shows
publicly are read once: a renamed one stays one checkpoint or drafter (its old id an alias), a deleted or
private one is marked gone, its history kept and nothing announced. Private repos are never recorded or announced.
Then one listing per drafter tag finds drafters of publishers nobody watches.

A failure that belongs to one repo (a malformed entry, a bad response, an unexpected error) is logged in one line
and counted; the org goes on without it, and after QUARANTINE_AFTER failures the repo is quarantined so the cursor
moves past it, to be retried later. Failures of the Hub itself (unreachable, rate limited, a refused token) stop
the org or the whole poll instead.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from registry.domain import configs
from registry import hub
from registry.domain import names
from registry.hub import (
    BudgetExhausted,
    HubClient,
    HubError,
    HubModel,
    HubUnavailable,
    HubUnreachable,
    InvalidToken,
    RateLimited,
    Unreadable,
)
from registry.store.models import Checkpoint, Drafter, WatchCursor
from registry.store.records import CheckpointSpec, DrafterSpec, EventRecord, EventSpec, RevisionSpec
from registry.store import Store, aware, utcnow

log = logging.getLogger(__name__)

DRAFTER_TAGS = frozenset({"dflash", "eagle3", "eagle", "speculators", "speculative-decoding-draft", "dspark", "mtp"})
DRAFTER_ARCHITECTURES = frozenset(
    {
        "DFlashDraftModel",
        "DFlash2DraftModel",
        "Gemma4AssistantForCausalLM",
        "Gemma4UnifiedAssistantForCausalLM",
        "LlamaForCausalLMEagle3",
        "Eagle3Speculator",
        "DFlashSpeculator",
    }
)
# Listed by tag or library once per poll, so drafters of publishers nobody watches are found too.
DRAFTER_QUERIES = ("dflash", "eagle3", "speculators", "speculative-decoding")
QUERY_PREFIX = "tag:"  # cursor rows of drafter queries are named tag:<tag>
# A drafter query's first poll records this many of the newest tagged repos (each costs a few reads), not all.
QUERY_BASELINE = 50
# A repo that failed this many polls in a row is skipped (the cursor moves on) for QUARANTINE_S, doubling after.
QUARANTINE_AFTER = 3
QUARANTINE_S = 6 * 3600.0
# Failures of the Hub or of the poll's budget, not of one repo: they stop the org (or the poll), never count
# against a repo.
SYSTEMIC = (HubUnavailable, RateLimited, BudgetExhausted, InvalidToken)
# Most models that need no Hub read recorded in one transaction (see Watcher._record_unit).
UNIT_BATCH = 200
# Most repos read one by one per org and poll (changed without a newer commit); the rest wait for the next poll.
MAX_UNSEEN_READS = 50
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")


@dataclass
class OrgReport:
    org: str
    listed: int = 0
    processed: int = 0
    skipped_lease: bool = False
    error: str | None = None
    unreachable: bool = False
    cut: bool = False  # stopped by the poll's time or request budget
    failed: list[str] = field(default_factory=list)  # repos that failed this poll (each logged once)
    quarantined: list[str] = field(default_factory=list)  # of those, the ones now skipped for a while
    stop_poll: bool = False  # rate limited beyond the wait budget, or the token refused: no other org will do
    retry_after: float | None = None


@dataclass
class PollReport:
    orgs: list[OrgReport] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0
    # Set when the Hub could not be reached at all: the orgs after the failing one were not tried.
    unreachable: str | None = None
    # Set when the Hub's rate limit or a refused token stopped the poll; retry_after: seconds until it is worth
    # polling again (the bucket's reset plus a second).
    stopped: str | None = None
    retry_after: float | None = None
    config_error: str | None = None  # the token is refused: nothing will work until the configuration changes

    @property
    def errors(self) -> list[str]:
        return [f"{o.org}: {o.error}" for o in self.orgs if o.error]


class PollCut(Exception):
    """The poll hit its request or time budget; the current org stops after its last whole unit."""


class RepoFailed(Exception):
    """Recording one repo failed for a reason of its own; the org goes on without it."""

    def __init__(self, model: HubModel, cause: BaseException) -> None:
        message = str(cause) if isinstance(cause, HubError) else f"{type(cause).__name__}: {cause}"
        super().__init__(" ".join(f"{model.repo_id}: {message}".split())[:500])
        self.model = model


def stable_owner(home: Path) -> str:
    """A lease owner that survives a restart of `drafters up` on the same host and home, so a restarted process
    takes its own orgs back at once instead of waiting out the dead one's leases."""
    digest = hashlib.sha256(f"{socket.gethostname()}\0{Path(home).resolve()}".encode()).hexdigest()[:12]
    return f"{socket.gethostname()[:60]}-{digest}"


def _looks_like_drafter(model: HubModel) -> bool:
    tags = {t.lower() for t in model.tags}
    if tags & DRAFTER_TAGS:
        return True
    if set(model.architectures) & DRAFTER_ARCHITECTURES:
        return True
    lowered = model.repo_id.lower()
    return any(marker in lowered for marker in ("dflash", "dspark", "eagle3", "speculator", "-assistant"))


def _is_official_release(model: HubModel) -> bool:
    """An org's instruct release declares its own pretrained parent: `<org>/<name>-Base` (or `-base`)."""
    org, name = model.repo_id.split("/", 1)
    return model.base_model_relation == "finetune" and any(
        base.lower() == f"{org}/{name}-base".lower() for base in model.base_models)


def _kind(model: HubModel) -> str:
    if _is_official_release(model):
        return "base"
    if model.base_model_relation in ("quantized", "finetune", "adapter", "merge"):
        return model.base_model_relation
    guess = names.derivative_kind(model.repo_id.split("/", 1)[1])
    if guess is not None:
        return guess
    # An official release tagged finetune of its own org's -Base model is still the family's base release.
    return "base"


def _capped(value: datetime, ceiling: datetime | None) -> datetime:
    return value if ceiling is None else min(value, ceiling)


class Watcher:
    def __init__(
        self,
        store: Store,
        client: HubClient,
        orgs: list[str],
        *,
        owner: str | None = None,
        lease_s: float = 600.0,
        deadline_s: float | None = None,
        on_pair: Callable[[str, str, str, str, str], None] | None = None,
        drafter_queries: tuple[str, ...] = (),
    ) -> None:
        self.store = store
        self.client = client
        self.orgs = orgs
        # Tags listed Hub-wide each poll (`drafters watch` and `drafters up` pass DRAFTER_QUERIES).
        self.drafter_queries = drafter_queries
        self.owner = owner or f"watcher-{uuid.uuid4().hex[:8]}"
        self.lease_s = lease_s
        self.deadline_s = deadline_s
        # Called with (drafter repo, drafter sha, target repo, target sha, verdict) for new exact/structural pairs.
        self.on_pair = on_pair
        self._deadline: float | None = None
        self._units_this_poll = 0
        # The org a poll ran out of time or requests in: the next poll starts there, so that the orgs listed last
        # are not starved by a budget the first ones use up every time.
        self._resume_at: str | None = None
        self._drafted_cache: dict[str, list[str]] | None = None
        self._stems: list[tuple[str, str, bool]] = []
        self._drafter_ids: frozenset[str] = frozenset()
        # Per org, the head shas of its recorded checkpoints (read once a poll): a listed model whose sha is not
        # among them cannot be a renamed one, and needs no query to say so.
        self._head_shas: dict[str, set[str]] = {}
        self._failing: set[str] = set()  # repos of the org being polled with failures on record

    # ---- the loop -----------------------------------------------------------------------------

    def poll_once(self, *, skip_if_polled_within_s: float = 0.0) -> PollReport:
        """Poll every org. With several watchers on one database, an org another one polled less than
        `skip_if_polled_within_s` ago is skipped, so each org is listed once per interval however many run."""
        started = time.monotonic()
        self._deadline = started + self.deadline_s if self.deadline_s else None
        report = PollReport()
        self._drafted_cache = None
        self._head_shas = {}
        first_event = self._last_event_id()
        self.client.start_budget()
        first_request = self.client.request_count
        self._units_this_poll = 0
        units = self.orgs + [f"{QUERY_PREFIX}{tag}" for tag in self.drafter_queries]
        start = units.index(self._resume_at) if self._resume_at in units else 0
        self._resume_at = None
        for org in units[start:] + units[:start]:
            reason = report.unreachable or report.stopped
            if reason is not None:
                # Every org would fail the same way after its own retries: say so once, quickly.
                report.orgs.append(OrgReport(org=org, error=f"not polled: {reason}"))
                continue
            try:
                org_report = self.poll_org(org, skip_if_polled_within_s=skip_if_polled_within_s)
            except Exception as exc:  # noqa: BLE001 - the watcher outlives any one org's surprise
                log.warning("poll of %s failed unexpectedly: %s: %s", org, type(exc).__name__, exc)
                org_report = OrgReport(org=org, error=f"unexpected {type(exc).__name__}: {exc}")
            report.orgs.append(org_report)
            if org_report.cut and self._resume_at is None:
                self._resume_at = org
            if org_report.unreachable:
                report.unreachable = org_report.error
            if org_report.stop_poll:
                report.stopped = org_report.error
                report.retry_after = org_report.retry_after
                if self._resume_at is None:
                    self._resume_at = org
                if org_report.retry_after is None:
                    report.config_error = org_report.error
        report.events = self.store.events(after_id=first_event)
        report.requests = self.client.request_count - first_request
        report.seconds = time.monotonic() - started
        return report

    def run_forever(self, interval_s: float, stop: threading.Event, on_report: Callable[[PollReport], None]) -> None:
        while not stop.is_set():
            # Half an interval: another watcher's poll in this interval counts, its poll of the last one does not.
            report = self.poll_once(skip_if_polled_within_s=interval_s / 2)
            on_report(report)
            if report.config_error is not None:
                return  # a refused token: polling again changes nothing
            stop.wait(max(interval_s, report.retry_after or 0.0))

    def _last_event_id(self) -> int:
        events = self.store.events()
        return events[-1].id if events else 0

    # ---- one org ------------------------------------------------------------------------------

    def _acquire(self, org: str, skip_if_polled_within_s: float = 0.0) -> tuple[bool, datetime | None, bool]:
        """Take the org's lease (two watchers never poll one org at once) unless it was polled within the given
        seconds; returns (got it, cursor, baseline)."""
        now = utcnow()
        try:
            with self.store.session() as session:
                if session.scalar(select(WatchCursor.id).where(WatchCursor.org == org)) is None:
                    session.add(WatchCursor(org=org))
        except IntegrityError:
            pass  # another watcher created the org's cursor at the same moment; theirs serves both
        free = (
            (WatchCursor.lease_owner.is_(None))
            | (WatchCursor.lease_owner == self.owner)
            | (WatchCursor.lease_expires_at < now)
        )
        if skip_if_polled_within_s > 0:
            free = free & (
                WatchCursor.polled_at.is_(None)
                | (WatchCursor.polled_at <= now - timedelta(seconds=skip_if_polled_within_s))
            )
        with self.store.session() as session:
            won = session.execute(
                update(WatchCursor)
                .execution_options(synchronize_session=False)
                .where(WatchCursor.org == org, free)
                .values(lease_owner=self.owner, lease_expires_at=now + timedelta(seconds=self.lease_s))
            ).rowcount
            row = session.scalar(select(WatchCursor).where(WatchCursor.org == org))
            return bool(won), aware(row.last_modified), row.polled_at is None

    def _release(self, org: str, error: str | None, completed: bool) -> None:
        with self.store.session() as session:
            values: dict = {"lease_owner": None, "lease_expires_at": None, "last_error": error}
            if completed:
                values["polled_at"] = utcnow()
            session.execute(
                update(WatchCursor).execution_options(synchronize_session=False).where(WatchCursor.org == org, WatchCursor.lease_owner == self.owner).values(**values)
            )

    def _advance_cursor(self, org: str, last_modified: datetime) -> None:
        with self.store.session() as session:
            row = session.scalar(select(WatchCursor).where(WatchCursor.org == org))
            if row.last_modified is None or aware(row.last_modified) < last_modified:
                row.last_modified = last_modified

    def _check_budget(self, *, before_unit: bool = False) -> None:
        # A poll always records one unit, however short its deadline: each poll then moves the cursor on.
        if before_unit and self._units_this_poll == 0:
            return
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise PollCut("poll time budget spent")

    def poll_org(self, org: str, *, skip_if_polled_within_s: float = 0.0) -> OrgReport:
        """Poll one org, or one drafter query (`tag:<tag>`), under its lease."""
        report = OrgReport(org=org)
        got, cursor, baseline = self._acquire(org, skip_if_polled_within_s)
        if not got:
            report.skipped_lease = True
            return report
        query = org[len(QUERY_PREFIX):] if org.startswith(QUERY_PREFIX) else None
        completed = False
        try:
            # A spent deadline costs no listing request, once this poll has recorded something (a poll always
            # gets one unit done, however loaded the machine, so that polls move on).
            self._check_budget(before_unit=True)
            quarantined = self.store.quarantined(org)
            self._failing = {f.repo_id for f in self.store.watch_failures() if f.org == org}
            # Repos the id listing shows changed, new or newly public: what the detailed listing must cover, and
            # what it does not (an older repo that went public or was renamed) gets read on its own.
            unseen: dict[str, None] = {}
            # Recorded repos the id listing no longer shows publicly: renamed away, deleted or made private.
            vanished: list[str] = []
            if query is None and not baseline:
                known = self.store.known_heads(org)
                gone = self.store.gone_repo_ids(org)
                ids = self.client.list_org_ids(org)
                public = {r.repo_id for r in ids if not r.private}
                unseen = dict.fromkeys(
                    r.repo_id for r in ids
                    if not r.private and r.repo_id not in quarantined
                    and (r.sha is None or known.get(r.repo_id) != r.sha or r.repo_id in gone)
                )
                vanished = [r for r in known if r not in public and r not in gone and r not in quarantined]
                if not unseen and not vanished:
                    completed = True
                    return report

            def unreadable(entry: Unreadable) -> None:
                log.warning("%s: unreadable listing entry skipped: %s", org, entry.problem)
                if entry.repo_id is not None and entry.repo_id not in quarantined:
                    unseen.pop(entry.repo_id, None)
                    self._count_failure(org, entry.repo_id, entry.problem, report)

            stop_at = (lambda m: m.last_modified < cursor) if cursor else None
            listing: Iterator[HubModel]
            if query is None:
                listing = self.client.list_org_models(org, sort="last_modified", stop_at=stop_at,
                                                      on_unreadable=unreadable)
            else:
                listing = self.client.list_tagged_models(query, stop_at=stop_at, on_unreadable=unreadable)
                if baseline:  # the Hub's whole back catalogue of a tag is not news: its newest few will do
                    listing = itertools.islice(listing, QUERY_BASELINE)
            # Collect the changes first: a listing cut off half-way must not move the cursor past unseen models.
            changed = list(listing)
            report.listed = len(changed)
            for model in changed:
                unseen.pop(model.repo_id, None)
            pending = [
                m for m in sorted(changed, key=lambda m: (m.last_modified, m.repo_id))
                if (cursor is None or m.last_modified >= cursor) and not m.private and m.repo_id not in quarantined
                and (query is None or m.repo_id.split("/", 1)[0] not in self.orgs)
            ]
            # A repo that failed (not yet quarantined) keeps the cursor at its lastModified, so the next poll
            # lists it again; the models after it are recorded meanwhile.
            ceiling: datetime | None = None
            while pending:
                # The deadline is checked between units only: a unit cut half-way would roll back, and a unit
                # longer than the deadline would then never be recorded.
                self._check_budget(before_unit=True)
                try:
                    done = self._record_unit(org, pending, baseline=baseline, report=report, ceiling=ceiling)
                except RepoFailed as failed:
                    index = next(i for i, m in enumerate(pending) if m is failed.model)
                    if not self._count_failure(org, failed.model.repo_id, str(failed), report) and ceiling is None:
                        ceiling = failed.model.last_modified
                    pending = pending[index + 1:]
                    continue
                pending = pending[done:]
                report.processed += done
                self._units_this_poll += 1
            for repo_id in list(unseen)[:MAX_UNSEEN_READS]:
                self._check_budget(before_unit=True)
                self._record_unseen(org, repo_id, baseline=baseline, report=report)
                self._units_this_poll += 1
            # After the listing: a rename it recorded has already turned the old id into an alias.
            for repo_id in vanished[:MAX_UNSEEN_READS]:
                self._check_budget(before_unit=True)
                self._record_vanished(org, repo_id, report=report)
                self._units_this_poll += 1
            completed = True
        except (HubError, PollCut) as exc:
            report.error = str(exc)
            report.unreachable = isinstance(exc, HubUnreachable)
            report.cut = isinstance(exc, (PollCut, BudgetExhausted))
            report.stop_poll = isinstance(exc, (RateLimited, InvalidToken))
            report.retry_after = exc.retry_after + 1.0 if isinstance(exc, RateLimited) else None
            # The cache may hold drafters of the unit that just rolled back.
            self._drafted_cache = None
            log.warning("poll of %s stopped: %s", org, exc)
        finally:
            error = report.error
            if error is None and report.failed:
                error = f"{len(report.failed)} repo(s) failed: {', '.join(report.failed[:5])}"
            self._release(org, error, completed)
        return report

    def _count_failure(self, org: str, repo_id: str, message: str, report: OrgReport) -> bool:
        """Log and count one repo's failure; True when it is now quarantined (skipped for a while)."""
        self._drafted_cache = None  # may hold what just rolled back
        record = self.store.record_watch_failure(repo_id, org, message, quarantine_after=QUARANTINE_AFTER,
                                                 quarantine_s=QUARANTINE_S)
        report.failed.append(repo_id)
        quarantined = record.retry_at is not None
        if quarantined:
            report.quarantined.append(repo_id)
        log.warning("%s (failure %d%s)", message, record.failures,
                    f"; quarantined until {record.retry_at:%Y-%m-%d %H:%M} UTC" if record.retry_at else "")
        return quarantined

    def _record_unseen(self, org: str, repo_id: str, *, baseline: bool, report: OrgReport) -> None:
        """A repo that changed without appearing in the detailed listing: read its head on its own."""
        try:
            revision = self.client.revision(repo_id)
        except (hub.RepoNotFound, hub.GatedRepo):
            return  # gone, or private again, since the id listing
        except SYSTEMIC:
            raise
        except HubError as exc:
            self._count_failure(org, repo_id, f"{repo_id}: {exc}", report)
            return
        model = revision.as_model()
        if model.private:
            return
        try:
            with self.store.unit():
                self._process_listed(model, baseline=baseline)
        except (PollCut, *SYSTEMIC):
            self._drafted_cache = None
            raise
        except Exception as exc:  # noqa: BLE001 - one repo's failure is that repo's
            self._count_failure(org, repo_id, str(RepoFailed(model, exc)), report)
            return
        self._succeeded(model.repo_id)
        report.processed += 1

    def _record_vanished(self, org: str, repo_id: str, *, report: OrgReport) -> None:
        """A recorded repo missing from the org's public id listing: its old id redirects when it was renamed or
        transferred (then it stays one checkpoint or drafter); otherwise it is marked gone, history kept."""
        if self._recorded_id(repo_id) != repo_id:
            return  # renamed earlier in this poll: the old id is an alias now
        try:
            revision = self.client.revision(repo_id)
        except hub.RepoNotFound:
            revision = None
        except SYSTEMIC:
            raise
        except HubError as exc:
            self._count_failure(org, repo_id, f"{repo_id}: {exc}", report)
            return
        try:
            with self.store.unit():
                if revision is None or revision.private:
                    self._mark_gone(repo_id, "no longer public on the Hub (deleted or made private)")
                    return
                model = revision.as_model()
                if model.repo_id != repo_id:
                    self._rename(repo_id, model.repo_id)
                self._process_listed(model, baseline=False)
        except (PollCut, *SYSTEMIC):
            self._drafted_cache = None
            raise
        except Exception as exc:  # noqa: BLE001 - one repo's failure is that repo's
            self._count_failure(org, repo_id, f"{repo_id}: {type(exc).__name__}: {exc}", report)

    def _recorded_id(self, repo_id: str) -> str | None:
        """The id the registry records `repo_id` under now (aliases followed), or None when it is not recorded."""
        record = self.store.get_checkpoint(repo_id) or self.store.get_drafter(repo_id)
        return record.repo_id if record is not None else None

    def _mark_gone(self, repo_id: str, why: str) -> None:
        """The repo is no longer on the Hub (for us): say so on its record, keep its revisions and verdicts, and
        announce nothing; if it comes back, the next read of it sets it ok again."""
        detail = f"{why}; last seen {utcnow():%Y-%m-%d}"
        if self.store.get_checkpoint(repo_id) is not None:
            self.store.set_checkpoint_status(repo_id, "gone", detail)
        elif self.store.get_drafter(repo_id) is not None:
            self.store.set_drafter_status(repo_id, "gone", detail)
        else:
            return
        log.info("%s: %s", repo_id, why)

    def _rename(self, old: str, new: str) -> None:
        """Keep one record across a move on the Hub: the checkpoint or drafter takes the new id."""
        if self.store.get_drafter(old) is not None:
            self.store.rename_drafter(old, new)
        else:
            self.store.rename_checkpoint(old, new)
        self._drafted_cache = None
        log.info("%s was renamed to %s", old, new)

    def _succeeded(self, repo_id: str) -> None:
        if repo_id in self._failing:
            self.store.clear_watch_failure(repo_id)
            self._failing.discard(repo_id)

    def _process_listed(self, model: HubModel, *, baseline: bool) -> None:
        """Process a listed model; a listing sha the Hub no longer has (it lags a force-push) is re-read from
        refs and tried once more, never stored as a missing revision."""
        try:
            self.process_model(model, baseline=baseline)
        except hub.RevisionNotFound:
            head = self.client.head_sha(model.repo_id)
            if head == model.sha:
                raise
            log.info("%s: listed sha %s is gone; main is now %s", model.repo_id, model.sha[:12], head[:12])
            self.process_model(replace(model, sha=head), baseline=baseline)

    def _record_unit(self, org: str, pending: list[HubModel], *, baseline: bool, report: OrgReport,
                     ceiling: datetime | None = None) -> int:
        """Record the next models of `pending` as one unit, cursor included; returns how many.

        Models that cost no Hub request (most of a big org's first poll: recorded from the listing alone) share a
        unit, up to UNIT_BATCH of them, as one commit each would dominate the poll. A model that reads the Hub
        closes its unit, so a later failure never throws those reads away; if it fails, the models before it
        are recorded on their own before the error goes up (as RepoFailed when the repo itself is at fault), so
        the next poll starts at the failed one.
        """
        cheap = 0
        current = pending[0]
        try:
            with self.store.unit():
                done = 0
                for model in pending[:UNIT_BATCH]:
                    current = model
                    requests_before = self.client.request_count
                    self._process_listed(model, baseline=baseline)
                    done += 1
                    if self.client.request_count != requests_before:
                        break
                    cheap = done
                self._advance_cursor(org, _capped(pending[done - 1].last_modified, ceiling))
            for model in pending[:done]:
                self._succeeded(model.repo_id)
            return done
        except Exception as exc:
            if cheap:
                self._drafted_cache = None  # may hold what just rolled back
                with self.store.unit():
                    for model in pending[:cheap]:
                        self.process_model(model, baseline=baseline)  # reads nothing from the Hub, as before
                    self._advance_cursor(org, _capped(pending[cheap - 1].last_modified, ceiling))
                report.processed += cheap
                self._units_this_poll += 1
            if isinstance(exc, (PollCut, *SYSTEMIC)):
                raise
            raise RepoFailed(current, exc) from exc

    def poll_repo(self, repo_id: str, head_sha: str | None = None, *, moved_from: str | None = None) -> None:
        """A push hint (Hub webhook) for one repo: read it now, as the listing would.

        With the pushed `head_sha` that commit is read (not main, which may have moved on again), and a hint
        older than the recorded head (a late or repeated delivery) changes nothing. A repo the Hub no longer
        shows (deleted, or private) is marked gone if recorded and otherwise left alone; `moved_from` (a move)
        keeps one record under the new id."""
        try:
            try:
                revision = self.client.revision(repo_id, head_sha)
            except hub.RevisionNotFound:
                revision = self.client.revision(repo_id)  # force-pushed away since: main is what there is
        except hub.RepoNotFound:
            revision = None
        if revision is None or revision.private:
            with self.store.unit():
                self._mark_gone(repo_id, "no longer public on the Hub (deleted or made private)")
            return
        model = revision.as_model()
        with self.store.unit():
            if moved_from is not None and self._recorded_id(moved_from) == moved_from \
                    and self._recorded_id(model.repo_id) is None and self._canonical(moved_from) == model.repo_id:
                self._rename(moved_from, model.repo_id)
            if head_sha is not None and self._older_than_head(model):
                log.info("%s: hint for %s is older than the recorded head; ignored", model.repo_id, model.sha[:12])
                return
            self._process_listed(model, baseline=False)

    def _canonical(self, repo_id: str) -> str | None:
        """Where the Hub sends a read of `repo_id` (its new id after a move), or None when it has no such repo."""
        try:
            return self.client.revision(repo_id).repo_id
        except hub.RepoNotFound:
            return None

    def _older_than_head(self, model: HubModel) -> bool:
        head = self.store.head_revision(model.repo_id) or self.store.drafter_head_revision(model.repo_id)
        if head is None or head.sha == model.sha:
            return False
        if self._recorded_sha(model.repo_id, model.sha):
            return True  # an earlier head of this repo
        return head.last_modified is not None and aware(head.last_modified) > model.last_modified

    def _recorded_sha(self, repo_id: str, sha: str) -> bool:
        revisions = self.store.revisions(repo_id) or self.store.drafter_revisions(repo_id)
        return any(r.sha == sha for r in revisions)

    # ---- one model ----------------------------------------------------------------------------

    def process_model(self, model: HubModel, *, baseline: bool) -> None:
        self._drafted()
        if model.repo_id in self._drafter_ids or _looks_like_drafter(model):
            self._process_drafter(model, baseline=baseline)
        else:
            self._process_checkpoint(model, baseline=baseline)

    def _event(self, type_: str, subject: str, key: str, message: str, **payload: object) -> None:
        parsed = names.parse_repo_id(subject)
        self.store.record_event(
            EventSpec(
                type=type_,
                subject=subject,
                dedupe_key=key,
                payload={"message": message, **payload},
                org=parsed.org,
                family=parsed.family,
            )
        )

    def _revision_spec(self, repo_id: str, sha: str, last_modified: datetime | None, *,
                       with_tokenizer: bool) -> RevisionSpec:
        """Read a repo at a pinned sha. A gated or missing repo becomes a revision with its problem recorded."""
        try:
            revision = self.client.revision(repo_id, sha)
            listed = {f.path: f for f in revision.files}
            # Listed sizes first: nothing big or stored in LFS is downloaded, and an absent file costs no request.
            config_file = listed.get("config.json")
            config_raw = (self.client.download(repo_id, "config.json", sha)
                          if config_file is not None and self.client.fits_download(config_file) else None)
        except hub.GatedRepo as exc:
            return RevisionSpec(sha=sha, last_modified=last_modified, config_problem=f"gated: {exc}")
        except hub.RepoNotFound as exc:
            return RevisionSpec(sha=sha, last_modified=last_modified, config_problem=f"missing: {exc}")
        # RevisionNotFound goes up: a listed sha the Hub no longer has is re-read, never stored as missing.
        tokenizer = None
        if with_tokenizer:
            files = {name: self.client.download(repo_id, name, sha) for name in TOKENIZER_FILES
                     if name in listed and self.client.fits_download(listed[name])}
            try:
                tokenizer = configs.tokenizer_digest({k: v for k, v in files.items() if v is not None}) or None
            except configs.ConfigError:
                tokenizer = None
        return RevisionSpec(
            sha=sha,
            config_raw=config_raw,
            config_problem=None if config_raw is not None else (
                "no config.json in the repo" if config_file is None else "config.json too large to read"),
            last_modified=last_modified or revision.last_modified,
            tokenizer_digest=tokenizer,
            weight_bytes=sum(f.size or 0 for f in revision.files if hub.is_weight_file(f.path)) or None,
            weight_digest=hub.weight_digest(revision.files),
            parameter_count=revision.parameters,
        )

    def _drafted(self) -> dict[str, list[str]]:
        """Target repo id -> drafters declaring it; cached for a poll, dropped whenever a drafter changes."""
        if self._drafted_cache is None:
            drafted: dict[str, list[str]] = {}
            stems: list[tuple[str, str, bool]] = []
            drafters = self.store.drafters()
            for drafter in drafters:
                for target, _ in drafter.targets:
                    drafted.setdefault(self.store.canonical_repo_id(target), []).append(drafter.repo_id)
                stem = names.drafter_target_stem(drafter.repo_id)
                if stem is not None:
                    stems.append((drafter.repo_id, names.name_key(stem), bool(drafter.targets)))
            self._drafted_cache = drafted
            self._stems = stems
            self._drafter_ids = frozenset(d.repo_id for d in drafters)
        return self._drafted_cache

    def _interesting(self, model: HubModel) -> bool:
        """Checkpoints worth a config read: declared targets, their derivatives, successors of drafted ones."""
        drafted = self._drafted()
        if model.repo_id in drafted or set(model.base_models) & set(drafted):
            return True
        if self._name_matched_drafters(model.repo_id):
            return True
        return bool(self._predecessors(model.repo_id))

    def _name_matched_drafters(self, repo_id: str, *, without_targets_only: bool = False) -> list[str]:
        self._drafted()
        key = names.name_key(repo_id.split("/", 1)[1])
        return [d for d, stem_key, has_targets in self._stems
                if stem_key == key and not (without_targets_only and has_targets)]

    def _predecessors(self, repo_id: str) -> list[tuple[str, tuple[str, ...]]]:
        """Checkpoints this one succeeds that have drafters: same size first, else the previous generation."""
        new = names.parse_repo_id(repo_id)
        same_size, same_line = [], []
        for target, drafters in sorted(self._drafted().items()):
            if target == repo_id:
                continue
            old = names.parse_repo_id(target)
            if names.is_successor(old, new):
                same_size.append((target, tuple(sorted(drafters))))
            elif names.is_newer_generation(old, new):
                same_line.append((target, tuple(sorted(drafters))))
        return same_size or same_line

    def _process_checkpoint(self, model: HubModel, *, baseline: bool) -> None:
        known = self.store.get_checkpoint(model.repo_id)
        if known is None:
            renamed_from = self._renamed_from(model, drafter=False)
            if renamed_from is not None:
                self._rename(renamed_from, model.repo_id)
                known = self.store.get_checkpoint(model.repo_id)
        unread = known is not None and self.store.needs_details(model.repo_id)
        back = known is not None and known.status == "gone"  # deleted or private once, public again now
        if known is not None and known.head_sha == model.sha and not unread and not back:
            return
        # From here on this sha is a recorded head of the org (a rolled-back unit leaves it here: harmless, a
        # rename check then asks the database).
        self._head_shas.get(model.repo_id.split("/", 1)[0], set()).add(model.sha)
        if (known is None or unread) and not self._interesting(model):
            # Outside every drafted line: remember it exists, read its config only when it becomes relevant.
            light = RevisionSpec(sha=model.sha, last_modified=model.last_modified)
            if known is None:
                self.store.add_listed_checkpoint(self._checkpoint_spec(model), light)
            else:
                self.store.upsert_checkpoint(self._checkpoint_spec(model))
                self.store.add_checkpoint_revision(model.repo_id, light)
                if back:
                    self.store.set_checkpoint_status(model.repo_id, "ok")
            if not baseline and known is None:
                self._new_checkpoint_event(model)
            return
        previous = self.store.head_revision(model.repo_id) if known else None
        spec = self._revision_spec(model.repo_id, model.sha, model.last_modified, with_tokenizer=True)
        self.store.upsert_checkpoint(self._checkpoint_spec(model))
        self._set_checkpoint_status(model.repo_id, spec)
        revision, created = self.store.add_checkpoint_revision(model.repo_id, spec)
        self._attach_name_matched(model.repo_id)
        verdicts = self.store.recompute_compatibility(checkpoint_repo_id=model.repo_id)
        if baseline:
            return
        if known is None:
            self._new_checkpoint_event(model)
            # A pretrained `-Base` parent is not what drafters are trained for: its instruct release is the upgrade.
            pretrained = names.parse_repo_id(model.repo_id).variant == "base"
            predecessors = self._predecessors(model.repo_id) if _kind(model) == "base" and not pretrained else []
            if predecessors:
                names_ = [p for p, _ in predecessors]
                drafters = sorted({d for _, ds in predecessors for d in ds})
                self._event(
                    "base_upgrade",
                    model.repo_id,
                    f"base_upgrade:{model.repo_id}",
                    f"{model.repo_id} succeeds {', '.join(names_)}, which have drafters ({', '.join(drafters)}); "
                    "none declared for the successor yet",
                    predecessors=names_,
                    predecessor_drafters=drafters,
                )
        elif created and previous is not None and self._weights_changed(previous.weight_digest, revision.weight_digest):
            self._event(
                "weights_changed",
                model.repo_id,
                f"weights_changed:{model.repo_id}:{model.sha}",
                f"{model.repo_id} weights replaced in place ({previous.sha[:8]} -> {model.sha[:8]})",
                old_sha=previous.sha,
                new_sha=model.sha,
            )
        self._notify_pairs(verdicts)

    def _set_checkpoint_status(self, repo_id: str, spec: RevisionSpec) -> None:
        gated = (spec.config_problem or "").startswith("gated")
        self.store.set_checkpoint_status(repo_id, "gated" if gated else "ok", spec.config_problem if gated else None)

    @staticmethod
    def _weights_changed(old: str | None, new: str | None) -> bool:
        return old is not None and new is not None and old != new

    def _new_checkpoint_event(self, model: HubModel) -> None:
        kind = _kind(model)
        self._event(
            "new_checkpoint",
            model.repo_id,
            f"new_checkpoint:{model.repo_id}",
            f"new {kind} checkpoint {model.repo_id}",
            kind=kind,
            bases=list(model.base_models),
        )

    def _renamed_from(self, model: HubModel, *, drafter: bool) -> str | None:
        """A listed repo we don't know whose sha we do know under another id (a checkpoint's or, with `drafter`,
        a drafter's) may be that repo, renamed."""
        org = model.repo_id.split("/", 1)[0]
        if org not in self._head_shas:
            with self.store.session() as session:
                self._head_shas[org] = set(session.scalars(select(Checkpoint.head_sha).where(Checkpoint.org == org)))
                self._head_shas[org] |= set(session.scalars(
                    select(Drafter.head_sha).where(Drafter.repo_id.startswith(f"{org}/", autoescape=True))))
        if model.sha not in self._head_shas[org]:
            return None
        records = self.store.drafters_with_head(model.sha) if drafter else self.store.checkpoints_with_head(model.sha)
        for record in records:
            if record.repo_id.split("/", 1)[0] != org or record.repo_id == model.repo_id:
                continue
            if self._canonical(record.repo_id) == model.repo_id:
                return record.repo_id
            # Gone or elsewhere, not moved here; any other failure stops the unit, so a rerun asks again.
        return None

    def _checkpoint_spec(self, model: HubModel) -> CheckpointSpec:
        return CheckpointSpec(
            repo_id=model.repo_id,
            source="hub",
            kind=_kind(model),
            created_at_hub=model.created_at,
            gated=bool(model.gated),
            bases=tuple((base, model.base_model_relation or "unknown") for base in model.base_models),
        )

    def _attach_name_matched(self, checkpoint_repo_id: str) -> None:
        """Drafters whose repo name implies this checkpoint, and that declare no target yet, now declare it."""
        for drafter_repo_id in self._name_matched_drafters(checkpoint_repo_id, without_targets_only=True):
            drafter = self.store.get_drafter(drafter_repo_id)
            if drafter is not None and not drafter.targets:
                self.store.upsert_drafter(
                    DrafterSpec(
                        repo_id=drafter.repo_id,
                        method=drafter.method,
                        publisher=drafter.publisher,
                        source=drafter.source,
                        targets=((checkpoint_repo_id, "name_convention"),),
                    )
                )
                self._drafted_cache = None

    def _complete_targets(self, drafter_repo_id: str) -> None:
        """Targets (and their derivatives) recorded from a listing only get their config and tokenizer read once
        a drafter names them."""
        drafter = self.store.get_drafter(drafter_repo_id)
        targets = [t for t, _ in drafter.targets] if drafter else []
        related = targets + [d.repo_id for t in targets for d in self.store.derivatives(t)]
        for repo_id in dict.fromkeys(related):
            if self.store.get_checkpoint(repo_id) is not None and self.store.needs_details(repo_id):
                head = self.store.head_revision(repo_id)
                try:
                    spec = self._revision_spec(head.repo_id, head.sha, head.last_modified, with_tokenizer=True)
                except hub.RevisionNotFound:
                    continue  # its recorded head was force-pushed away: the target's own listing updates it
                # A target first read here (say, gated) gets the same status as one read from the listing.
                self._set_checkpoint_status(head.repo_id, spec)
                self.store.add_checkpoint_revision(head.repo_id, spec)
                self.store.recompute_compatibility(checkpoint_repo_id=head.repo_id)

    def _declared_targets(self, model: HubModel, config: dict | None) -> tuple[tuple[str, str], ...]:
        targets: list[tuple[str, str]] = []
        if config is not None:
            facts = configs.drafter_facts(config)
            if facts.verifier_name:
                targets.append((facts.verifier_name, "speculators_verifier"))
        for base in model.base_models:
            targets.append((base, "card_base_model"))
        if not targets:
            stem = names.drafter_target_stem(model.repo_id)
            if stem is not None:
                key = names.name_key(stem)
                for checkpoint in self.store.checkpoints():
                    if names.name_key(checkpoint.repo_id.split("/", 1)[1]) == key:
                        targets.append((checkpoint.repo_id, "name_convention"))
        return tuple(dict.fromkeys(targets))

    def _exact_targets(self) -> set[str]:
        return {v.checkpoint_repo_id for v in self.store.verdicts() if v.verdict == "exact"}

    def _process_drafter(self, model: HubModel, *, baseline: bool) -> None:
        known = self.store.get_drafter(model.repo_id)
        if known is None:
            renamed_from = self._renamed_from(model, drafter=True)
            if renamed_from is not None:
                self._rename(renamed_from, model.repo_id)
                known = self.store.get_drafter(model.repo_id)
        # Known only from the catalog (its "catalog" revision, or the sha it names): never read from the Hub.
        unread = known is not None and all(r.last_modified is None for r in self.store.drafter_revisions(model.repo_id))
        # A drafter marked gone that is listed again is read again (its status is set ok below).
        if known is not None and known.head_sha == model.sha and not unread and known.status != "gone":
            return
        previous = self.store.drafter_head_revision(model.repo_id) if known else None
        if unread and previous is not None and previous.sha not in ("catalog", model.sha):
            # The catalog named a sha the Hub has moved on from: read that one too, so that whether the weights
            # changed is judged on their digests, as for any later move.
            try:
                self.store.add_drafter_revision(
                    model.repo_id, self._revision_spec(model.repo_id, previous.sha, None, with_tokenizer=False))
                previous = self.store.drafter_head_revision(model.repo_id)
            except hub.RevisionNotFound:
                pass  # force-pushed away: nothing to compare with
        spec = self._revision_spec(model.repo_id, model.sha, model.last_modified, with_tokenizer=False)
        config = None
        if spec.config_raw is not None:
            try:
                config = configs.parse_config(spec.config_raw)
            except configs.ConfigError:
                config = None
        method = (configs.detect_method(config) if config is not None else None) or (known.method if known else None)
        if method is None:
            if spec.config_problem is None and known is None:
                # Tagged or named like a drafter but its config says an ordinary model: a checkpoint after all.
                self._process_checkpoint(model, baseline=baseline)
                return
            method = "dflash" if "dflash" in model.repo_id.lower() else "draft-lm"
        exact_before = self._exact_targets()
        first_hub_revision = known is None or unread
        self.store.upsert_drafter(
            DrafterSpec(
                repo_id=model.repo_id,
                method=method,
                publisher=model.repo_id.split("/", 1)[0],
                source="hub" if known is None else known.source,
                targets=self._declared_targets(model, config),
                released=model.created_at.date() if known is None and model.created_at else None,
                released_precision="day" if known is None and model.created_at else None,
                gated=bool(model.gated),
            )
        )
        self._drafted_cache = None
        gated = (spec.config_problem or "").startswith("gated")
        self.store.set_drafter_status(model.repo_id, "gated" if gated else "ok", spec.config_problem if gated else None)
        revision, created = self.store.add_drafter_revision(model.repo_id, spec)
        self._complete_targets(model.repo_id)
        verdicts = self.store.recompute_compatibility(drafter_repo_id=model.repo_id)
        if baseline:
            return
        if first_hub_revision:
            targets = [t for t, _ in (self.store.get_drafter(model.repo_id).targets)]
            self._event(
                "drafter_released",
                model.repo_id,
                f"drafter_released:{model.repo_id}",
                f"{method} drafter {model.repo_id} released for {', '.join(targets) or 'an unresolved target'}",
                method=method,
                targets=targets,
                verdicts={v.checkpoint_repo_id: v.verdict for v in verdicts},
            )
            for verdict in verdicts:
                if verdict.verdict == "exact" and verdict.checkpoint_repo_id not in exact_before:
                    checkpoint = self.store.get_checkpoint(verdict.checkpoint_repo_id)
                    released = (checkpoint.released or (checkpoint.created_at_hub.date() if checkpoint.created_at_hub else None)) if checkpoint else None
                    drafter_day = model.created_at.date() if model.created_at else utcnow().date()
                    days = (drafter_day - released).days if released else None
                    self._event(
                        "lag_closed",
                        verdict.checkpoint_repo_id,
                        f"lag_closed:{verdict.checkpoint_repo_id}",
                        f"{verdict.checkpoint_repo_id} got its first exact drafter {model.repo_id}"
                        + (f" after {days} days" if days is not None else ""),
                        drafter=model.repo_id,
                        lag_days=days,
                    )
        # Also on a first Hub read: the weights may differ from those of the sha the catalog named.
        if created and previous is not None and self._weights_changed(previous.weight_digest, revision.weight_digest):
            self._event(
                "weights_changed",
                model.repo_id,
                f"weights_changed:{model.repo_id}:{model.sha}",
                f"drafter {model.repo_id} weights replaced in place ({previous.sha[:8]} -> {model.sha[:8]}); "
                "earlier benchmarks no longer describe it",
                old_sha=previous.sha,
                new_sha=model.sha,
            )
        self._notify_pairs(verdicts)

    def _notify_pairs(self, verdicts: list) -> None:  # type: ignore[type-arg]
        if self.on_pair is None:
            return
        for verdict in verdicts:
            if verdict.verdict in ("exact", "structural"):
                self.on_pair(
                    verdict.drafter_repo_id,
                    verdict.drafter_sha,
                    verdict.checkpoint_repo_id,
                    verdict.checkpoint_sha,
                    verdict.verdict,
                )
