"""The store the API builds bodies from, one per data version: what many answers share is read once per version.

Every target's answer reads its drafters and their head revisions, and a few hundred drafters serve ten
thousand targets, so reading them per answer was most of a cold answer's queries (bench/api.py: 20 queries
per `/v1/targets/{id}/drafters` body, 12 of them for drafters). A drafter or revision change moves the events
part of the data version (the watcher records an event for each; registry/store/read_only.py: data_parts), and
the app then builds bodies from a new SnapshotStore, so nothing read here outlives the catalog it was read from.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from registry.domain.records import DrafterRecord, DrafterRevisionRecord
from registry.store import Store
from registry.store.lifecycle import RepoLifecycle
from registry.store.reads import Reads

_Read = TypeVar("_Read")


class _RememberingReads(Reads):
    """The store's reads, with drafters and their head revisions remembered for this object's lifetime."""

    def __init__(self, core: Store, lifecycle: RepoLifecycle) -> None:
        super().__init__(core, lifecycle)
        self._lock = threading.Lock()
        self._drafters: dict[str, DrafterRecord | None] = {}
        self._heads: dict[str, DrafterRevisionRecord | None] = {}

    def get_drafter(self, repo_id: str) -> DrafterRecord | None:
        return self._remembered(self._drafters, repo_id, super().get_drafter)

    def drafter_head_revision(self, repo_id: str) -> DrafterRevisionRecord | None:
        return self._remembered(self._heads, repo_id, super().drafter_head_revision)

    def _remembered(self, cache: dict[str, _Read], repo_id: str, read: Callable[[str], _Read]) -> _Read:
        with self._lock:
            if repo_id in cache:
                return cache[repo_id]
        found = read(repo_id)  # outside the lock: two threads may both read it once, never wait on each other
        with self._lock:
            cache[repo_id] = found
        return found


class SnapshotStore(Store):
    """A read-only Store whose drafter reads are remembered for its lifetime (one data version)."""

    def __init__(self, base: Store) -> None:
        super().__init__(base.engine, reads=_RememberingReads)  # store.watch reads through the same object
