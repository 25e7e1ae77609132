"""A hostile mirror cannot make a download take more than it advertised (hardening round 4, item 8): the fake Hub
(tests/fakehub, a real HTTP server) serves the bodies, huggingface_hub downloads them through
registry.hub.download.Downloader.

Probes guarded here:
- a file listed only in the tree listing (which snapshot_download reads), not in model_info's siblings: never
  downloaded, so nothing escapes the download budget
- an LFS body whose bytes do not hash to the advertised sha256 (same length): the download fails naming the file,
  the file is deleted and the folder is never handed to a measurement
- an endless body for a 232-byte config.json: refused at its advertised size, not read to 120 MiB or a full disk
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from registry.hub import HubClient
from registry.hub.download import Downloader, DownloadFailed
from registry.store import Store
from registry.store import downloads as ledger
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState, tiny_safetensors

REPO = "mirror-org/Tiny-Target"
CONFIG = json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
                     "num_hidden_layers": 2, "vocab_size": 256, "pad": "x" * 97}).encode()


@pytest.fixture
def mirror() -> Iterator[tuple[HubState, FakeHub]]:
    state = HubState()
    state.add_repo(REPO, date=datetime(2026, 11, 1, tzinfo=UTC), files={
        "config.json": CONFIG,
        "model.safetensors": tiny_safetensors({"embed.weight": (64, 64)}, seed=7),
        # 4 MiB the siblings never mention: only the tree listing names it.
        "extra.safetensors": tiny_safetensors({"x": (1024, 1024, 2)}, seed=8),
    })
    state.hide_from_siblings(REPO, "extra.safetensors")
    with FakeHub(state) as hub:
        yield state, hub


def downloader(store: Store, hub: FakeHub, tmp_path: Path, budget: int = 2**30) -> Downloader:
    client = HubClient(hub.url, None, tmp_path / "client-cache", timeout=10.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05)
    return Downloader(store, client, tmp_path / "downloads", budget)


def test_a_file_listed_only_in_the_tree_is_never_downloaded(store: Store, mirror: tuple[HubState, FakeHub],
                                                            tmp_path: Path) -> None:
    state, hub = mirror
    sha = state.repo(REPO).sha  # type: ignore[union-attr]
    listed = len(CONFIG) + len(state.repo(REPO).files["model.safetensors"])  # type: ignore[union-attr]
    fetched = downloader(store, hub, tmp_path, budget=listed + 1024).fetch(REPO, sha)
    assert sorted(p.name for p in fetched.path.iterdir() if p.is_file()) == ["config.json", "model.safetensors"]
    assert not [r.path for r in hub.requests if r.path.endswith("extra.safetensors")]
    row = store.downloads.get_download(REPO, sha)
    assert row is not None and row.status == ledger.COMPLETE and row.bytes_done == listed


def test_a_body_that_does_not_match_the_advertised_sha256_is_refused(store: Store, mirror: tuple[HubState, FakeHub],
                                                                     tmp_path: Path) -> None:
    state, hub = mirror
    sha = state.repo(REPO).sha  # type: ignore[union-attr]
    # The LFS file's resolve and the CDN URL it redirects to: same length, other bytes.
    state.inject(r"model\.safetensors|/cdn/", "wrong_body", times=None)
    loader = downloader(store, hub, tmp_path)
    with pytest.raises(DownloadFailed, match="model.safetensors does not match the sha256"):
        loader.fetch(REPO, sha)
    assert loader.complete_folder(REPO, sha) is None
    assert not (loader.folder(REPO, sha) / "model.safetensors").exists()
    state.clear_faults()
    fetched = loader.fetch(REPO, sha)  # an honest answer later converges
    assert (fetched.path / "model.safetensors").read_bytes() == state.repo(REPO).files["model.safetensors"]  # type: ignore[union-attr]


def test_an_endless_body_is_refused_at_the_advertised_size(store: Store, mirror: tuple[HubState, FakeHub],
                                                           tmp_path: Path) -> None:
    state, hub = mirror
    sha = state.repo(REPO).sha  # type: ignore[union-attr]
    assert len(CONFIG) == 232
    state.inject(r"config\.json$", "endless", times=None)
    loader = downloader(store, hub, tmp_path)
    started = time.monotonic()
    with pytest.raises(DownloadFailed, match="longer than the 232 bytes"):
        loader.fetch(REPO, sha)
    assert time.monotonic() - started < 30
    on_disk = sum(p.stat().st_size for p in loader.folder(REPO, sha).rglob("*") if p.is_file())
    assert on_disk < 2**20, on_disk  # not 120 MiB: reading stopped at the size
    assert loader.complete_folder(REPO, sha) is None
