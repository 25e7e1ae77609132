"""A new compatible pair whose weights sit in the local Hugging Face cache is measured without anyone asking.

The fake Hub (a real server) serves the tiny models; the real huggingface_hub client downloads them into a cache;
the watcher sees the drafter appear and queues a job; a worker measures it from the cache, pinned to the shas.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from huggingface_hub import constants, hf_hub_download

from registry.domain.measurement import RunSettings
from registry.store import jobs as queue
from registry.hub import HubClient
from registry.store import Store
from registry.watch.poller import Watcher
from tests.fakehub.state import HubState, readme_with_card, utc
from tests.fakehub.server import FakeHub
from verifier.jobs import Worker, enqueue_cached_pair


FAST = RunSettings(max_new_tokens=8, repeats=1, warmup=0)


def _files(folder: Path, card: dict | None = None) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}
    if card is not None:
        files["README.md"] = readme_with_card(card, "# tiny\n")
    return files


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf-cache"
    # huggingface_hub reads HF_HUB_CACHE once at import; the constant is what every call uses.
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_new_pair_in_local_cache_is_queued_and_measured(store: Store, tmp_path: Path, hf_cache: Path,
                                                        tiny_target_dir: Path, tiny_dflash_dir: Path) -> None:
    state = HubState()
    day = utc(2026, 5, 1)
    state.add_repo("tinyorg/tiny-qwen3", files=_files(tiny_target_dir), date=day, created_at=day)
    with FakeHub(state) as hub:
        client = HubClient(hub.url, None, tmp_path / "client-cache", timeout=5.0)
        watcher = Watcher(store, client, ["tinyorg", "z-lab"],
                          on_pair=lambda d, ds, t, ts, _v: enqueue_cached_pair(store, d, ds, t, ts, settings=FAST))
        watcher.poll_once()  # baseline: the target exists, no drafter yet
        state.add_repo("z-lab/tiny-qwen3-DFlash", date=day + timedelta(days=3), created_at=day + timedelta(days=3),
                       files=_files(tiny_dflash_dir, {"base_model": "tinyorg/tiny-qwen3"}), tags=("dflash",))
        # What a user's earlier download left in the cache (hf_hub_download, the resolve protocol).
        for repo, folder in (("tinyorg/tiny-qwen3", tiny_target_dir), ("z-lab/tiny-qwen3-DFlash", tiny_dflash_dir)):
            for name in [*_files(folder), "README.md"] if repo.startswith("z-lab") else _files(folder):
                hf_hub_download(repo, name, endpoint=hub.url, token=False)
        watcher.poll_once()
    [job] = store.jobs.list_jobs()
    assert job.payload["drafter"] == "z-lab/tiny-qwen3-DFlash"
    assert job.payload["drafter_revision"] == store.reads.get_drafter("z-lab/tiny-qwen3-DFlash").head_sha
    assert [e.type for e in store.events.events()] == ["drafter_released", "lag_closed"]
    watcher_again = enqueue_cached_pair(store, job.payload["drafter"], job.payload["drafter_revision"],
                                        job.payload["target"], job.payload["target_revision"])
    assert watcher_again is None  # queued once per pair of shas

    Worker(store, heartbeat_s=0.5).drain(timeout_s=600)
    done = store.jobs.get_job(job.id)
    assert done.status == queue.DONE, done.error
    run = store.runs.get_run(done.run_id)
    assert run.method == "dflash" and run.lossless
    assert run.target_revision == job.payload["target_revision"]


def test_pair_not_in_cache_is_not_queued(store: Store, hf_cache: Path) -> None:
    assert enqueue_cached_pair(store, "z-lab/x", "a" * 40, "org/y", "b" * 40) is None
    assert store.jobs.list_jobs() == []
