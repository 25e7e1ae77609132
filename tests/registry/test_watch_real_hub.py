"""The watcher against a fake Hub that behaves like the real one (issue 12): releases that appear without a commit,
private repos seen by a member token, -Base parents, stale listing shas, whole-bucket rate limits, refused tokens,
drafters from publishers nobody watches, and repos that fail on their own."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from registry.hub import HubClient
from registry.store import Store
from registry.watch.poller import DRAFTER_QUERIES, QUARANTINE_AFTER, Watcher
from tests.fakehub.scenario import QWEN3_8B_DFLASH_CONFIG, QWEN36_27B_CONFIG, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import dflash_drafter_files, target_files, utc

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]
MEMBER = "hf_qwenMEMBERtoken0123456789abcdef"
QWEN_CARD = {"library_name": "transformers", "license": "apache-2.0", "pipeline_tag": "text-generation"}


def make_watcher(store: Store, hub: FakeHub, tmp_path: Path, token: str | None = None,
                 **kwargs) -> Watcher:  # type: ignore[no-untyped-def]
    client = HubClient(hub.url, token, tmp_path / "hub-cache", timeout=5.0, max_retries=2, backoff_base=0.01,
                       backoff_cap=0.05, max_rate_limit_wait=2.0)
    return Watcher(store, client, ORGS, **kwargs)


def events(store: Store) -> list[tuple[str, str]]:
    return [(e.type, e.subject) for e in store.events.events()]


def recorded_ids(store: Store) -> set[str]:
    return {c.repo_id for c in store.reads.checkpoints()} | {d.repo_id for d in store.reads.drafters()}


def stage_qwen37(scenario: Scenario) -> None:
    """Qwen stages its next release privately, its card naming its own -Base parent; its last commit is older
    than the org's newest one (Qwen3.5-27B's), so only the id listing can see it go public."""
    scenario.state.add_repo(
        "Qwen/Qwen3.7-27B", created_at=utc(2026, 2, 1), date=utc(2026, 2, 2),
        files=target_files(QWEN36_27B_CONFIG, weight_seed=3727, card_data={
            **QWEN_CARD, "base_model": "Qwen/Qwen3.7-27B-Base"}),
        pipeline_tag="text-generation", library_name="transformers", private=True,
    )
    scenario.state.add_repo(
        "Qwen/Qwen3.7-27B-Base", created_at=utc(2026, 2, 1), date=utc(2026, 2, 1, 12),
        files=target_files(QWEN36_27B_CONFIG, weight_seed=3728, card_data=QWEN_CARD),
        pipeline_tag="text-generation", library_name="transformers", private=True,
    )


def test_staged_private_release_flipped_public_is_a_base_upgrade_on_the_next_poll(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    scenario.state.add_member("Qwen", MEMBER)
    watcher = make_watcher(store, hub, tmp_path, token=MEMBER)
    watcher.poll_once()
    scenario.advance("qwen35_27b_appears")
    scenario.advance("drafter_for_qwen35_27b")
    watcher.poll_once()
    before = len(store.events.events())

    stage_qwen37(scenario)
    staged = watcher.poll_once()
    assert not staged.errors
    assert "Qwen/Qwen3.7-27B" not in recorded_ids(store) and len(store.events.events()) == before
    # The member token did see it: the listing answered with it, marked private.
    assert any(r.authorization == f"Bearer {MEMBER}" for r in hub.requests)

    scenario.state.set_private("Qwen/Qwen3.7-27B-Base", False)
    scenario.state.set_private("Qwen/Qwen3.7-27B", False)
    flipped = watcher.poll_once()
    assert not flipped.errors
    # The pretrained parent is news, but not an upgrade drafters wait for; its instruct release is.
    assert events(store)[before:] == [("new_checkpoint", "Qwen/Qwen3.7-27B"), ("base_upgrade", "Qwen/Qwen3.7-27B"),
                                      ("new_checkpoint", "Qwen/Qwen3.7-27B-Base")]
    [upgrade] = [e for e in store.events.events() if e.type == "base_upgrade" and e.subject == "Qwen/Qwen3.7-27B"]
    assert upgrade.payload["predecessors"] == ["Qwen/Qwen3.5-27B"]
    assert upgrade.payload["predecessor_drafters"] == ["z-lab/Qwen3.5-27B-DFlash"]
    assert store.reads.get_checkpoint("Qwen/Qwen3.7-27B").kind == "base"  # a finetune of its own -Base is the release

    hub.clear_requests()
    quiet = watcher.poll_once()
    assert quiet.events == [] and len(hub.requests) == len(ORGS)  # nothing new: one id listing per org


def test_a_member_token_never_leaks_a_private_repo(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    state = scenario.state
    state.add_member("Qwen", MEMBER)
    state.add_member("z-lab", MEMBER)
    watcher = make_watcher(store, hub, tmp_path, token=MEMBER, drafter_queries=DRAFTER_QUERIES)
    watcher.poll_once()
    stage_qwen37(scenario)
    state.add_repo("z-lab/Qwen3.7-27B-DFlash", created_at=utc(2026, 2, 3), date=utc(2026, 2, 3, 1),
                   files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 37, target_repo="Qwen/Qwen3.7-27B"),
                   tags=("dflash", "speculative-decoding"), library_name="transformers", private=True)
    state.add_repo("indie-lab/Secret-DFlash", created_at=utc(2026, 2, 3), date=utc(2026, 2, 3, 2),
                   files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 38), tags=("dflash",), private=True)
    state.add_member("indie-lab", MEMBER)
    for _ in range(2):
        report = watcher.poll_once()
        assert not report.errors
    watcher.poll_repo("z-lab/Qwen3.7-27B-DFlash")  # a webhook hint for a private repo changes nothing either
    private = {"Qwen/Qwen3.7-27B", "z-lab/Qwen3.7-27B-DFlash", "indie-lab/Secret-DFlash"}
    assert not private & recorded_ids(store)
    assert not any(name in str(e.payload) or e.subject in private for e in store.events.events() for name in private)
    # Anonymously the Hub does not even admit they exist.
    assert HubClient(hub.url, None, tmp_path / "anon").list_org_ids("z-lab") == [
        r for r in HubClient(hub.url, MEMBER, tmp_path / "member").list_org_ids("z-lab") if not r.private]


def test_one_bad_repo_never_stops_the_watcher(store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path) -> None:
    state = scenario.state
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    scenario.advance("qwen35_27b_appears")
    # A drafter whose file metadata has no blob ids (the weight digest raises ValueError) and a listing entry with
    # a date that is not one, published just before a good drafter.
    day = scenario.now + timedelta(days=1)
    state.add_repo("z-lab/Broken-DFlash", created_at=day, date=day,
                   files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 5, target_repo="Qwen/Qwen3-8B"),
                   tags=("dflash",), library_name="transformers")
    state.malform("z-lab/Broken-DFlash", "blob_ids")
    state.add_repo("z-lab/Odd-DFlash", created_at=day, date=day + timedelta(minutes=5),
                   files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 6, target_repo="Qwen/Qwen3-8B"),
                   tags=("dflash",), library_name="transformers")
    state.malform("z-lab/Odd-DFlash", "last_modified")
    scenario.advance("drafter_for_qwen35_27b")

    for poll in range(1, QUARANTINE_AFTER + 1):
        report = watcher.poll_once()
        z_lab = next(o for o in report.orgs if o.org == "z-lab")
        assert z_lab.error is None and sorted(z_lab.failed) == ["z-lab/Broken-DFlash", "z-lab/Odd-DFlash"]
        assert all(o.error is None for o in report.orgs if o.org != "z-lab")
        if poll == 1:  # the good drafter is recorded and announced in the same poll as the failures
            assert ("drafter_released", "z-lab/Qwen3.5-27B-DFlash") in [(e.type, e.subject) for e in report.events]
    assert sorted(z_lab.quarantined) == ["z-lab/Broken-DFlash", "z-lab/Odd-DFlash"]
    assert {f.repo_id: f.failures for f in store.watch_state.watch_failures()} == {
        "z-lab/Broken-DFlash": QUARANTINE_AFTER, "z-lab/Odd-DFlash": QUARANTINE_AFTER}

    # Quarantined: skipped, so a quiet poll costs one id listing per org again.
    hub.clear_requests()
    quiet = watcher.poll_once()
    assert not quiet.errors and len(hub.requests) == len(ORGS)

    # Mended and let out: both are read on the next poll and the failures are forgotten.
    state.heal("z-lab/Broken-DFlash")
    state.heal("z-lab/Odd-DFlash")
    assert store.watch_state.release_quarantine() == 2
    mended = watcher.poll_once()
    assert not mended.errors
    assert {e.subject for e in mended.events if e.type == "drafter_released"} == {
        "z-lab/Broken-DFlash", "z-lab/Odd-DFlash"}
    assert store.watch_state.watch_failures() == []


def test_a_stale_listing_sha_is_reread_not_stored_as_missing(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    scenario.advance("qwen35_27b_appears")
    scenario.advance("drafter_for_qwen35_27b")
    scenario.state.stale_listing("z-lab/Qwen3.5-27B-DFlash", "e" * 40)
    report = watcher.poll_once()
    assert not report.errors
    real = scenario.state.repo("z-lab/Qwen3.5-27B-DFlash").sha
    assert store.reads.get_drafter("z-lab/Qwen3.5-27B-DFlash").head_sha == real
    assert [r.sha for r in store.reads.drafter_revisions("z-lab/Qwen3.5-27B-DFlash")] == [real]
    assert [e.type for e in report.events][-2:] == ["drafter_released", "lag_closed"]


def test_a_429_for_the_whole_bucket_stops_the_poll_until_the_reset(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    hub.clear_requests()
    scenario.state.inject(r"^/api/models$", "429", times=None, seconds=120)
    report = watcher.poll_once()
    assert report.stopped is not None and "retry after 120s" in report.stopped
    assert report.retry_after == 121.0
    assert [o.error for o in report.orgs[1:]] == [f"not polled: {report.stopped}"] * (len(ORGS) - 1)
    assert len(hub.requests) == 1  # no other org asked a Hub that had said no for two minutes


def test_pacing_stops_before_the_bucket_is_empty(store: Store, scenario: Scenario, hub: FakeHub,
                                                  tmp_path: Path) -> None:
    # 12 calls a window: once ten or fewer are left, spreading them over 300 s would mean waits beyond the
    # client's 2 s, so the poll stops without meeting a single 429.
    scenario.state.set_rate_limit(12)
    watcher = make_watcher(store, hub, tmp_path)
    report = watcher.poll_once()
    assert report.stopped is not None and "rate limit is spent" in report.stopped
    assert report.retry_after is not None and report.retry_after > 2
    assert 1 <= len(hub.requests) <= 3


def test_a_refused_token_is_one_configuration_error(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    scenario.state.revoke_token("hf_revokedTOKEN0123456789abcdef")
    watcher = make_watcher(store, hub, tmp_path, token="hf_revokedTOKEN0123456789abcdef")
    report = watcher.poll_once()
    assert report.config_error is not None and "rejected the configured token" in report.config_error
    assert "hf_revoked" not in report.config_error
    assert [o.error for o in report.orgs[1:]] == [f"not polled: {report.config_error}"] * (len(ORGS) - 1)
    assert len(hub.requests) == 1


def test_a_drafter_from_an_unwatched_publisher_is_known_within_one_poll(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path, drafter_queries=DRAFTER_QUERIES)
    watcher.poll_once()
    day = scenario.now + timedelta(days=3)
    scenario.state.add_repo(
        "indie-lab/Qwen3-8B-DFlash-indie", created_at=day, date=day,
        files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 99), tags=("dflash",), library_name="transformers",
        card_data={"license": "mit", "base_model": "Qwen/Qwen3-8B"},
    )
    hub.clear_requests()
    report = watcher.poll_once()
    assert not report.errors
    released = [e for e in report.events if e.type == "drafter_released"]
    assert [e.subject for e in released] == ["indie-lab/Qwen3-8B-DFlash-indie"]
    assert released[0].payload["targets"] == ["Qwen/Qwen3-8B"]
    # One listing per query, not one per repo: a quiet poll costs one call per org and per query.
    hub.clear_requests()
    watcher.poll_once()
    assert len(hub.requests) == len(ORGS) + len(DRAFTER_QUERIES)


def test_a_rename_of_an_older_repo_keeps_one_checkpoint_and_raises_nothing(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    day = scenario.now + timedelta(days=1)
    scenario.state.add_repo("meta-llama/Llama-Guard-9-1B", created_at=day, date=day,
                            files=target_files({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}),
                            library_name="transformers")
    watcher.poll_once()
    before = len(store.events.events())
    # The renamed repo is not the org's newest: its lastModified is behind the cursor.
    scenario.state.rename("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")
    report = watcher.poll_once()
    assert not report.errors and len(store.events.events()) == before
    llamas = [c.repo_id for c in store.reads.checkpoints() if "3.1-8B-Instruct" in c.repo_id]
    assert llamas == ["meta-llama/Llama-3.1-8B-Instruct"]


@pytest.mark.parametrize("owner_is_stable", [True, False])
def test_a_restarted_watcher_takes_its_own_leases_back(
    store: Store, hub: FakeHub, tmp_path: Path, owner_is_stable: bool
) -> None:
    from registry.watch.poller import stable_owner

    owner = stable_owner(tmp_path / "home")
    crashed = make_watcher(store, hub, tmp_path, owner=owner)
    assert crashed._acquire("Qwen")[0]  # took the lease and died before releasing it
    restarted = make_watcher(store, hub, tmp_path, owner=owner if owner_is_stable else None)
    report = restarted.poll_once()
    qwen = next(o for o in report.orgs if o.org == "Qwen")
    assert qwen.skipped_lease is not owner_is_stable


def test_cdn_downloads_are_under_the_client_policy_and_counted(scenario: Scenario, hub: FakeHub,
                                                               tmp_path: Path) -> None:
    drafter = scenario.state.repo("z-lab/Qwen3-8B-DFlash-b16")
    client = HubClient(hub.url, None, tmp_path / "cache", timeout=5.0)
    hub.clear_requests()
    data = client.download(drafter.repo_id, "model.safetensors", drafter.sha)
    assert data == drafter.files["model.safetensors"]
    assert hub.count(path_regex=r"^/cdn/") == 1  # the 302 led to the CDN host (localhost) ...
    assert client.request_count == len(hub.requests)  # ... and that request was counted like the others
    listed = {f.path: f for f in client.revision(drafter.repo_id, drafter.sha).files}
    assert not client.fits_download(listed["model.safetensors"])  # the watcher never downloads LFS files
    assert client.fits_download(listed["config.json"])


def test_the_watcher_never_takes_the_xet_path(store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path) -> None:
    # With X-Xet-Hash on LFS redirects, a weight download would go through hf_xet, which this fake does not serve:
    # the watcher reads only small, non-LFS files, so a whole timeline polls cleanly.
    scenario.state.xet_headers = True
    watcher = make_watcher(store, hub, tmp_path)
    for step in (None, "qwen35_27b_appears", "drafter_for_qwen35_27b", "weights_replaced"):
        if step:
            scenario.advance(step)
        assert not watcher.poll_once().errors
    assert hub.count(path_regex=r"^/cdn/") == 0
    assert ("weights_changed", "z-lab/Qwen3-8B-DFlash-b16") in events(store)
