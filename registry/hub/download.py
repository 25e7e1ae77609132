"""Downloads for measurements: a repo at the exact commit the registry recorded, only what a measurement loads.

Only config/tokenizer JSON, tokenizer vocabularies and safetensors (+ index) files are fetched — never pickle
weights and never `*.py` — through `HubClient.snapshot` into one folder per (repo, sha) under the service's own
download root. Every download is in the ledger (`registry.store.downloads`): the disk budget counts it, LRU
eviction deletes only folders the ledger lists (never anything the service did not download), and a folder is
handed to a measurement only once its row is `complete` and every expected file is on disk at its Hub size, so a
download killed midway is never measured: the next fetch resumes it, keeping the files it finished.

A mirror is outside content like any other: only the files the revision lists (and the budget counted) are
fetched, a body is never read past the file's advertised size, and an LFS file whose bytes do not hash to the
advertised sha256 is deleted and the download failed.
"""

from __future__ import annotations

import errno
import hashlib
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub.utils import filter_repo_objects

from registry.errors import Failed
from registry.hub import HubClient
from registry.domain.memory import binary_size
from registry.domain.names import COMMIT_SHA
from registry.hub.types import GatedRepo, HubError, RepoNotFound, RevisionNotFound
from registry.store import Store
from registry.store import downloads as ledger

ALLOW_PATTERNS = ["*.json", "*.safetensors", "tokenizer.model", "*.tiktoken", "merges.txt", "vocab.txt"]
# Belt and braces: whatever a repo names its files, code and pickles never come down.
IGNORE_PATTERNS = ["*.py", "*.pyc", "*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle", "*.ckpt", "*.h5", "*.msgpack",
                   "*.onnx", "*.gguf", "*.zip", "*.tar*"]
PROGRESS_EVERY_S = 0.5


class DownloadFailed(Failed):
    """A download that did not complete (exit status 1), with a one-line reason; `retry` says whether trying again
    may help."""

    def __init__(self, reason: str, *, retry: bool) -> None:
        super().__init__(reason)
        self.reason, self.retry = reason, retry


@dataclass(frozen=True)
class Fetched:
    repo_id: str
    sha: str
    path: Path
    bytes: int  # downloaded by this call (0 when the folder was already complete)
    seconds: float


def wanted(paths: Iterable[str]) -> list[str]:
    return list(filter_repo_objects(list(paths), allow_patterns=ALLOW_PATTERNS, ignore_patterns=IGNORE_PATTERNS))


@dataclass
class Downloader:
    store: Store
    client: HubClient
    root: Path
    budget_bytes: int
    on_progress: Callable[[str, int, int], None] | None = None  # (repo@sha, bytes on disk, bytes expected)

    def folder(self, repo_id: str, sha: str) -> Path:
        return self.root / repo_id.replace("/", "--") / sha

    def complete_folder(self, repo_id: str, sha: str) -> Path | None:
        """The folder of a finished download, or None (never a folder whose download is still partial)."""
        row = self.store.downloads.get_download(repo_id, sha)
        if row is None or row.status != ledger.COMPLETE or not Path(row.path).is_dir():
            return None
        return Path(row.path)

    def in_use_bytes(self) -> int:
        rows = self.store.downloads.list_downloads()
        return sum(max(row.bytes_total or 0, row.bytes_done) for row in rows
                   if row.status in (ledger.COMPLETE, ledger.DOWNLOADING))

    def fetch(self, repo_id: str, sha: str, *, keep: Iterable[tuple[str, str]] = ()) -> Fetched:
        """The repo at `sha`, downloaded (or resumed) within the budget; `keep`: downloads not to evict for room."""
        if not COMMIT_SHA.fullmatch(sha):
            raise DownloadFailed(f"{repo_id}: downloads are pinned to a 40-hex commit sha, not {sha!r}", retry=False)
        done = self.complete_folder(repo_id, sha)
        if done is not None:
            self.store.downloads.touch(repo_id, sha)
            return Fetched(repo_id, sha, done, 0, 0.0)
        try:
            revision = self.client.revision(repo_id, sha)
        except (RevisionNotFound, RepoNotFound) as error:
            raise DownloadFailed(f"gone: {error}", retry=False) from error
        except GatedRepo as error:
            raise DownloadFailed(f"gated: {error}", retry=False) from error
        except HubError as error:
            raise DownloadFailed(str(error), retry=True) from error
        chosen = set(wanted(f.path for f in revision.files))
        files = {f.path: f.size for f in revision.files if f.path in chosen}
        digests = {f.path: f.lfs_sha256 for f in revision.files if f.path in chosen and f.lfs_sha256}
        unsized = sorted(path for path, size in files.items() if size is None)
        if unsized:
            # A file of unknown size could not count against the budget, nor its body be bounded.
            raise DownloadFailed(f"{repo_id}@{sha[:12]}: the Hub gives no size for {', '.join(unsized[:3])}; not "
                                 "downloaded", retry=False)
        if not any(path.endswith(".safetensors") for path in files):
            raise DownloadFailed(f"{repo_id}@{sha[:12]} has no safetensors weights (pickle is never loaded)",
                                 retry=False)
        total = sum(size or 0 for size in files.values())
        folder = self.folder(repo_id, sha)
        self._make_room(repo_id, sha, total, {(repo_id, sha), *keep})
        folder.mkdir(parents=True, exist_ok=True)
        _drop_stale_partials(folder)
        on_disk = _bytes_in(folder)
        free = shutil.disk_usage(folder).free
        if free < total - on_disk:
            raise self._failed(repo_id, sha, f"disk full: {repo_id} needs {binary_size(total - on_disk)}, {binary_size(free)} free",
                               on_disk, 0.0, register=True, path=folder, total=total)
        self.store.downloads.start_download(repo_id, sha, str(folder), total)
        what = f"{repo_id}@{sha[:12]}"
        stop = threading.Event()
        watcher = threading.Thread(target=self._report, args=(repo_id, sha, what, folder, total, stop), daemon=True)
        started = time.monotonic()
        watcher.start()
        try:
            # Exactly the files counted against the budget, each bounded by its size.
            self.client.snapshot(repo_id, sha, folder, files={p: size or 0 for p, size in files.items()})
        except HubError as error:
            cause = error.__cause__
            if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
                raise self._failed(repo_id, sha, f"disk full while downloading {repo_id}", _bytes_in(folder),
                                   time.monotonic() - started) from error
            gone = isinstance(error, (RevisionNotFound, RepoNotFound))
            prefix = "gated: " if isinstance(error, GatedRepo) else "gone: " if gone else ""
            raise self._failed(repo_id, sha, f"{prefix}{error}", _bytes_in(folder), time.monotonic() - started,
                               retry=not (gone or prefix)) from error
        except OSError as error:
            reason = (f"disk full while downloading {repo_id}" if error.errno == errno.ENOSPC
                      else f"{repo_id}: {type(error).__name__}: {error}")
            raise self._failed(repo_id, sha, reason, _bytes_in(folder), time.monotonic() - started) from error
        finally:
            stop.set()
            watcher.join()
        seconds = time.monotonic() - started
        missing = [path for path, size in files.items()
                   if not (folder / path).is_file() or (size is not None and (folder / path).stat().st_size != size)]
        if missing:
            raise self._failed(repo_id, sha, f"{repo_id}@{sha[:12]}: incomplete download ({', '.join(missing)})",
                               _bytes_in(folder), seconds, retry=True)
        corrupt = [path for path, digest in digests.items() if _sha256(folder / path) != digest.lower()]
        if corrupt:
            for path in corrupt:
                (folder / path).unlink(missing_ok=True)  # never measured; the next fetch downloads it again
            raise self._failed(repo_id, sha, f"{repo_id}@{sha[:12]}: {', '.join(corrupt)} does not match the sha256 "
                               "the Hub advertises (deleted)", _bytes_in(folder), seconds, retry=True)
        fetched = total - on_disk
        self.store.downloads.finish_download(repo_id, sha, bytes_done=total, seconds=seconds)
        if self.on_progress is not None:
            self.on_progress(what, total, total)
        return Fetched(repo_id, sha, folder, fetched, seconds)

    def _failed(self, repo_id: str, sha: str, reason: str, done: int, seconds: float, *, retry: bool = False,
                register: bool = False, path: Path | None = None, total: int | None = None) -> DownloadFailed:
        if register:
            self.store.downloads.start_download(repo_id, sha, str(path), total)
        self.store.downloads.finish_download(repo_id, sha, bytes_done=done, seconds=seconds, error=reason)
        return DownloadFailed(reason, retry=retry)

    def _report(self, repo_id: str, sha: str, what: str, folder: Path, total: int, stop: threading.Event) -> None:
        """Bytes on disk (finished files and partial ones) into the ledger and to the progress callback."""
        while not stop.wait(PROGRESS_EVERY_S):
            done = min(_bytes_in(folder), total)
            try:
                self.store.downloads.progress(repo_id, sha, done)
            except Exception:  # noqa: BLE001 - progress is advisory; the download goes on
                pass
            if self.on_progress is not None:
                self.on_progress(what, done, total)

    def _make_room(self, repo_id: str, sha: str, needed: int, keep: set[tuple[str, str]]) -> None:
        """Evict the least recently used complete downloads (only the service's own) until `needed` fits."""
        if needed > self.budget_bytes:
            raise DownloadFailed(f"{repo_id} needs {binary_size(needed)} of disk, more than the download budget of "
                                 f"{binary_size(self.budget_bytes)}", retry=False)
        rows = self.store.downloads.list_downloads()
        used = sum(max(row.bytes_total or 0, row.bytes_done) for row in rows
                   if row.status in (ledger.COMPLETE, ledger.DOWNLOADING) and (row.repo_id, row.revision) != (repo_id, sha))
        for row in rows:  # least recently used first
            if used + needed <= self.budget_bytes:
                return
            if row.status != ledger.COMPLETE or (row.repo_id, row.revision) in keep:
                continue
            path = Path(row.path)
            if path.is_dir() and path.resolve().is_relative_to(self.root.resolve()):
                shutil.rmtree(path, ignore_errors=True)
            self.store.downloads.mark_evicted(row.repo_id, row.revision)
            used -= row.bytes_total or row.bytes_done
        if used + needed > self.budget_bytes:
            raise DownloadFailed(f"{repo_id} needs {binary_size(needed)} of disk; {binary_size(used)} of the {binary_size(self.budget_bytes)} "
                                 "download budget is held by downloads in use", retry=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _bytes_in(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _drop_stale_partials(folder: Path) -> None:
    """huggingface_hub writes each file to a per-process `*.incomplete` temp file and renames it when done; a
    process killed midway leaves its temp file behind, which no later download reuses."""
    for partial in folder.rglob("*.incomplete"):
        partial.unlink(missing_ok=True)
