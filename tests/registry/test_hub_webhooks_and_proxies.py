"""Hub webhook payload semantics, proxy settings from the environment, and the service's supervised parts."""

from __future__ import annotations

import threading
from pathlib import Path

import huggingface_hub
import pytest

from registry.hub import HubClient, HubUnreachable
from registry.watch.push import PushHint, head_sha_from_payload, hint_from_payload, repo_from_payload
from drafters.service import Service
from registry.settings import get_settings
from registry.store import Store
from tests.fakehub.server import FakeHub
from tests.support.cli import invoke

SHA = "9b41424b7109f9c5413454f481b09a82b85333f4"


def payload(scope: str, action: str = "update", *, private: bool = False, refs: tuple[str, ...] = (),
            **extra: object) -> dict:
    return {
        "event": {"action": action, "scope": scope},
        "repo": {"type": "model", "name": "z-lab/Qwen3-8B-DFlash-b16", "private": private, "headSha": SHA},
        "updatedRefs": [{"ref": ref, "oldSha": None, "newSha": SHA} for ref in refs],
        "webhook": {"id": "w1", "version": 3},
        **extra,
    }


def test_webhooks_act_only_on_changes_to_main_of_public_model_repos() -> None:
    repo = "z-lab/Qwen3-8B-DFlash-b16"
    assert repo_from_payload(payload("repo.content", refs=("refs/heads/main",))) == repo
    assert repo_from_payload(payload("repo.content", refs=("refs/pr/3",))) is None  # a PR, main unchanged
    assert repo_from_payload(payload("repo.content", refs=("refs/tags/v1",))) is None
    assert repo_from_payload(payload("repo.content")) is None
    assert repo_from_payload(payload("repo", "create")) == repo
    assert repo_from_payload(payload("repo", "delete")) == repo  # its read then finds it gone
    assert repo_from_payload(payload("repo", "move", movedTo={"name": "z-lab/Renamed"})) == "z-lab/Renamed"
    assert repo_from_payload(payload("discussion", "create")) is None
    assert repo_from_payload(payload("discussion.comment", "create")) is None
    # Private repos are never read, whatever the event; a config change making one public is.
    assert repo_from_payload(payload("repo.content", private=True, refs=("refs/heads/main",))) is None
    assert repo_from_payload(payload("repo.config", private=True, updatedConfig={"private": False})) == repo
    # Made private just now: read once, so that a recorded repo is marked gone at once (issue 21).
    assert repo_from_payload(payload("repo.config", updatedConfig={"private": True})) == repo
    no_flag = payload("repo.content", refs=("refs/heads/main",))
    del no_flag["repo"]["private"]
    assert repo_from_payload(no_flag) is None  # unknown visibility counts as private
    assert head_sha_from_payload(payload("repo.content")) == SHA
    short = payload("repo.content")
    short["repo"]["headSha"] = SHA[:12]
    assert head_sha_from_payload(short) is None
    # What the push endpoint queues: the pushed head, and for a move the old id too.
    assert hint_from_payload(payload("repo.content", refs=("refs/heads/main",))) == PushHint(repo, SHA)
    assert hint_from_payload(payload("repo", "move", movedTo={"name": "other-org/Renamed"})) == PushHint(
        "other-org/Renamed", SHA, moved_from=repo)
    assert hint_from_payload(payload("repo.content", refs=("refs/pr/3",))) is None


def _rebuild_session() -> None:
    # The shared client reads proxy settings when it is built.
    huggingface_hub.close_session()


def test_no_proxy_reaches_the_local_hub_while_a_dead_proxy_is_configured(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    _rebuild_session()
    try:
        ids = HubClient(hub.url, None, tmp_path / "cache", timeout=2.0).list_org_ids("Qwen")
        assert {r.repo_id for r in ids} >= {"Qwen/Qwen3-8B"}
        monkeypatch.setenv("NO_PROXY", "")
        _rebuild_session()
        # Now the dead proxy is used, so the Hub cannot be reached: proof the setting is honoured.
        with pytest.raises(HubUnreachable):
            HubClient(hub.url, None, tmp_path / "cache", timeout=2.0, backoff_base=0.01,
                      max_connect_retries=0).list_org_ids("Qwen")
    finally:
        monkeypatch.undo()
        _rebuild_session()


def test_a_configured_proxy_carries_the_requests(hub: FakeHub, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The fake Hub answers absolute-URI requests too, so it can stand in for a forwarding proxy: a host that does
    # not resolve is reached only through it.
    monkeypatch.setenv("HTTP_PROXY", hub.url)
    monkeypatch.setenv("NO_PROXY", "")
    _rebuild_session()
    try:
        ids = HubClient("http://hub.invalid", None, tmp_path / "cache", timeout=2.0).list_org_ids("z-lab")
        assert "z-lab/Qwen3-8B-DFlash-b16" in {r.repo_id for r in ids}
    finally:
        monkeypatch.undo()
        _rebuild_session()


def test_a_dead_part_is_restarted_reported_and_shown_by_drafters_status(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    service = Service(get_settings(), store, said.append, restart_delays_s=(0.01,))
    runs: list[int] = []
    done = threading.Event()

    def flaky() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("database went away")
        service.status("alerts", "waiting", detail="delivered", success=True)
        done.set()

    service._thread("alerts", flaky)
    assert done.wait(10)
    service.threads[0].join(5)
    assert len(runs) == 2
    assert any(line.startswith("alerts died (RuntimeError: database went away); restarting in") for line in said)
    [status] = store.watch_state.service_statuses()
    assert (status.name, status.state, status.restarts) == ("alerts", "stopped", 1)
    assert status.last_error == "RuntimeError: database went away" and status.last_success_at is not None

    monkeypatch.setenv("DRAFTERS_DATABASE_URL", store.engine.url.render_as_string(hide_password=False))
    get_settings.cache_clear()
    shown = invoke("status")
    assert shown.exit_code == 0, shown.output
    assert "alerts" in shown.output and "restarted 1x" in shown.output and "database went away" in shown.output
