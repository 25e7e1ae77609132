"""Autoverify on real bytes: the fake Hub (a real HTTP server) serves the tiny models the project builds, the real
huggingface_hub client downloads them, and the service's watcher, planner and worker really run.

A drafter released on the Hub is measured at the Hub's shas without anyone asking; a target too large for the
worker is never downloaded; a download killed with SIGKILL resumes and is never measured half-done; a force-pushed
revision is planned again at its new sha; a full disk fails the job with the reason and records no run; a repo
deleted from the Hub is planned out; the disk budget evicts only what the service downloaded.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from drafters.service import Service
from registry.domain.measurement import RunSettings
from registry.domain import plan
from registry.domain.memory import GIB
from registry.domain.plan import WorkerCapability
from registry.hub import HubClient
from registry.hub.download import Downloader, DownloadFailed
from registry.settings import Settings, get_settings
from registry.store import Store
from registry.store import downloads as ledger
from registry.store import jobs as queue
from registry.watch.poller import Watcher
from tests.conftest import REPO_ROOT
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState, folder_files, readme_with_card, utc
from verifier import autoverify
from verifier.jobs import Worker

TARGET, HUGE = "tinyorg/tiny-qwen3", "tinyorg/huge-qwen3"
DRAFTER, HUGE_DRAFTER = "z-lab/tiny-qwen3-DFlash", "z-lab/huge-qwen3-DFlash"
DAY = utc(2026, 5, 1)
ENGINES = {"pytorch": "torch test"}


def drafter_files(dflash_dir: Path, target: str) -> dict[str, bytes]:
    files = folder_files(dflash_dir)
    files["README.md"] = readme_with_card({"base_model": target}, "# tiny DFlash drafter\n")
    # What a publisher may ship beside the weights: code and a pickle, neither of which may ever come down.
    files["dflash.py"] = b"raise SystemExit('publisher code must never run')\n"
    files["training_args.bin"] = b"\x80\x04 a pickle"
    return files


def worker_capability(memory_gb: float = 1.5, budget_gb: float = 1.0) -> WorkerCapability:
    return WorkerCapability(worker_id="test-worker", device="cpu", memory_bytes=round(memory_gb * GIB),
                            engines=ENGINES, disk_budget_bytes=round(budget_gb * GIB), run_bytes_per_parameter=4.0)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path / 'registry.db'}")
    yield store
    store.engine.dispose()


@pytest.fixture
def tiny_hub(tiny_target_dir: Path) -> Iterator[tuple[HubState, FakeHub]]:
    state = HubState()
    state.add_repo(TARGET, files=folder_files(tiny_target_dir), date=DAY, created_at=DAY)
    with FakeHub(state) as hub:
        yield state, hub


def resolve_requests(hub: FakeHub, repo: str, suffix: str = "") -> list[str]:
    """Requests for a repo's files by name (resolve and the resolve cache): every file download starts there."""
    return [r.path for r in hub.requests
            if (r.path.startswith(f"/{repo}/resolve/") or f"/resolve-cache/models/{repo}/" in r.path)
            and r.path.endswith(suffix)]


def cdn_requests(hub: FakeHub, repo: str) -> list[str]:
    """Requests for LFS bytes (weights) of a repo: where a resolve of an LFS file redirects."""
    return [r.path for r in hub.requests if r.path.startswith("/cdn/") and r.query.get("repo") == [repo]]


def wait_for(condition, timeout_s: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_released_drafter_is_downloaded_measured_and_stored_at_the_hub_shas(
        tmp_path: Path, sqlite_store: Store, tiny_target_dir: Path, tiny_dflash_dir: Path) -> None:
    state = HubState()
    state.add_repo(TARGET, files=folder_files(tiny_target_dir), date=DAY, created_at=DAY)
    # The same tiny files, but the Hub's safetensors metadata says 70B parameters: 280 GB at float32.
    state.add_repo(HUGE, files=folder_files(tiny_target_dir), date=DAY, created_at=DAY,
                   reported_parameters={"BF16": 70_000_000_000})
    with FakeHub(state) as hub:
        settings = Settings(home=tmp_path / "home", hub_endpoint=hub.url, watched_orgs=["tinyorg", "z-lab"],
                            watch_interval_s=1.0, autoverify_interval_s=1.0, worker_memory_gb=1.5,
                            download_budget_gb=1.0, autoverify_max_new_tokens=8, autoverify_repeats=1)
        said: list[str] = []
        service = Service(settings, sqlite_store, said.append)
        try:
            service.start(watch=True, worker=True, dashboard=False, demo=False)
            wait_for(lambda: any(s.name == "watcher" and s.state == "waiting"
                                 for s in sqlite_store.watch_state.service_statuses()), 120, "the watcher's first poll")
            released = DAY + timedelta(days=3)
            state.add_repo(DRAFTER, files=drafter_files(tiny_dflash_dir, TARGET), date=released,
                           created_at=released, tags=("dflash",))
            state.add_repo(HUGE_DRAFTER, files=drafter_files(tiny_dflash_dir, HUGE), date=released,
                           created_at=released, tags=("dflash",))
            run = wait_for(lambda: next((r for r in sqlite_store.runs.list_runs() if r.drafter == DRAFTER), None), 600,
                           f"a run of {DRAFTER}\n" + "\n".join(said[-20:]))
            # `drafters status` shows the plan's tally once the planner has seen the run.
            wait_for(lambda: any(s.name == "planner" and "1 measured" in (s.detail or "")
                                 for s in sqlite_store.watch_state.service_statuses()), 30, "the planner's status row")
            rows = autoverify.make_plan(sqlite_store, autoverify.capability(settings, "probe", engines={
                "pytorch": run.engine_version or ""}, device=autoverify.detect_device()))
        finally:
            service.close()
    assert run.status == "ok", run.failure_reason
    assert run.target == TARGET and run.target_revision == state.repo(TARGET).sha  # type: ignore[union-attr]
    assert run.drafter_revision == state.repo(DRAFTER).sha  # type: ignore[union-attr]
    assert run.method == "dflash" and run.lossless
    download = run.provenance["download"]
    assert download["bytes"] > 0 and download["seconds"] >= 0
    # Only config, tokenizer and safetensors came down: never the publisher's code, never a pickle.
    folder = settings.downloads_dir / DRAFTER.replace("/", "--") / run.drafter_revision  # type: ignore[operator]
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == ["config.json", "model.safetensors"]
    assert resolve_requests(hub, DRAFTER, ".safetensors") and cdn_requests(hub, DRAFTER)
    assert not resolve_requests(hub, DRAFTER, ".py") and not resolve_requests(hub, DRAFTER, ".bin")
    # The huge target was planned out from the Hub's metadata alone: not one byte of its weights was asked for.
    huge = next(r for r in rows if r.target == HUGE)
    assert huge.state == plan.NEEDS_MEMORY and "(this worker has 1.5 GiB)" in huge.reason
    assert not resolve_requests(hub, HUGE, ".safetensors") and not cdn_requests(hub, HUGE)
    assert cdn_requests(hub, TARGET)
    assert not (settings.downloads_dir / HUGE.replace("/", "--")).exists()
    assert next(r for r in rows if r.drafter == DRAFTER).state == plan.MEASURED
    # `drafters status` shows the service's last download.
    [download_row] = [s for s in sqlite_store.watch_state.service_statuses() if s.name == "download"]
    assert download_row.state == "done" and (download_row.detail or "").startswith(f"{DRAFTER}@")


def test_a_download_killed_midway_resumes_and_is_never_measured_half_done(
        tmp_path: Path, sqlite_store: Store, tiny_hub: tuple[HubState, FakeHub]) -> None:
    state, hub = tiny_hub
    sha = state.repo(TARGET).sha  # type: ignore[union-attr]
    root = tmp_path / "downloads"
    state.download_bytes_per_s = 150_000  # the 2 MB target takes ~15 s
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "NO_PROXY": "127.0.0.1,localhost"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.download_process", str(sqlite_store.engine.url), hub.url, str(root),
         TARGET, sha], env=env, stdout=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (row := sqlite_store.downloads.get_download(TARGET, sha)) is not None and row.bytes_done > 0,
                 60, "the download to start")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    client = HubClient(hub.url, None, tmp_path / "client-cache", timeout=30.0)
    downloader = Downloader(sqlite_store, client, root, 10 * GIB)
    folder = downloader.folder(TARGET, sha)
    assert sqlite_store.downloads.get_download(TARGET, sha).status == ledger.DOWNLOADING  # type: ignore[union-attr]
    assert downloader.complete_folder(TARGET, sha) is None  # a measurement never gets this folder
    assert not (folder / "model.safetensors").exists()  # only huggingface_hub's temp file holds the partial bytes

    state.download_bytes_per_s = None
    fetched = downloader.fetch(TARGET, sha)
    assert fetched.path == folder and downloader.complete_folder(TARGET, sha) == folder
    served = state.repo(TARGET).head.files  # type: ignore[union-attr]
    for name in ("config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json"):
        assert (folder / name).read_bytes() == served[name]
    assert not list(folder.rglob("*.incomplete"))
    assert "README.md" not in {p.name for p in folder.iterdir()}


def test_a_force_pushed_revision_is_planned_again_at_its_new_sha(
        tmp_path: Path, sqlite_store: Store, tiny_hub: tuple[HubState, FakeHub], tiny_dflash_dir: Path) -> None:
    state, hub = tiny_hub
    client = HubClient(hub.url, None, tmp_path / "client-cache", timeout=30.0)
    watcher = Watcher(sqlite_store, client, ["tinyorg", "z-lab"])
    state.add_repo(DRAFTER, files=drafter_files(tiny_dflash_dir, TARGET), date=DAY + timedelta(days=1),
                   tags=("dflash",))
    watcher.poll_once()
    worker = worker_capability()
    [first] = autoverify.enqueue_ready(sqlite_store, autoverify.make_plan(sqlite_store, worker), RunSettings(repeats=1))
    old_sha = first.payload["target_revision"]
    new = state.force_push(TARGET, {"README.md": b"# rewritten history\n"}, title="rewrite",
                           date=DAY + timedelta(days=2))
    watcher.poll_once()
    downloader = Downloader(sqlite_store, client, tmp_path / "downloads", GIB)
    handled = Worker(sqlite_store, memory_bytes=worker.memory_bytes, engines=("pytorch",),
                     fetch=autoverify.fetcher(downloader)).work_once()
    assert handled is not None and handled.id == first.id and handled.status == queue.FAILED
    assert handled.error is not None and handled.error.startswith("gone: ") and handled.attempts == 1
    assert sqlite_store.runs.list_runs() == []
    rows = autoverify.make_plan(sqlite_store, worker)
    [row] = [r for r in rows if r.drafter == DRAFTER]
    assert row.target_sha == new.sha != old_sha and row.state == plan.READY
    [second] = autoverify.enqueue_ready(sqlite_store, rows, RunSettings(repeats=1))
    assert second.payload["target_revision"] == new.sha
    assert autoverify.enqueue_ready(sqlite_store, autoverify.make_plan(sqlite_store, worker), RunSettings()) == []  # once


def test_a_repo_gone_from_the_hub_is_planned_out_with_the_reason(
        tmp_path: Path, sqlite_store: Store, tiny_hub: tuple[HubState, FakeHub], tiny_dflash_dir: Path) -> None:
    state, hub = tiny_hub
    watcher = Watcher(sqlite_store, HubClient(hub.url, None, tmp_path / "cache", timeout=30.0), ["tinyorg", "z-lab"])
    state.add_repo(DRAFTER, files=drafter_files(tiny_dflash_dir, TARGET), date=DAY + timedelta(days=1),
                   tags=("dflash",))
    watcher.poll_once()
    assert [r.state for r in autoverify.make_plan(sqlite_store, worker_capability())] == [plan.READY]
    state.delete(DRAFTER)
    watcher.poll_once()
    [row] = autoverify.make_plan(sqlite_store, worker_capability())
    assert row.state == plan.GONE and row.reason.startswith(f"{DRAFTER} is gone from the Hub")
    assert autoverify.enqueue_ready(sqlite_store, [row], RunSettings()) == []


@contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A real filesystem of `size` (tmpfs) at `path`, unmounted afterwards; skips where mounting is not allowed."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_fails_the_job_with_the_reason_and_records_nothing(
        tmp_path: Path, sqlite_store: Store, tiny_hub: tuple[HubState, FakeHub], tiny_dflash_dir: Path) -> None:
    state, hub = tiny_hub
    # A real filesystem with 1 MB: the 2 MB target cannot fit.
    with small_disk(tmp_path / "small-disk", "1m") as disk:
        client = HubClient(hub.url, None, tmp_path / "client-cache", timeout=30.0)
        watcher = Watcher(sqlite_store, client, ["tinyorg", "z-lab"])
        state.add_repo(DRAFTER, files=drafter_files(tiny_dflash_dir, TARGET), date=DAY + timedelta(days=1),
                       tags=("dflash",))
        watcher.poll_once()
        worker = worker_capability()
        [job] = autoverify.enqueue_ready(sqlite_store, autoverify.make_plan(sqlite_store, worker), RunSettings(repeats=1))
        downloader = Downloader(sqlite_store, client, disk / "downloads", 10 * GIB)
        handled = Worker(sqlite_store, memory_bytes=worker.memory_bytes, engines=("pytorch",),
                         fetch=autoverify.fetcher(downloader)).work_once()
        assert handled is not None and handled.id == job.id and handled.status == queue.FAILED
        assert handled.error is not None and handled.error.startswith(f"disk full: {TARGET} needs ")
        assert " GB" not in handled.error and handled.error.count("iB") == 2  # binary units, said as such
        assert handled.attempts == 1  # not retried in a loop
        assert sqlite_store.runs.list_runs() == []  # nothing half-recorded
        assert downloader.complete_folder(TARGET, job.payload["target_revision"]) is None
        [row] = autoverify.make_plan(sqlite_store, worker)
        assert row.state == plan.FAILED and row.reason.startswith("disk full")


def _fill(disk: Path) -> Path:
    """Write into `disk` until the filesystem says it is full, as another process on the host would."""
    filler = disk / "someone-elses-file"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError as error:
            assert error.errno == errno.ENOSPC, error
    return filler


def test_a_disk_that_fills_during_the_download_fails_it_with_the_reason_and_a_rerun_converges(
        tmp_path: Path, sqlite_store: Store, tiny_hub: tuple[HubState, FakeHub]) -> None:
    state, hub = tiny_hub
    sha = state.repo(TARGET).sha  # type: ignore[union-attr]
    # Room for the 2 MB target when the download starts (the free-space check passes), then another writer fills it.
    with small_disk(tmp_path / "small-disk", "4m") as disk:
        client = HubClient(hub.url, None, tmp_path / "client-cache", timeout=30.0)
        downloader = Downloader(sqlite_store, client, disk / "downloads", 10 * GIB)
        state.download_bytes_per_s = 150_000  # the 2 MB target takes ~15 s
        outcome: list[BaseException] = []

        def fetch() -> None:
            try:
                downloader.fetch(TARGET, sha)
            except BaseException as error:  # noqa: BLE001 - the test reads what it raised
                outcome.append(error)

        thread = threading.Thread(target=fetch)
        thread.start()
        wait_for(lambda: (row := sqlite_store.downloads.get_download(TARGET, sha)) is not None and row.bytes_done > 0,
                 60, "the download to start")
        filler = _fill(disk)
        thread.join(120)
        assert not thread.is_alive()
        [error] = outcome
        assert isinstance(error, DownloadFailed) and str(error) == f"disk full while downloading {TARGET}"
        row = sqlite_store.downloads.get_download(TARGET, sha)
        assert row is not None and row.status == ledger.FAILED and row.error == str(error)
        assert downloader.complete_folder(TARGET, sha) is None  # a measurement never gets this folder
        assert not (downloader.folder(TARGET, sha) / "model.safetensors").exists()

        filler.unlink()  # the disk has room again: the same fetch finishes, with one ledger row
        state.download_bytes_per_s = None
        fetched = downloader.fetch(TARGET, sha)
        assert downloader.complete_folder(TARGET, sha) == fetched.path
        served = state.repo(TARGET).head.files  # type: ignore[union-attr]
        assert (fetched.path / "model.safetensors").read_bytes() == served["model.safetensors"]
        assert [(r.repo_id, r.status) for r in sqlite_store.downloads.list_downloads()] == [(TARGET, ledger.COMPLETE)]


def test_the_budget_evicts_the_least_recently_used_download_and_nothing_else(
        tmp_path: Path, sqlite_store: Store, tiny_hub: tuple[HubState, FakeHub], tiny_target_dir: Path) -> None:
    state, hub = tiny_hub
    state.add_repo("tinyorg/tiny-qwen3-b", files=folder_files(tiny_target_dir), date=DAY, created_at=DAY)
    root = tmp_path / "downloads"
    foreign = root / "someone--else" / "model.safetensors"
    foreign.parent.mkdir(parents=True)
    foreign.write_bytes(b"not ours" * 100_000)
    size = sum(len(v) for k, v in state.repo(TARGET).head.files.items() if k != "README.md")  # type: ignore[union-attr]
    client = HubClient(hub.url, None, tmp_path / "client-cache", timeout=30.0)
    downloader = Downloader(sqlite_store, client, root, round(size * 1.5))
    a_sha, b_sha = state.repo(TARGET).sha, state.repo("tinyorg/tiny-qwen3-b").sha  # type: ignore[union-attr]
    first = downloader.fetch(TARGET, a_sha)
    assert first.bytes > 0
    again = downloader.fetch(TARGET, a_sha)
    assert again.bytes == 0  # a complete download is reused, not fetched twice
    second = downloader.fetch("tinyorg/tiny-qwen3-b", b_sha)
    assert second.path.is_dir() and not first.path.exists()
    assert sqlite_store.downloads.get_download(TARGET, a_sha).status == ledger.EVICTED  # type: ignore[union-attr]
    assert foreign.exists()  # the service never deletes what it did not download
    with pytest.raises(DownloadFailed, match="more than the download budget"):
        Downloader(sqlite_store, client, root, 1000).fetch(TARGET, a_sha)


def test_a_flagged_license_tag_is_planned_out_with_the_license(
        tmp_path: Path, sqlite_store: Store, tiny_target_dir: Path, tiny_dflash_dir: Path) -> None:
    state = HubState()
    state.add_repo(TARGET, files=folder_files(tiny_target_dir), date=DAY, created_at=DAY,
                   card_data={"license": "llama3.1"})
    with FakeHub(state) as hub:
        watcher = Watcher(sqlite_store, HubClient(hub.url, None, tmp_path / "cache", timeout=30.0),
                          ["tinyorg", "z-lab"])
        state.add_repo(DRAFTER, files=drafter_files(tiny_dflash_dir, TARGET), date=DAY + timedelta(days=1),
                       tags=("dflash",))
        watcher.poll_once()
    flagged = replace(worker_capability(), blocked_licenses=frozenset({"llama3.1"}))
    [row] = autoverify.make_plan(sqlite_store, flagged)
    assert row.state == plan.LICENSE and row.reason == f"license flagged: {TARGET} (llama3.1)"
    assert autoverify.enqueue_ready(sqlite_store, [row], RunSettings()) == []
    assert [r.state for r in autoverify.make_plan(sqlite_store, worker_capability())] == [plan.READY]


def test_a_ray_task_downloads_an_autoverify_job_on_its_own_node(
        tmp_path: Path, tiny_hub: tuple[HubState, FakeHub], tiny_dflash_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--executor ray` runs the job's task on a node with only the payload: the node fetches both repos at the
    pinned shas into its own downloads folder, as `drafters up`'s worker does, and the run records the download."""
    from verifier.ray_executor import run_verify_job

    state, hub = tiny_hub
    database_url = f"sqlite:///{tmp_path / 'registry.db'}"
    store = Store.open(database_url)
    state.add_repo(DRAFTER, files=drafter_files(tiny_dflash_dir, TARGET), date=DAY + timedelta(days=1),
                   tags=("dflash",))
    Watcher(store, HubClient(hub.url, None, tmp_path / "cache", timeout=30.0), ["tinyorg", "z-lab"]).poll_once()
    [job] = autoverify.enqueue_ready(store, autoverify.make_plan(store, worker_capability()),
                                     RunSettings(repeats=1, max_new_tokens=8, warmup=0))
    node_home = tmp_path / "node-home"
    monkeypatch.setenv("DRAFTERS_HOME", str(node_home))
    monkeypatch.setenv("DRAFTERS_HUB_ENDPOINT", hub.url)
    monkeypatch.setenv("DRAFTERS_DOWNLOAD_BUDGET_GB", "1")
    get_settings.cache_clear()

    run_id = run_verify_job(database_url, job.payload, job.id, "ray-run")
    [run] = store.runs.list_runs()
    assert run.run_id == run_id == "ray-run" and run.status == "ok", run.failure_reason
    assert (run.target_revision, run.drafter_revision) == (job.payload["target_revision"],
                                                          job.payload["drafter_revision"])
    assert run.provenance["download"]["bytes"] > 0
    assert (node_home / "downloads").is_dir() and not resolve_requests(hub, DRAFTER, ".py")
    store.engine.dispose()


def test_an_autoverify_job_of_a_cuda_worker_asks_for_a_gpu(tmp_path: Path, tiny_hub: tuple[HubState, FakeHub],
                                                           tiny_dflash_dir: Path) -> None:
    """Under `--executor ray` a task that asks for no GPU gets CUDA hidden and measures on the host CPU: a CUDA
    worker's jobs name the device, so they ask for one; a CPU worker's do not."""
    state, hub = tiny_hub
    store = Store.open(f"sqlite:///{tmp_path / 'registry.db'}")
    state.add_repo(DRAFTER, files=drafter_files(tiny_dflash_dir, TARGET), date=DAY + timedelta(days=1),
                   tags=("dflash",))
    Watcher(store, HubClient(hub.url, None, tmp_path / "cache", timeout=30.0), ["tinyorg", "z-lab"]).poll_once()
    settings = Settings(home=tmp_path / "home")
    gpu_worker = replace(worker_capability(), device="cuda: NVIDIA H200", run_bytes_per_parameter=2.0)
    assert autoverify.run_settings(settings, worker_capability()).device == "auto"
    run = autoverify.run_settings(settings, gpu_worker)
    assert (run.device, run.dtype) == ("cuda", "bfloat16")
    [job] = autoverify.enqueue_ready(store, autoverify.make_plan(store, worker_capability()), run)
    assert job.num_gpus == 1 and job.payload["settings"]["device"] == "cuda"
    store.engine.dispose()
