"""Hub webhooks end to end (issue 12), through the push endpoint's HTTP port into the watcher and the database,
against the HTTP fake Hub: the pushed `headSha` is the revision stored, deletes and repos that leave an org's
listing are marked gone (history kept, a drafter announced) and shown so by `find`, `check`, `lag` and `alerts`
until they come back, renamed or transferred drafters stay one drafter with their runs, and
`drafters hub-webhooks --create` run as a process."""

from __future__ import annotations

import http.client
import json
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from typing import Any

import pytest

from registry.domain import hub_presence
from registry.domain.json_shapes import SCHEMA_VERSION
from registry.hub import HubClient
from drafters.api.server import ApiServer, push_endpoint
from registry.domain.records import DrafterSpec
from registry.store.runs import Run
from tests.registry.run_fixtures import measured
from registry.store import Store
from registry.watch.poller import Watcher
from tests.fakehub.scenario import QWEN3_8B_DFLASH_CONFIG, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import dflash_drafter_files
from tests.support.cli import drafters

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]
SECRET = "push-secret-0123456789"
MEMBER = "hf_zlabMEMBERtoken0123456789abcdef"
DRAFTER = "z-lab/Qwen3-8B-DFlash-b16"


def make_watcher(store: Store, hub: FakeHub, tmp_path: Path, token: str | None = None) -> Watcher:
    client = HubClient(hub.url, token, tmp_path / "hub-cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05, max_rate_limit_wait=2.0)
    return Watcher(store, client, ORGS)


@pytest.fixture
def endpoint(store: Store, hub: FakeHub, tmp_path: Path) -> Iterator[tuple[ApiServer, Watcher]]:
    """`drafters push-server` wiring: the push endpoint on a real port, handing hints to a watcher."""
    watcher = make_watcher(store, hub, tmp_path, token=MEMBER)
    server = push_endpoint(
        SECRET, lambda hint: watcher.poll_repo(hint.repo_id, hint.head_sha, moved_from=hint.moved_from)).start()
    try:
        yield server, watcher
    finally:
        server.stop()


def webhook(repo_id: str, *, scope: str = "repo.content", action: str = "update", head: str | None = None,
            private: bool = False, moved_to: str | None = None) -> dict:
    payload: dict = {
        "event": {"action": action, "scope": scope},
        "repo": {"type": "model", "name": repo_id, "private": private, "headSha": head},
        "updatedRefs": [{"ref": "refs/heads/main", "oldSha": None, "newSha": head}] if head else [],
        "webhook": {"id": "6540fa9e2d0c1c3f0b000001", "version": 3},
    }
    if moved_to is not None:
        payload["movedTo"] = {"name": moved_to, "owner": {"id": "6540fa9e2d0c1c3f0b000002"}}
    return payload


def deliver(server: ApiServer, *payloads: dict) -> list[int]:
    """POST each payload as the Hub does, then wait until the watcher has handled every queued hint."""
    statuses = []
    for payload in payloads:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            connection.request("POST", "/", json.dumps(payload).encode(),
                               {"X-Webhook-Secret": SECRET, "Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
        finally:
            connection.close()
    server.repos.join()
    return statuses


def revision_reads(hub: FakeHub, repo_id: str) -> list[str]:
    """The revisions of `repo_id` read through model_info (`main` for a read without one)."""
    prefix = f"/api/models/{repo_id}"
    reads = []
    for request in hub.requests:
        if request.path == prefix:
            reads.append("main")
        elif request.path.startswith(f"{prefix}/revision/"):
            reads.append(request.path.rsplit("/", 1)[1])
    return reads


# ---- headSha -------------------------------------------------------------------------------------------------

def test_the_pushed_head_sha_is_the_revision_stored_and_late_deliveries_change_nothing(
    store: Store, scenario: Scenario, hub: FakeHub, endpoint: tuple[ApiServer, Watcher]
) -> None:
    server, watcher = endpoint
    watcher.poll_once()
    original = store.reads.get_drafter(DRAFTER).head_sha
    repo = scenario.state.repo(DRAFTER)
    readme = scenario.state.commit(DRAFTER, {"README.md": repo.files["README.md"] + b"\nMore.\n"},
                                   title="Update README.md", date=scenario.now + timedelta(days=1))
    retrained = scenario.state.commit(
        DRAFTER, {"model.safetensors": dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 81)["model.safetensors"]},
        title="Upload retrained weights", date=scenario.now + timedelta(days=2))
    before = len(store.events.events())

    # The first push's webhook arrives after main has moved on: its own commit is read and stored.
    hub.clear_requests()
    assert deliver(server, webhook(DRAFTER, head=readme.sha)) == [202]
    assert store.reads.get_drafter(DRAFTER).head_sha == readme.sha
    assert [r.sha for r in store.reads.drafter_revisions(DRAFTER)] == [original, readme.sha]
    assert set(revision_reads(hub, DRAFTER)) == {readme.sha}  # never main
    assert len(store.events.events()) == before  # a README commit changes no weights

    deliver(server, webhook(DRAFTER, head=retrained.sha))
    assert store.reads.get_drafter(DRAFTER).head_sha == retrained.sha
    changed = store.events.events()[before:]
    assert [(e.type, e.payload["old_sha"], e.payload["new_sha"]) for e in changed] == [
        ("weights_changed", readme.sha, retrained.sha)]

    # The Hub retries the first delivery late: the recorded head does not go back.
    deliver(server, webhook(DRAFTER, head=readme.sha))
    assert store.reads.get_drafter(DRAFTER).head_sha == retrained.sha
    assert len(store.reads.drafter_revisions(DRAFTER)) == 3 and len(store.events.events()) == before + 1


def test_a_sha_force_pushed_away_before_its_webhook_reads_main_instead(
    store: Store, scenario: Scenario, hub: FakeHub, endpoint: tuple[ApiServer, Watcher]
) -> None:
    server, watcher = endpoint
    watcher.poll_once()
    retrained = scenario.state.commit(
        DRAFTER, {"model.safetensors": dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 82)["model.safetensors"]},
        title="Upload retrained weights", date=scenario.now + timedelta(days=1))
    deliver(server, webhook(DRAFTER, head="f" * 40))  # a commit the Hub no longer has
    assert store.reads.get_drafter(DRAFTER).head_sha == retrained.sha
    assert "f" * 40 not in {r.sha for r in store.reads.drafter_revisions(DRAFTER)}


def test_one_bad_repo_or_a_private_one_never_stops_the_push_endpoint(
    store: Store, scenario: Scenario, hub: FakeHub, endpoint: tuple[ApiServer, Watcher]
) -> None:
    server, watcher = endpoint
    state = scenario.state
    state.add_member("z-lab", MEMBER)
    watcher.poll_once()
    day = scenario.now + timedelta(days=1)
    broken = state.add_repo("z-lab/Broken-DFlash", created_at=day, date=day, tags=("dflash",),
                            files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 5, target_repo="Qwen/Qwen3-8B"))
    state.malform("z-lab/Broken-DFlash", "blob_ids")  # its weight digest raises ValueError
    secret = state.add_repo("z-lab/Secret-DFlash", created_at=day, date=day, tags=("dflash",), private=True,
                            files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 6, target_repo="Qwen/Qwen3-8B"))
    good = state.add_repo("z-lab/Good-DFlash", created_at=day, date=day, tags=("dflash",),
                          files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 7, target_repo="Qwen/Qwen3-8B"))
    # The secret repo's payload claims it is public; the member token's read says otherwise.
    deliver(server, webhook("z-lab/Broken-DFlash", head=broken.sha), webhook("z-lab/Secret-DFlash", head=secret.sha),
            webhook("z-lab/Good-DFlash", head=good.sha))
    recorded = {d.repo_id for d in store.reads.drafters()}
    assert "z-lab/Good-DFlash" in recorded and not {"z-lab/Broken-DFlash", "z-lab/Secret-DFlash"} & recorded
    assert [(e.type, e.subject) for e in store.events.events() if "DFlash" in e.subject and "b16" not in e.subject] == [
        ("drafter_released", "z-lab/Good-DFlash")]


# ---- deletes and repos that leave the listing ---------------------------------------------------------------

def test_repos_gone_from_the_listing_are_marked_gone_kept_and_sanely_recreated(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    state = scenario.state
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    drafter, checkpoint = "z-lab/Qwen3-4B-DFlash-b16", "Qwen/Qwen3-8B-FP8"
    drafter_revisions = store.reads.drafter_revisions(drafter)
    verdicts = store.reads.verdicts(drafter_repo_id=drafter)
    files = dict(state.repo(drafter).files)
    assert verdicts

    state.delete(drafter)
    state.set_private(checkpoint, True)  # anonymously, exactly like a delete
    report = watcher.poll_once()
    # A drafter pulled from the Hub is news to whoever serves it; a checkpoint leaving is only marked.
    assert not report.errors and [(e.type, e.subject) for e in report.events] == [("drafter_gone", drafter)]
    assert report.events[0].payload["message"].startswith(f"dflash drafter {drafter} is gone from the Hub")
    assert store.reads.get_drafter(drafter).status == "gone"
    assert (store.reads.get_checkpoint(checkpoint).status, store.reads.get_checkpoint(checkpoint).status_detail.split(";")[0]) \
        == ("gone", "no longer public on the Hub (deleted or made private)")
    assert store.reads.drafter_revisions(drafter) == drafter_revisions and store.reads.verdicts(drafter_repo_id=drafter) == verdicts
    hub.clear_requests()
    assert watcher.poll_once().events == [] and len(hub.requests) == len(ORGS)  # gone ones cost nothing more

    # Reported gone again (a delete webhook for it): the first day stays, nothing is announced twice.
    watcher.poll_repo(drafter)
    assert len(store.events.events(types=["drafter_gone"])) == 1

    # Public again with the same sha, and re-created under the same id (same files, a new commit).
    state.set_private(checkpoint, False)
    day = scenario.now + timedelta(days=1)
    recreated = state.add_repo(drafter, created_at=day, date=day, files=files, library_name="transformers",
                               tags=("dflash", "speculative-decoding"))
    report = watcher.poll_once()
    assert not report.errors and report.events == []  # not a release: the registry knew them all along
    assert store.reads.get_checkpoint(checkpoint).status == "ok" and store.reads.get_drafter(drafter).status == "ok"
    assert [r.sha for r in store.reads.drafter_revisions(drafter)] == [r.sha for r in drafter_revisions] + [recreated.sha]
    assert len([d for d in store.reads.drafters() if d.repo_id == drafter]) == 1


def test_a_delete_webhook_marks_a_recorded_repo_gone(
    store: Store, scenario: Scenario, hub: FakeHub, endpoint: tuple[ApiServer, Watcher]
) -> None:
    server, watcher = endpoint
    watcher.poll_once()
    scenario.state.delete("Qwen/Qwen3-4B")
    before = len(store.events.events())
    deliver(server, webhook("Qwen/Qwen3-4B", scope="repo", action="delete"),
            webhook("nobody/Never-Recorded", scope="repo", action="delete"))
    assert store.reads.get_checkpoint("Qwen/Qwen3-4B").status == "gone"
    assert store.reads.revisions("Qwen/Qwen3-4B") and len(store.events.events()) == before
    assert store.reads.get_checkpoint("nobody/Never-Recorded") is None and store.reads.get_drafter("nobody/Never-Recorded") is None


def drafters_cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`drafters …` as a user runs it, on the test's database."""
    return drafters(*args, env={"DRAFTERS_DATABASE_URL": database_url}, columns=250)


def cli_json(database_url: str, *args: str) -> Any:
    done = drafters_cli(database_url, *args, "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["schema_version"] == SCHEMA_VERSION
    return body.get("items", body)  # a list comes as {"schema_version": 2, "items": [...]}


def test_a_repo_gone_from_the_hub_says_so_in_find_check_lag_and_alerts_until_it_comes_back(
    store: Store, database_url: str, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    state = scenario.state
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    drafter, target = "z-lab/Qwen3-4B-DFlash-b16", "Qwen/Qwen3-4B"
    # Named after its target, declared by no metadata: structural (a repo name is no declaration).
    assert {v.verdict for v in store.reads.verdicts(drafter_repo_id=drafter, checkpoint_repo_id=target)} == {
        "structural"}
    lag_before = {r["target_repo_id"]: r for r in cli_json(database_url, "lag")}[target]

    state.set_private(drafter, True)
    state.set_private(target, True)
    assert not watcher.poll_once().errors
    since = hub_presence.gone_since(store.reads.get_drafter(drafter).status_detail)
    assert since is not None and hub_presence.gone_since(store.reads.get_checkpoint(target).status_detail) == since
    marker = f"gone from the Hub since {since.isoformat()}"

    found = cli_json(database_url, "find", target)
    rows = {r["drafter_repo_id"]: r for r in found["drafters"]}
    assert (rows[drafter]["verdict"], rows[drafter]["gone"]) == ("structural", marker)  # still fits; not available
    assert found["checkpoint_gone"] == marker
    assert [name for name, r in rows.items() if r["gone"] is not None] == [drafter]
    table = drafters_cli(database_url, "find", target)
    assert table.returncode == 0, table.stderr
    [line] = [text for text in table.stdout.splitlines() if drafter in text]
    assert line.startswith("structural") and f"({marker}: cannot be downloaded)" in line
    assert f"{target} is {marker}" in table.stdout

    checked = cli_json(database_url, "check", drafter, target)
    assert (checked["verdict"], checked["drafter_gone"], checked["target_gone"]) == ("structural", marker, marker)
    told = drafters_cli(database_url, "check", drafter, target)
    assert f"the drafter {drafter} is {marker}" in told.stdout and f"the target {target} is {marker}" in told.stdout

    # The lag is history and stays as measured; the row says who left the Hub.
    lag_row = {r["target_repo_id"]: r for r in cli_json(database_url, "lag")}[target]
    assert (lag_row["lag_days"], lag_row["open"]) == (lag_before["lag_days"], lag_before["open"])
    assert {f"{target} {marker}", f"{drafter} {marker}"} <= set(lag_row["hub_notes"])
    assert lag_before["hub_notes"] == []
    assert marker in drafters_cli(database_url, "lag").stdout

    [event] = cli_json(database_url, "alerts", "--type", "drafter_gone")
    assert (event["subject"], event["payload"]["method"]) == (drafter, "dflash")

    # Public again: the markers go, and coming back is no release.
    state.set_private(drafter, False)
    state.set_private(target, False)
    report = watcher.poll_once()
    assert not report.errors and report.events == []
    found = cli_json(database_url, "find", target)
    assert found["checkpoint_gone"] is None and all(r["gone"] is None for r in found["drafters"])
    assert "gone from the Hub" not in drafters_cli(database_url, "find", target).stdout
    assert {r["target_repo_id"]: r for r in cli_json(database_url, "lag")}[target]["hub_notes"] == []
    assert len(cli_json(database_url, "alerts", "--type", "drafter_gone")) == 1


# ---- renames of drafters -------------------------------------------------------------------------------------

def test_a_renamed_drafter_found_by_the_id_listing_stays_one_drafter(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    old, new = "z-lab/Qwen3-4B-DFlash-b16", "z-lab/Qwen3-4B-DFlash"
    drafter = store.reads.get_drafter(old)
    revisions = [r.sha for r in store.reads.drafter_revisions(old)]
    # An older repo, renamed: its lastModified is behind the cursor, so only the id listing shows it.
    scenario.state.rename(old, new)
    report = watcher.poll_once()
    assert not report.errors and report.events == []
    [renamed] = [d for d in store.reads.drafters() if d.repo_id in (old, new)]
    assert (renamed.id, renamed.repo_id, renamed.status) == (drafter.id, new, "ok")
    assert [r.sha for r in store.reads.drafter_revisions(new)] == revisions
    assert store.reads.get_drafter(old).repo_id == new  # the old id is an alias
    assert {v.checkpoint_repo_id for v in store.reads.verdicts(drafter_repo_id=new)} >= {"Qwen/Qwen3-4B"}
    # What the catalog importer does with the old id lands on the same drafter.
    store.drafters.upsert_drafter(DrafterSpec(repo_id=old, method="dflash", publisher="z-lab", source="catalog"))
    assert len([d for d in store.reads.drafters() if "Qwen3-4B-DFlash" in d.repo_id]) == 1
    hub.clear_requests()
    assert watcher.poll_once().events == [] and len(hub.requests) == len(ORGS)


def test_runs_recorded_under_a_drafters_old_id_follow_its_rename(
    store: Store, database_url: str, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    old, new, target = "z-lab/Qwen3-4B-DFlash-b16", "z-lab/Qwen3-4B-DFlash", "Qwen/Qwen3-4B"

    def run(run_id: str) -> Run:
        return Run(target=target, drafter=old, method="dflash", hardware="H200",
                   overall=measured(tau=3.0, speedup=2.0), run_id=run_id)

    store.runs.record_run(run("measured-before"))
    store.runs.record_run(Run(target=target, drafter="z-lab/Qwen3-8B-DFlash-b16", method="dflash",
                              run_id="another-drafter"))
    scenario.state.rename(old, new)
    assert not watcher.poll_once().errors
    # A job queued under the old id that finishes after the rename lands on the same drafter.
    assert store.runs.record_run(run("finished-after")).drafter == new
    for asked in (new, old):
        listed = cli_json(database_url, "runs", "--drafter", asked)
        assert sorted((r["run_id"], r["drafter"]) for r in listed) == [("finished-after", new),
                                                                         ("measured-before", new)]
    assert [r.run_id for r in store.runs.list_runs(target=target) if r.drafter == old] == []


def test_a_move_webhook_keeps_one_drafter_even_across_orgs(
    store: Store, scenario: Scenario, hub: FakeHub, endpoint: tuple[ApiServer, Watcher]
) -> None:
    server, watcher = endpoint
    watcher.poll_once()
    drafter = store.reads.get_drafter(DRAFTER)
    # A transfer to a publisher nobody watches: no listing the watcher reads would ever connect the two ids.
    new = "dflash-community/Qwen3-8B-DFlash-b16"
    scenario.state.rename(DRAFTER, new)
    before = len(store.events.events())
    deliver(server, webhook(DRAFTER, scope="repo", action="move", moved_to=new, head=drafter.head_sha))
    [moved] = [d for d in store.reads.drafters() if d.repo_id in (DRAFTER, new)]
    assert (moved.id, moved.repo_id, moved.publisher, moved.status) == (drafter.id, new, "dflash-community", "ok")
    assert len(store.events.events()) == before
    report = watcher.poll_once()  # z-lab's listing no longer shows it: it moved, it is not gone
    assert not report.errors and report.events == [] and store.reads.get_drafter(new).status == "ok"


# ---- drafters hub-webhooks --create --------------------------------------------------------------------------

def run_hub_webhooks(hub: FakeHub, tmp_path: Path, token: str | None,
                     watched: tuple[str, ...] = ("Qwen", "z-lab", "yuhuili")) -> subprocess.CompletedProcess[str]:
    env = {"DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_HUB_ENDPOINT": hub.url,
                "DRAFTERS_SEND_TOKEN_TO_ENDPOINT": "1", "DRAFTERS_HUB_WEBHOOK_SECRET": SECRET,
           "DRAFTERS_WATCHED_ORGS": json.dumps(list(watched)), "HF_HOME": str(tmp_path / "hf-home")}
    if token is not None:
        env["HF_TOKEN"] = token
    return drafters("hub-webhooks", "--url", "https://hooks.example.org/drafters", "--create", env=env,
                    drop=("DRAFTERS_HF_TOKEN",) if token is not None else ("HF_TOKEN", "DRAFTERS_HF_TOKEN"))


def test_hub_webhooks_create_makes_the_org_webhook_on_the_hub(scenario: Scenario, hub: FakeHub,
                                                              tmp_path: Path) -> None:
    token = "hf_writerTOKEN0123456789abcdef"
    scenario.state.add_user("yuhuili")  # EAGLE's authors publish under a user account (WebhookWatchedItem "user")
    done = run_hub_webhooks(hub, tmp_path, token)
    assert done.returncode == 0, done.stderr
    [(creator, created)] = scenario.state.webhooks()
    assert creator == token
    assert created["url"] == "https://hooks.example.org/drafters" and created["domains"] == ["repo"]
    assert created["watched"] == [{"type": "org", "name": "Qwen"}, {"type": "org", "name": "z-lab"},
                                  {"type": "user", "name": "yuhuili"}]
    assert "watched: org Qwen, org z-lab, user yuhuili" in done.stdout
    assert created["secret"] == SECRET  # the Hub got it ...
    assert f"created webhook {created['id']}" in done.stdout
    assert SECRET not in done.stdout + done.stderr and token not in done.stdout + done.stderr  # ... nobody else
    assert [r.authorization for r in hub.requests if r.method == "POST"] == [f"Bearer {token}"]


@pytest.mark.parametrize("token", [None, "hf_revokedTOKEN0123456789abcdef"])
def test_hub_webhooks_create_without_a_valid_token_fails_in_one_line(
    scenario: Scenario, hub: FakeHub, tmp_path: Path, token: str | None
) -> None:
    if token is not None:
        scenario.state.revoke_token(token)
    done = run_hub_webhooks(hub, tmp_path, token)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert ("needs a Hub token" if token is None else "401") in lines[0]
    assert SECRET not in done.stdout + done.stderr
    assert token is None or token not in done.stdout + done.stderr
    assert scenario.state.webhooks() == []
    # A revoked token is refused at its first call (what a watched name is), before anything is created.
    assert len([r for r in hub.requests if r.method == "POST"]) == 0
    assert len(hub.requests) == (0 if token is None else 1)


def test_hub_webhooks_create_refuses_a_watched_name_the_hub_does_not_know(scenario: Scenario, hub: FakeHub,
                                                                          tmp_path: Path) -> None:
    done = run_hub_webhooks(hub, tmp_path, "hf_writerTOKEN0123456789abcdef", watched=("Qwen", "no-such-lab"))
    assert done.returncode != 0 and "no-such-lab: neither an organization nor a user" in done.stderr
    assert scenario.state.webhooks() == []


def test_a_webhook_making_a_repo_private_marks_it_gone_at_once(
    store: Store, scenario: Scenario, hub: FakeHub, endpoint: tuple[PushServer, Watcher]
) -> None:
    server, watcher = endpoint
    watcher.poll_once()
    scenario.state.set_private(DRAFTER, True)
    # As the Hub sends it (scope repo.config): the repo is private now, and `updatedConfig` says it just became so.
    made_private = {**webhook(DRAFTER, scope="repo.config", private=True), "updatedConfig": {"private": True}}
    assert deliver(server, made_private) == [202]
    assert store.reads.get_drafter(DRAFTER).status == "gone"  # no poll in between
    assert [(e.type, e.subject) for e in store.events.events()] == [("drafter_gone", DRAFTER)]
    # A push to a private repo (never recorded, or gone already) still changes nothing.
    assert deliver(server, webhook("z-lab/Unpublished-DFlash", private=True, head="e" * 40)) == [202]
    assert store.reads.get_drafter("z-lab/Unpublished-DFlash") is None and len(store.events.events()) == 1
