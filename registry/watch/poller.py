"""The Hub watcher: reads each watched org incrementally, records what changed, and raises events.

Each listed model is one unit of work (one transaction, cursor included), so a poll that is killed or cut off
leaves the database as it was or with whole units, and the next poll resumes where the last unit ended.

Per org, a poll reads the org's cheap id listing first (ids, head shas, visibility: one call for up to 1000 repos)
and compares it with what the registry knows. Nothing changed: done. Otherwise the detailed listing is read
newest change first down to the cursor, and repos that changed without a newer commit (a private release made
public, a rename or transfer of an older repo) are read one by one. Recorded repos the listing no longer shows
publicly are read once, before the detailed listing: a renamed one stays one checkpoint or drafter (its old id an
alias, its history kept, even when it was committed to after the move), a deleted or private one is marked gone,
its history kept and nothing announced. Private repos are never recorded or announced.
Then one id listing per drafter tag (and a detailed one when it shows something new) finds drafters of publishers
nobody watches; only drafters are recorded from them. Drafters found that way that no tag lists any more are
read once, like a watched org's vanished repos.

A failure that belongs to one repo (a malformed entry, a bad response, an unexpected error) is logged in one line
and counted; the org goes on without it, and after QUARANTINE_AFTER failures the repo is quarantined so the cursor
moves past it, to be retried later. Failures of the Hub itself (unreachable, rate limited, a refused token) stop
the org or the whole poll instead.

A poll unit is a query (queries.py: `OrgQuery` or `DrafterQuery`); `poll_org` runs one, each step a function of
its own: what changed since the last poll (`_org_changes`, `_query_changes`), the vanished repos, the detailed
listing (`_listed_changes`), staged releases, the listing recorded in units (`_record_pending`), the unseen repos.
What the poll remembers between units is one PollCache (poll_cache.py), with its one invalidation rule.

It is over 400 lines: one poll's steps (org and tag id listings, vanished and unseen repos, the detailed listing in
units, failures and quarantine) share the poll's state, and splitting them would pass that state around instead.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from registry import hub
from registry.hub import (
    BudgetExhausted,
    HubClient,
    HubError,
    HubModel,
    HubUnavailable,
    HubUnreachable,
    InvalidToken,
    ListedRepo,
    RateLimited,
    Unreadable,
)
from registry.store import Store
from registry.watch.classify import capped
from registry.watch.events import OnPair
from registry.watch.poll_cache import PollCache
from registry.watch.poll_report import NOT_POLLED, OrgReport, PollCut, PollReport, RepoFailed
# Re-exported (noqa F401): `drafters watch` and `drafters up` pass DRAFTER_QUERIES to the Watcher.
from registry.watch.queries import DRAFTER_QUERIES, drafter_queries_text  # noqa: F401
from registry.watch.queries import DrafterQuery, OrgQuery, PollQuery, poll_queries
from registry.watch.units import ModelUnits

log = logging.getLogger(__name__)

# A repo that failed this many polls in a row is skipped (the cursor moves on) for QUARANTINE_S, doubling after.
QUARANTINE_AFTER = 3
QUARANTINE_S = 6 * 3600.0
# Failures of the Hub or of the poll's budget, not of one repo: they stop the org (or the poll), never count
# against a repo.
SYSTEMIC = (HubUnavailable, RateLimited, BudgetExhausted, InvalidToken)
# Most models that need no Hub read recorded in one transaction (see Watcher._record_unit).
UNIT_BATCH = 1000
# Most repos read one by one per org and poll (changed without a newer commit); the rest wait for the next poll.
MAX_UNSEEN_READS = 50


def stable_owner(home: Path) -> str:
    """A lease owner that survives a restart of `drafters up` on the same host and home, so a restarted process
    takes its own orgs back at once instead of waiting out the dead one's leases."""
    digest = hashlib.sha256(f"{socket.gethostname()}\0{Path(home).resolve()}".encode()).hexdigest()[:12]
    return f"{socket.gethostname()[:60]}-{digest}"


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
        on_pair: OnPair | None = None,
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
        self.cache = PollCache()  # what a poll remembers between its units
        # Each model's unit of work; on_pair is called for new exact/structural pairs (see events.OnPair).
        self.units = ModelUnits(store, client, self.cache, on_pair)
        self._deadline: float | None = None
        self._units_this_poll = 0
        # The org a poll ran out of time or requests in: the next poll starts there, so that the orgs listed last
        # are not starved by a budget the first ones use up every time.
        self._resume_at: PollQuery | None = None
        self._failing: set[str] = set()  # repos of the org being polled with failures on record
        self._staged: set[str] = set()  # listed repos of the org being polled that were private until now

    # ---- the loop -----------------------------------------------------------------------------

    def poll_once(self, *, skip_if_polled_within_s: float = 0.0) -> PollReport:
        """Poll every org. With several watchers on one database, an org another one polled less than
        `skip_if_polled_within_s` ago is skipped, so each org is listed once per interval however many run."""
        started = time.monotonic()
        self._deadline = started + self.deadline_s if self.deadline_s else None
        report = PollReport()
        self.cache.new_poll()
        first_event = self.store.events.last_event_id()  # this poll's events are the ones after it
        self.client.start_budget()
        first_request = self.client.request_count
        self._units_this_poll = 0
        queries = poll_queries(self.orgs, self.drafter_queries)
        start = queries.index(self._resume_at) if self._resume_at in queries else 0
        self._resume_at = None
        for query in queries[start:] + queries[:start]:
            reason = report.unreachable or report.stopped
            if reason is not None:
                # Every org would fail the same way after its own retries: say so once, quickly.
                report.orgs.append(OrgReport(org=query.row, error=f"{NOT_POLLED}{reason}"))
                continue
            try:
                org_report = self.poll_org(query, skip_if_polled_within_s=skip_if_polled_within_s)
            except Exception as exc:  # noqa: BLE001 - the watcher outlives any one org's surprise
                log.warning("poll of %s failed unexpectedly: %s: %s", query.row, type(exc).__name__, exc)
                org_report = OrgReport(org=query.row, error=f"unexpected {type(exc).__name__}: {exc}")
            report.orgs.append(org_report)
            if org_report.cut and self._resume_at is None:
                self._resume_at = query
            if org_report.unreachable:
                report.unreachable = org_report.error
            if org_report.stop_poll:
                report.stopped = org_report.error
                report.retry_after = org_report.retry_after
                if self._resume_at is None:
                    self._resume_at = query
                if org_report.retry_after is None:
                    report.config_error = org_report.error
        report.events = self.store.events.events(after_id=first_event)
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

    # ---- one org ------------------------------------------------------------------------------

    def _acquire(self, org: str, skip_if_polled_within_s: float = 0.0) -> tuple[bool, datetime | None, bool]:
        """Take the org's lease (two watchers never poll one org at once) unless it was polled within the given
        seconds; returns (got it, cursor, baseline)."""
        lease = self.store.watch_state.acquire_org_lease(org, self.owner, self.lease_s,
                                             skip_if_polled_within_s=skip_if_polled_within_s)
        return lease.won, lease.cursor, lease.baseline

    def _check_budget(self, *, before_unit: bool = False) -> None:
        # A poll always records one unit, however short its deadline: each poll then moves the cursor on.
        if before_unit and self._units_this_poll == 0:
            return
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise PollCut("poll time budget spent")

    def poll_org(self, query: PollQuery, *, skip_if_polled_within_s: float = 0.0) -> OrgReport:
        """Poll one org, or one drafter query (a tag, `search:<word>`), under its lease."""
        org = query.row
        report = OrgReport(org=org)
        got, cursor, baseline = self._acquire(org, skip_if_polled_within_s)
        if not got:
            report.skipped_lease = True
            return report
        completed = False
        try:
            # A spent deadline costs no listing request, once this poll has recorded something (a poll always
            # gets one unit done, however loaded the machine, so that polls move on).
            self._check_budget(before_unit=True)
            quarantined, self._failing = self.store.watch_state.org_failures(org)
            if isinstance(query, OrgQuery):
                changes = self._org_changes(query, quarantined, baseline=baseline)
            else:
                changes = self._query_changes(query, cursor, quarantined, report, baseline=baseline)
            if changes is None:  # nothing changed since the last poll
                completed = True
                return report
            unseen, vanished = changes
            # Vanished repos first: one renamed and then committed to must be renamed before the listing shows
            # its new id, or it would be recorded (and announced) as a new repo and the old one lose its history.
            for repo_id in vanished[:MAX_UNSEEN_READS]:
                self._check_budget(before_unit=True)
                self._record_vanished(org, repo_id, report=report)
                self._units_this_poll += 1
            pending = self._listed_changes(query, cursor, quarantined, unseen, report)
            if isinstance(query, OrgQuery):
                self.units.prefetch(pending)  # what is recorded of them: one read for the org's listing
            self._staged = self._staged_releases(query, pending, cursor, baseline=baseline)
            self._record_pending(org, pending, report, baseline=baseline, drafters_only=query.drafters_only)
            for repo_id in list(unseen)[:MAX_UNSEEN_READS]:
                self._check_budget(before_unit=True)
                self._record_unseen(org, repo_id, baseline=baseline, report=report, drafters_only=query.drafters_only)
                self._units_this_poll += 1
            completed = True
        except (HubError, PollCut) as exc:
            # A unit it cut off rolled back, and its PollCache.unit dropped what may hold what it wrote.
            report.error = str(exc)
            report.unreachable = isinstance(exc, HubUnreachable)
            report.cut = isinstance(exc, (PollCut, BudgetExhausted))
            report.stop_poll = isinstance(exc, (RateLimited, InvalidToken))
            report.retry_after = exc.retry_after + 1.0 if isinstance(exc, RateLimited) else None
            log.warning("poll of %s stopped: %s", org, exc)
        finally:
            error = report.error
            if error is None and report.failed:
                error = f"{len(report.failed)} repo(s) failed: {', '.join(report.failed[:5])}"
            self.store.watch_state.release_org_lease(org, self.owner, error=error, completed=completed)
        return report

    def _org_changes(self, query: OrgQuery, quarantined: set[str], *,
                     baseline: bool) -> tuple[dict[str, None], list[str]] | None:
        """What the org's id listing shows changed against what the registry records: (unseen, vanished), or None
        when nothing did. Unseen: repos changed, new or newly public, which the detailed listing must cover (what
        it does not, an older repo that went public or was renamed, is read on its own). Vanished: recorded repos
        the id listing no longer shows publicly (renamed away, deleted or made private). The first poll (baseline)
        reads the whole detailed listing instead."""
        if baseline:
            return {}, []
        known, gone = self.store.reads.org_repos(query.org)
        ids = self.client.list_org_ids(query.org)
        public = {r.repo_id for r in ids if not r.private}
        unseen = dict.fromkeys(
            r.repo_id for r in ids
            if not r.private and r.repo_id not in quarantined
            and (r.sha is None or known.get(r.repo_id) != r.sha or r.repo_id in gone)
        )
        vanished = [r for r in known if r not in public and r not in gone and r not in quarantined]
        return (unseen, vanished) if unseen or vanished else None

    def _query_changes(self, query: DrafterQuery, cursor: datetime | None, quarantined: set[str], report: OrgReport,
                       *, baseline: bool) -> tuple[dict[str, None], list[str]] | None:
        """What the tag's id listing shows new outside the watched orgs (their repos are their own listings'
        business): (unseen, no vanished), or None when nothing is. Unseen: recorded drafters public again under
        the tag, whose lastModified may be older than the cursor. Once a poll, at the first query, the drafters
        no tag lists any more and the catalog drafters of unwatched orgs are read too. Without the tag's id
        listing (it failed), or at the first poll, the detailed listing is read."""
        tagged = self._tag_listing(query.query)
        self._read_untagged_drafters(query.row, report)
        self._read_catalog_drafters(query.row, report)
        if tagged is None or baseline:
            return {}, []
        outside = [r for r in tagged if not r.private and r.repo_id.split("/", 1)[0] not in self.orgs]
        gone = {d.repo_id for d in self.store.reads.drafters() if d.status == "gone"}
        unseen = dict.fromkeys(r.repo_id for r in outside if r.repo_id in gone and r.repo_id not in quarantined)
        new = [r for r in outside if cursor is None or r.last_modified is None or r.last_modified > cursor]
        return (unseen, []) if new or unseen else None

    def _listed_changes(self, query: PollQuery, cursor: datetime | None, quarantined: set[str],
                        unseen: dict[str, None], report: OrgReport) -> list[HubModel]:
        """The detailed listing, newest change first down to the cursor: the models to record, oldest change
        first. Those it lists leave `unseen`; an unreadable entry is that repo's failure."""
        org = query.row

        def unreadable(entry: Unreadable) -> None:
            log.warning("%s: unreadable listing entry skipped: %s", org, entry.problem)
            if entry.repo_id is not None and entry.repo_id not in quarantined:
                unseen.pop(entry.repo_id, None)
                self._count_failure(org, entry.repo_id, entry.problem, report)

        stop_at = (lambda m: m.last_modified < cursor) if cursor else None
        listing: Iterator[HubModel]
        if isinstance(query, OrgQuery):
            listing = self.client.list_org_models(query.org, sort="last_modified", stop_at=stop_at,
                                                  on_unreadable=unreadable)
        else:
            # The first poll reads the tag's whole back catalogue (recorded, not announced): a drafter left
            # out then would never be listed again, its lastModified being older than the cursor.
            listing = self.client.list_tagged_models(query.query, stop_at=stop_at, on_unreadable=unreadable)
        # Collect the changes first: a listing cut off half-way must not move the cursor past unseen models.
        changed = list(listing)
        report.listed = len(changed)
        for model in changed:
            unseen.pop(model.repo_id, None)
        return [
            m for m in sorted(changed, key=lambda m: (m.last_modified, m.repo_id))
            if (cursor is None or m.last_modified >= cursor) and not m.private and m.repo_id not in quarantined
            and (isinstance(query, OrgQuery) or m.repo_id.split("/", 1)[0] not in self.orgs)
        ]

    def _staged_releases(self, query: PollQuery, pending: list[HubModel], cursor: datetime | None, *,
                         baseline: bool) -> set[str]:
        """Listed repos of a watched org created before the last poll's newest change, yet never recorded: each
        was private then (every public repo of the org was recorded, through the listing or its id listing), and
        its last private commit is newer than the cursor. A staged release: released when it went public."""
        if not isinstance(query, OrgQuery) or cursor is None or baseline:
            return set()
        return {m.repo_id for m in pending
                if m.created_at is not None and m.created_at <= cursor and m.repo_id not in self._failing}

    def _record_pending(self, org: str, pending: list[HubModel], report: OrgReport, *, baseline: bool,
                        drafters_only: bool) -> None:
        """Record the listed models in units. A repo that failed (not yet quarantined) keeps the cursor at its
        lastModified, so the next poll lists it again; the models after it are recorded meanwhile."""
        ceiling: datetime | None = None
        while pending:
            # The deadline is checked between units only: a unit cut half-way would roll back, and a unit
            # longer than the deadline would then never be recorded.
            self._check_budget(before_unit=True)
            try:
                done = self._record_unit(org, pending, baseline=baseline, report=report, ceiling=ceiling,
                                         drafters_only=drafters_only)
            except RepoFailed as failed:
                index = next(i for i, m in enumerate(pending) if m is failed.model)
                if not self._count_failure(org, failed.model.repo_id, str(failed), report) and ceiling is None:
                    ceiling = failed.model.last_modified
                pending = pending[index + 1:]
                continue
            pending = pending[done:]
            report.processed += done
            self._units_this_poll += 1

    def _count_failure(self, org: str, repo_id: str, message: str, report: OrgReport) -> bool:
        """Log and count one repo's failure; True when it is now quarantined (skipped for a while)."""
        record = self.store.watch_state.record_watch_failure(repo_id, org, message, quarantine_after=QUARANTINE_AFTER,
                                                 quarantine_s=QUARANTINE_S)
        report.failed.append(repo_id)
        quarantined = record.retry_at is not None
        if quarantined:
            report.quarantined.append(repo_id)
        log.warning("%s (failure %d%s)", message, record.failures,
                    f"; quarantined until {record.retry_at:%Y-%m-%d %H:%M} UTC" if record.retry_at else "")
        return quarantined

    def _tag_listing(self, query: str) -> list[ListedRepo] | None:
        """This poll's id listing of the tag `query` (all tags are listed at the first query unit of a poll, so that
        the drafters none of them lists are known before any detailed listing); None when it failed."""
        if self.cache.tag_ids is None:
            listings: dict[str, list[ListedRepo] | None] = {}
            for tag in self.drafter_queries:
                try:
                    listings[tag] = self.client.list_tagged_ids(tag)
                except SYSTEMIC:
                    raise
                except HubError as exc:
                    log.warning("id listing of tag %s failed: %s", tag, exc)
                    listings[tag] = None
            self.cache.tag_ids = listings
        return self.cache.tag_ids.get(query)

    def _read_untagged_drafters(self, org: str, report: OrgReport) -> None:
        """Drafters found by tag outside the watched orgs that no tag lists publicly any more (deleted, renamed,
        made private, untagged) are read once, as a watched org's vanished repos are; once a poll."""
        tag_ids = self.cache.tag_ids
        if self.cache.untagged_done or tag_ids is None or any(
                tag_ids.get(tag) is None for tag in self.drafter_queries):
            return  # a tag listing failed (or was cut off): "not listed" would mean nothing this poll
        self.cache.untagged_done = True
        listed = {r.repo_id for ids in tag_ids.values() if ids for r in ids if not r.private}
        found_by_tag = [d.repo_id for d in self.store.reads.drafters()
                        if d.source == "hub" and d.status != "gone" and d.repo_id.split("/", 1)[0] not in self.orgs]
        for repo_id in [r for r in found_by_tag if r not in listed][:MAX_UNSEEN_READS]:
            self._check_budget(before_unit=True)
            self._record_vanished(org, repo_id, report=report, drafters_only=True)
            self._units_this_poll += 1

    def _read_catalog_drafters(self, org: str, report: OrgReport) -> None:
        """Catalog drafters of orgs nobody watches (DRAFTERS_WATCHED_ORGS narrower than the catalog) are checked once
        a poll: their org's id listing (one request per org) shows which are gone from public view or at another
        head, and those are read as a watched org's vanished repos are, so a deleted one stops being "ok"."""
        if self.cache.catalog_done:
            return
        self.cache.catalog_done = True
        outside: dict[str, list[tuple[str, str | None]]] = {}
        for drafter in self.store.reads.drafters():
            owner = drafter.repo_id.split("/", 1)[0]
            if drafter.source == "catalog" and drafter.status != "gone" and owner not in self.orgs:
                outside.setdefault(owner, []).append((drafter.repo_id, drafter.head_sha))
        reads = 0
        for owner, drafters in sorted(outside.items()):
            self._check_budget(before_unit=True)
            try:
                listed = {r.repo_id: r.sha for r in self.client.list_org_ids(owner) if not r.private}
            except SYSTEMIC:
                raise
            except HubError as exc:
                log.warning("id listing of %s (catalog drafters) failed: %s", owner, exc)
                continue
            for repo_id, head in drafters:
                if repo_id in listed and (listed[repo_id] is None or listed[repo_id] == head):
                    continue
                if reads >= MAX_UNSEEN_READS:
                    return  # the rest next poll
                self._record_vanished(org, repo_id, report=report, drafters_only=True)
                reads += 1
                self._units_this_poll += 1

    def _record_unseen(self, org: str, repo_id: str, *, baseline: bool, report: OrgReport,
                       drafters_only: bool = False) -> None:
        """A repo that changed without appearing in the detailed listing: read its head on its own. One never
        recorded before was private until now (a staged release made public): it is released now, not at its
        createdAt."""
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
            with self.cache.unit(self.store):
                self.units.process_listed(model, baseline=baseline, drafters_only=drafters_only, revealed=True)
        except (PollCut, *SYSTEMIC):
            raise
        except Exception as exc:  # noqa: BLE001 - one repo's failure is that repo's
            self._count_failure(org, repo_id, str(RepoFailed(model, exc)), report)
            return
        self._succeeded(model.repo_id)
        report.processed += 1

    def _record_vanished(self, org: str, repo_id: str, *, report: OrgReport, drafters_only: bool = False) -> None:
        """A recorded repo missing from the org's public id listing: its old id redirects when it was renamed or
        transferred (then it stays one checkpoint or drafter); otherwise it is marked gone, history kept."""
        if self.units.recorded_id(repo_id) != repo_id:
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
            with self.cache.unit(self.store):
                if revision is None or revision.private:
                    self.units.mark_gone(repo_id, "no longer public on the Hub (deleted or made private)")
                    return
                model = revision.as_model()
                if model.repo_id != repo_id:
                    self.units.rename(repo_id, model.repo_id)
                self.units.process_listed(model, baseline=False, drafters_only=drafters_only)
        except (PollCut, *SYSTEMIC):
            raise
        except Exception as exc:  # noqa: BLE001 - one repo's failure is that repo's
            self._count_failure(org, repo_id, f"{repo_id}: {type(exc).__name__}: {exc}", report)

    def _succeeded(self, repo_id: str) -> None:
        if repo_id in self._failing:
            self.store.watch_state.clear_watch_failure(repo_id)
            self._failing.discard(repo_id)

    def _record_unit(self, org: str, pending: list[HubModel], *, baseline: bool, report: OrgReport,
                     ceiling: datetime | None = None, drafters_only: bool = False) -> int:
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
            with self.cache.unit(self.store):
                if not drafters_only:
                    self.units.prefetch(pending[:UNIT_BATCH])  # reads only what a drafter's unit made it forget
                done = 0
                for model in pending[:UNIT_BATCH]:
                    current = model
                    requests_before = self.client.request_count
                    self.units.process_listed(model, baseline=baseline, drafters_only=drafters_only,
                                              revealed=model.repo_id in self._staged)
                    done += 1
                    if self.client.request_count != requests_before:
                        break
                    cheap = done
                self.store.watch_state.advance_cursor(org, capped(pending[done - 1].last_modified, ceiling))
            for model in pending[:done]:
                self._succeeded(model.repo_id)
            return done
        except Exception as exc:
            if cheap:
                culprit = self._record_again(org, pending[:cheap], baseline=baseline, report=report,
                                             ceiling=ceiling, drafters_only=drafters_only)
                if culprit is not None:
                    raise RepoFailed(*culprit) from culprit[1]
            if isinstance(exc, (PollCut, *SYSTEMIC)):
                raise
            raise RepoFailed(current, exc) from exc

    def _record_again(self, org: str, models: list[HubModel], *, baseline: bool, report: OrgReport,
                      ceiling: datetime | None, drafters_only: bool) -> tuple[HubModel, Exception] | None:
        """Record again, after their unit rolled back, models that read nothing from the Hub: in one unit, and
        when that fails too, one unit each up to the one at fault (their rows are written together at the unit's
        end, so the error does not say whose they were), which is returned with its error."""
        for batch in [models] + [[model] for model in models]:
            try:
                with self.cache.unit(self.store):
                    for model in batch:
                        # reads nothing from the Hub, as before
                        self.units.process_model(model, baseline=baseline, drafters_only=drafters_only,
                                                 revealed=model.repo_id in self._staged)
                    self.store.watch_state.advance_cursor(org, capped(batch[-1].last_modified, ceiling))
            except (PollCut, *SYSTEMIC):
                raise
            except Exception as exc:  # noqa: BLE001 - one repo's failure is that repo's
                if batch is models:
                    continue  # one of them is at fault: now one by one
                return batch[0], exc
            report.processed += len(batch)
            self._units_this_poll += 1
            if batch is models:
                return None
        return None

    def poll_repo(self, repo_id: str, head_sha: str | None = None, *, moved_from: str | None = None,
                  made_public: bool = False) -> None:
        """A push hint (Hub webhook) for one repo: read it now, as the listing would.

        With the pushed `head_sha` that commit is read (not main, which may have moved on again), and a hint
        older than the recorded head (a late or repeated delivery) changes nothing. A repo the Hub no longer
        shows (deleted, or private) is marked gone if recorded and otherwise left alone; `moved_from` (a move)
        keeps one record under the new id.

        A hint naming a repo this registry does not watch (its org is not watched, and it is no drafter already
        recorded from a drafter tag's listing) is ignored: the Hub sends webhooks for the watched orgs only, so
        anything else is a misconfigured or forged call, and reading it would record an unwatched org's repos and
        deliver alerts for them."""
        if not self.watches(repo_id) and not (moved_from is not None and self.watches(moved_from)):
            log.info("push hint for %s ignored: not a watched org's repo", repo_id)
            return
        self.units.apply_hint(repo_id, head_sha, moved_from=moved_from, made_public=made_public)

    def watches(self, repo_id: str) -> bool:
        """Whether a webhook about `repo_id` is this registry's business: a repo of a watched org (the Hub's org
        names are case-insensitive), or a drafter already recorded (found by a drafter tag outside the orgs)."""
        if repo_id.split("/", 1)[0].casefold() in {org.casefold() for org in self.orgs}:
            return True
        recorded = self.store.watch.recorded_repo(repo_id)
        return recorded is not None and recorded.drafter is not None
