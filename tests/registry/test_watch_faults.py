"""Hub faults during a watch poll: each poll finishes or stops cleanly, and a clean rerun converges.

Each fault test runs the standard scenario's timeline, injects one fault into the fake Hub (a real HTTP server) for
one poll, checks that poll's outcome, clears the fault and polls again, then compares the events and the whole
database with an uninterrupted run of the same timeline up to the same step.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from registry.hub import HubClient
from registry.store import Store
from registry.watch.poller import PollReport, Watcher
from tests.conftest import _create_pg_database, _drop_pg_database
from tests.fakehub.scenario import QWEN3_8B_DFLASH_CONFIG, Scenario
from tests.fakehub.server import FakeHub, RecordedRequest
from tests.fakehub.state import HubState, dflash_drafter_files, target_files, utc
from tests.registry.watch_support import Picture, make_client, picture
from tests.snapshot import snapshot

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]
DAY_0 = "day 0"  # the baseline poll, before any scenario step
FAULT_STEP = "drafter_for_qwen35_27b"
NEW_DRAFTER = r"z-lab/Qwen3\.5-27B-DFlash"
REPO_ROOT = Path(__file__).resolve().parents[2]

Reference = Callable[[str, str], Picture]


def run_timeline(
    watcher: Watcher,
    scenario: Scenario,
    *,
    until: str | None = None,
    fault_at: str | None = None,
    inject: Callable[[HubState], None] | None = None,
    check: Callable[[PollReport], None] | None = None,
    after_poll: Callable[[str], None] | None = None,
) -> None:
    """Poll on day 0 and after each scenario step up to `until`. At `fault_at`, poll once with `inject`ed faults
    first and `check` that poll's outcome, then clear the faults and poll again; every other poll must succeed."""
    for step in (DAY_0, *scenario.steps):
        if step != DAY_0:
            scenario.advance(step)
        if step == fault_at and inject is not None:
            inject(scenario.state)
            faulted = watcher.poll_once()
            if check is not None:
                check(faulted)
            scenario.state.clear_faults()
        report = watcher.poll_once()
        assert not report.errors, report.errors
        if after_poll is not None:
            after_poll(step)
        if step == until:
            break


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    """The picture after each step of an uninterrupted timeline, per database backend (computed once)."""
    pictures: dict[str, dict[str, Picture]] = {}
    created: list[str] = []

    def get(dialect: str, step: str) -> Picture:
        if dialect not in pictures:
            workdir = tmp_path_factory.mktemp(f"reference-{dialect}")
            if dialect == "sqlite":
                url = f"sqlite:///{workdir / 'reference.db'}"
            else:
                url = _create_pg_database()
                created.append(url)
            store = Store.open(url)
            scenario = Scenario.standard()
            by_step: dict[str, Picture] = {}
            with FakeHub(scenario.state) as hub:
                watcher = Watcher(store, make_client(hub.url, workdir / "hub-cache"), ORGS)
                run_timeline(watcher, scenario, after_poll=lambda step: by_step.__setitem__(step, picture(store)))
            store.engine.dispose()
            pictures[dialect] = by_step
        return pictures[dialect][step]

    yield get
    for url in created:
        _drop_pg_database(url)


def assert_converged(store: Store, reference: Reference, step: str) -> None:
    events, tables = picture(store)
    expected_events, expected_tables = reference(store.engine.dialect.name, step)
    assert events == expected_events  # no duplicate and no lost event
    assert tables == expected_tables


def failed_orgs(report: PollReport) -> dict[str, str]:
    return {o.org: o.error for o in report.orgs if o.error}


def requests_to(hub: FakeHub, path_regex: str) -> list[RecordedRequest]:
    return [r for r in hub.requests if re.search(path_regex, r.path)]


# ---- one test per fault ----------------------------------------------------------------------------------------

def finished(expected_events: list[str]) -> Callable[[PollReport], None]:
    def check(report: PollReport) -> None:
        assert not report.errors
        assert [e.type for e in report.events] == expected_events
    return check


def stopped(store: Store, org: str, message: str) -> Callable[[PollReport], None]:
    """Only `org` stopped, with `message` in its error; the other orgs were polled and nothing is half-recorded."""
    def check(report: PollReport) -> None:
        assert list(failed_orgs(report)) == [org]
        assert message in failed_orgs(report)[org]
        # Polled (an org whose id listing shows no change processes nothing, and needs not).
        assert all(not o.skipped_lease and o.error is None for o in report.orgs if o.org != org)
        # The new drafter is z-lab's: all of it or nothing, with its events.
        z_lab_finished = org != "z-lab"
        assert [e.type for e in report.events] == (["drafter_released", "lag_closed"] if z_lab_finished else [])
        assert (store.reads.get_drafter("z-lab/Qwen3.5-27B-DFlash") is not None) == z_lab_finished
        cursors = {row for row in snapshot(store.engine)["watch_cursor"] if f'"org": "{org}"' in row}
        assert len(cursors) == 1 and message in next(iter(cursors))  # the error is kept until a clean poll
    return check


def repo_failed(store: Store, org: str, repo: str, message: str) -> Callable[[PollReport], None]:
    """Only `repo` failed, with `message`; its org and every other one finished, and nothing of it is recorded."""
    def check(report: PollReport) -> None:
        assert not report.errors
        [org_report] = [o for o in report.orgs if o.org == org]
        assert org_report.failed == [repo] and org_report.quarantined == []
        assert [f.repo_id for f in store.watch_state.watch_failures()] == [repo]
        assert message in store.watch_state.watch_failures()[0].last_error
        assert store.reads.get_drafter(repo) is None and report.events == []
    return check


def rate_limited(store: Store) -> Callable[[PollReport], None]:
    """A 429 for the whole bucket beyond the wait budget stops the poll at z-lab: no other org asks the Hub (each
    would be refused too), and the poll says when to come back (the reset plus a second)."""
    def check(report: PollReport) -> None:
        errors = failed_orgs(report)
        assert "rate limited, retry after 120s" in errors["z-lab"]
        assert errors["meta-llama"] == errors["acme-labs"] == f"not polled: {errors['z-lab']}"
        assert "Qwen" not in errors and report.stopped == errors["z-lab"]
        assert report.retry_after == 121.0 and report.config_error is None
        assert store.reads.get_drafter("z-lab/Qwen3.5-27B-DFlash") is None and report.events == []
    return check


def test_429_with_retry_after_is_waited_out_and_the_poll_finishes(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache"), ORGS)
    run_timeline(
        watcher, scenario, until=FAULT_STEP, fault_at=FAULT_STEP,
        inject=lambda state: state.inject(rf"^/api/models/{NEW_DRAFTER}", "429", times=1, seconds=1),
        check=finished(["drafter_released", "lag_closed"]),
    )
    limited, retried = requests_to(hub, rf"^/api/models/{NEW_DRAFTER}")
    assert retried.path == limited.path
    assert retried.received - limited.received >= 1.0  # it waited at least as long as Retry-After said
    assert_converged(store, reference, FAULT_STEP)


def test_429_longer_than_the_client_will_wait_stops_the_org_and_a_rerun_converges(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache", max_rate_limit_wait=1.0), ORGS)
    run_timeline(
        watcher, scenario, until=FAULT_STEP, fault_at=FAULT_STEP,
        inject=lambda state: state.inject(rf"^/api/models/{NEW_DRAFTER}", "429", times=None, seconds=120),
        check=rate_limited(store),
    )
    assert len(requests_to(hub, rf"^/api/models/{NEW_DRAFTER}")) == 2  # no retry inside the poll, one in the rerun
    assert_converged(store, reference, FAULT_STEP)


def test_one_500_is_retried_and_the_poll_finishes(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache"), ORGS)
    run_timeline(
        watcher, scenario, until=FAULT_STEP, fault_at=FAULT_STEP,
        inject=lambda state: state.inject(rf"^/{NEW_DRAFTER}/resolve/", "500", times=1),
        check=finished(["drafter_released", "lag_closed"]),
    )
    assert_converged(store, reference, FAULT_STEP)


def test_persistent_503_stops_that_org_only_and_a_rerun_converges(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache"), ORGS)
    run_timeline(
        watcher, scenario, until=FAULT_STEP, fault_at=FAULT_STEP,
        inject=lambda state: state.inject(rf"^/api/models/{NEW_DRAFTER}", "503", times=None),
        check=stopped(store, "z-lab", "HTTP 503 after 3 attempt(s)"),
    )
    assert_converged(store, reference, FAULT_STEP)


def test_timeouts_beyond_the_retries_stop_that_org_and_a_rerun_converges(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache", timeout=0.5), ORGS)
    run_timeline(
        watcher, scenario, until=FAULT_STEP, fault_at=FAULT_STEP,
        inject=lambda state: state.inject(rf"^/{NEW_DRAFTER}/resolve/[0-9a-f]{{40}}/config\.json$", "timeout",
                                          times=None, seconds=1.5),
        check=stopped(store, "z-lab", "ReadTimeout after 3 attempt(s)"),
    )
    assert len(requests_to(hub, rf"^/{NEW_DRAFTER}/resolve/")) >= 3 + 2  # 3 tries, then the rerun's HEAD + GET
    assert_converged(store, reference, FAULT_STEP)


@pytest.mark.parametrize(("mode", "where"), [
    ("short", rf"^/api/models/{NEW_DRAFTER}/revision/"),  # valid HTTP, a cut JSON body
    ("full_length", r"^/api/models$"),  # the connection closes before the announced length
], ids=["model-info-cut-json", "listing-cut-connection"])
def test_truncated_json_stops_the_org_with_a_clear_error_and_a_rerun_converges(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference, mode: str, where: str
) -> None:
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache"), ORGS)
    # The listing fault hits the poll's first listing (Qwen's); the model-info one z-lab's new drafter.
    run_timeline(
        watcher, scenario, until=FAULT_STEP, fault_at=FAULT_STEP,
        inject=lambda state: state.inject(where, "truncated", times=1, mode=mode),  # type: ignore[arg-type]
        # A cut listing stops its org; a bad answer about one repo is that repo's failure: the org goes on
        # without it and the next poll tries it again.
        check=stopped(store, "Qwen", "cut short") if where.endswith("$") else repo_failed(
            store, "z-lab", "z-lab/Qwen3.5-27B-DFlash", "unexpected response"),
    )
    assert_converged(store, reference, FAULT_STEP)


def test_fault_while_checking_a_rename_is_not_taken_for_a_new_repo(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    """The old id of a renamed repo is asked where it went; a 503 there is no answer, not 'it was not moved'."""
    def check(report: PollReport) -> None:
        assert list(failed_orgs(report)) == ["meta-llama"] and report.events == []
        assert store.reads.get_checkpoint("meta-llama/Llama-3.1-8B-Instruct") is None

    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache"), ORGS)
    run_timeline(
        watcher, scenario, until="repo_renamed", fault_at="repo_renamed",
        inject=lambda state: state.inject(r"^/api/models/meta-llama/Meta-Llama-3\.1-8B-Instruct$", "503",
                                          times=None),
        check=check,
    )
    assert_converged(store, reference, "repo_renamed")


# ---- content the watcher cannot read ---------------------------------------------------------------------------

def test_malformed_config_gives_an_unknown_verdict_with_the_reason_and_the_poll_goes_on(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    broken = "acme-labs/Qwen3-8B-Broken-FT"
    truncated_config = (REPO_ROOT / "tests/data/configs/bad_truncated.json").read_bytes()

    def publish_broken(state: HubState) -> None:
        files = target_files({"model_type": "qwen3"}, weight_seed=9,
                             card_data={"license": "apache-2.0", "base_model": "Qwen/Qwen3-8B"})
        state.add_repo(broken, files={**files, "config.json": truncated_config}, date=utc(2026, 3, 14, 12),
                       library_name="transformers", pipeline_tag="text-generation")

    def check(report: PollReport) -> None:
        assert not report.errors
        assert [e.type for e in report.events] == ["drafter_released", "lag_closed", "new_checkpoint"]
        head = store.reads.head_revision(broken)
        assert head is not None and head.config is None and head.config_problem
        [verdict] = store.reads.verdicts(checkpoint_repo_id=broken)
        assert (verdict.drafter_repo_id, verdict.verdict) == ("z-lab/Qwen3-8B-DFlash-b16", "unknown")
        assert any(head.config_problem in reason for reason in verdict.reasons), verdict.reasons

    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache"), ORGS)
    run_timeline(watcher, scenario, until=FAULT_STEP, fault_at=FAULT_STEP, inject=publish_broken, check=check)

    # Everything else is as without the broken repo: its rows are extra, nothing is missing or changed.
    events, tables = picture(store)
    expected_events, expected_tables = reference(store.engine.dialect.name, FAULT_STEP)
    assert events == [*expected_events, ("new_checkpoint", broken, f"new_checkpoint:{broken}", "acme-labs",
                                         events[-1][4], events[-1][5])]
    missing = {t: sum((Counter(expected_tables[t]) - Counter(tables[t])).values()) for t in tables}
    extra = {t: sum((Counter(tables[t]) - Counter(expected_tables[t])).values()) for t in tables}
    # The broken repo is acme-labs' newest, so that org's cursor row moved on: one row replaced.
    assert {t: n for t, n in missing.items() if n} == {"watch_cursor": 1}
    assert {t: n for t, n in extra.items() if n} == {
        "checkpoint": 1, "checkpoint_base": 1, "checkpoint_revision": 1, "compatibility": 1, "event": 1,
        "watch_cursor": 1}


def test_gated_target_is_recorded_as_unknown_and_the_poll_goes_on(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    """A drafter names the gated Llama: its config cannot be read without access, so the verdict is unknown."""
    gated = "meta-llama/Meta-Llama-3.1-8B-Instruct"
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache"), ORGS)
    run_timeline(watcher, scenario, until=DAY_0)
    drafter = "z-lab/Llama-3.1-8B-Instruct-DFlash"
    scenario.state.add_repo(
        drafter, files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 31), date=utc(2026, 1, 6),
        card_data={"license": "mit", "base_model": gated}, tags=("dflash",), library_name="transformers",
    )
    report = watcher.poll_once()
    assert not report.errors
    assert [e.type for e in report.events] == ["drafter_released"]
    checkpoint = store.reads.get_checkpoint(gated)
    assert checkpoint is not None and checkpoint.status == "gated" and checkpoint.status_detail
    [verdict] = store.reads.verdicts(checkpoint_repo_id=gated)
    assert (verdict.drafter_repo_id, verdict.verdict) == (drafter, "unknown")
    assert any("gated" in reason for reason in verdict.reasons), verdict.reasons
    # acme-labs, after the gated one, was polled too
    assert all(o.error is None and not o.skipped_lease for o in report.orgs)
    assert store.reads.get_drafter("z-lab/Kimi-K2.6-DFlash").status == "gated"  # a gated drafter, from day 0


# ---- an unreachable Hub, a request budget, a deadline ----------------------------------------------------------

def test_unreachable_hub_stops_the_poll_after_the_first_org(store: Store, tmp_path: Path) -> None:
    with FakeHub(HubState()) as gone:
        closed_port_url = gone.url
    # The production defaults for retries and backoff: what `drafters up` gets.
    client = HubClient(closed_port_url, None, tmp_path / "cache", timeout=5.0)
    report = Watcher(store, client, ORGS).poll_once()
    assert report.unreachable is not None and "Hub unreachable (ConnectError" in report.unreachable
    assert report.orgs[0].error == report.unreachable
    assert [o.error for o in report.orgs[1:]] == [f"not polled: {report.unreachable}"] * 3
    # Bounded: one request and its connect retries in all, about backoff_base * 3 seconds of waiting.
    assert report.requests == client.max_connect_retries + 1 < client.max_retries + 1
    assert store.events.events() == []


def test_request_budget_cuts_polls_that_resume_and_end_in_the_same_state(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    budget = 8
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache", max_requests=budget), ORGS)
    cut = polls_until_clean(watcher, scenario, "request budget of 8 spent", lambda r: r.requests <= budget)
    assert cut >= 2  # the day-0 baseline alone needs 40 requests
    assert_converged(store, reference, FAULT_STEP)


def test_deadline_cuts_polls_that_resume_and_end_in_the_same_state(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, reference: Reference
) -> None:
    scenario.state.inject(r".", "slow", times=None, seconds=0.05)  # every answer takes a while
    watcher = Watcher(store, make_client(hub.url, tmp_path / "cache"), ORGS, deadline_s=0.3)
    cut = polls_until_clean(watcher, scenario, "poll time budget spent", lambda r: True)
    assert cut >= 2  # the day-0 baseline alone needs 40 requests of 0.05 s
    assert_converged(store, reference, FAULT_STEP)


def polls_until_clean(
    watcher: Watcher, scenario: Scenario, cut_message: str, within_budget: Callable[[PollReport], bool]
) -> int:
    """Poll day 0 and each step through FAULT_STEP until a poll has no error; returns how many polls were cut.
    Every cut poll must record at least one whole unit, or the next one could not continue where it stopped."""
    cut = 0
    for step in (DAY_0, *list(scenario.steps)[: list(scenario.steps).index(FAULT_STEP) + 1]):
        if step != DAY_0:
            scenario.advance(step)
        for _ in range(60):
            report = watcher.poll_once()
            assert within_budget(report)
            if not report.errors:
                break
            cut += 1
            assert all(cut_message in error for error in report.errors), report.errors
            assert sum(o.processed for o in report.orgs) >= 1
        else:
            pytest.fail(f"polls after {step} never finished")
    return cut
