"""The store the API builds bodies from, one per data version: what many answers share is read once per version.

Every target's answer reads its drafters and their head revisions, and a few hundred drafters serve ten
thousand targets, so reading them per answer was most of a cold answer's queries (bench/api.py: 20 queries
per `/v1/targets/{id}/drafters` body, 12 of them for drafters). A drafter or revision change moves the data
version (the watcher records an event for each; registry/store/read_only.py: data_version), and the app then
builds bodies from a new SnapshotStore, so nothing read here outlives the version it was read at.
"""

from __future__ import annotations

import threading

from registry.domain.records import DrafterRecord, DrafterRevisionRecord
from registry.store import Store
from registry.store.lifecycle import RepoLifecycle
from registry.store.reads import Reads


class _RememberingReads(Reads):
    """The store's reads, with drafters and their head revisions remembered for this object's lifetime."""

    def __init__(self, core: Store, lifecycle: RepoLifecycle) -> None:
        super().__init__(core, lifecycle)
        self._lock = threading.Lock()
        self._drafters: dict[str, DrafterRecord | None] = {}
        self._heads: dict[str, DrafterRevisionRecord | None] = {}

    def get_drafter(self, repo_id: str) -> DrafterRecord | None:
        with self._lock:
            if repo_id in self._drafters:
                return self._drafters[repo_id]
        found = super().get_drafter(repo_id)
        with self._lock:
            self._drafters[repo_id] = found
        return found

    def drafter_head_revision(self, repo_id: str) -> DrafterRevisionRecord | None:
        with self._lock:
            if repo_id in self._heads:
                return self._heads[repo_id]
        found = super().drafter_head_revision(repo_id)
        with self._lock:
            self._heads[repo_id] = found
        return found


class SnapshotStore(Store):
    """A read-only Store whose drafter reads are remembered for its lifetime (one data version)."""

    def __init__(self, base: Store) -> None:
        super().__init__(base.engine)
        self.reads = _RememberingReads(self, self.lifecycle)
