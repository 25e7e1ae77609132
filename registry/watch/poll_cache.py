"""What one poll remembers between its units, and the one rule by which it forgets.

Per poll (`new_poll` starts them afresh): the drafted-targets index, the prefetched recorded state of listed
checkpoints, whether a sha is a recorded head, each drafter tag's id listing, and whether the once-a-poll reads
(untagged drafters, catalog drafters of unwatched orgs) are done.

The rule: the index and the prefetched states are read from the store, so they go (`drop`) whenever the store may
no longer hold what they were read from: a unit of work that rolled back (`unit`, the one way the watcher opens a
unit, drops them on its way out) and a write they do not follow, that is one that changes drafters, their targets
or a repo's id (a drafter's unit, a checkpoint's unit that attached drafters, a rename: the unit says so). A
checkpoint's own unit changes only its own state, which its unit used up. The sha index only grows (a recorded
head stays one: a rolled-back unit leaves a sha marked, harmless, a rename check then asks the database).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from registry.domain.watch_records import CheckpointState
from registry.hub import ListedRepo
from registry.store import Store
from registry.watch.classify import DraftedIndex


class PollCache:
    def __init__(self) -> None:
        self.new_poll()

    def new_poll(self) -> None:
        self._index: DraftedIndex | None = None
        # Recorded state of listed checkpoints, read for a whole listing at once; each entry is used once, by its
        # own model's unit.
        self._states: dict[str, CheckpointState | None] = {}
        # Whether a sha is the head of a recorded checkpoint or drafter of any org: a listed model whose sha is
        # none cannot be a moved one.
        self.head_shas: dict[str | None, bool] = {}
        # Each drafter tag's id listing this poll (None: it failed); None until the first query unit reads them.
        self.tag_ids: dict[str, list[ListedRepo] | None] | None = None
        self.untagged_done = False  # drafters no tag lists any more were read this poll
        self.catalog_done = False  # catalog drafters outside the watched orgs were checked this poll

    def drop(self) -> None:
        """The store may no longer hold what the index and the prefetched states were read from (see the rule).
        A push hint calls it from the webhook's thread too: each part is replaced whole, never emptied in place."""
        self._index = None
        self._states = {}

    @contextmanager
    def unit(self, store: Store) -> Iterator[None]:
        """`store.unit()`, dropping what may hold what it rolled back."""
        try:
            with store.unit():
                yield
        except BaseException:
            self.drop()
            raise

    def drafted(self, read: Callable[[], DraftedIndex]) -> DraftedIndex:
        index = self._index
        if index is None:
            index = self._index = read()
        return index

    def unfetched(self, repo_ids: list[str]) -> list[str]:
        return [repo_id for repo_id in repo_ids if repo_id not in self._states]

    def keep_states(self, states: dict[str, CheckpointState | None]) -> None:
        self._states.update(states)

    def take_state(self, repo_id: str) -> tuple[bool, CheckpointState | None]:
        """(prefetched, its state): a prefetched state is handed out once, to its own model's unit."""
        state = self._states.pop(repo_id, _ABSENT)
        return (False, None) if state is _ABSENT else (True, state)  # type: ignore[return-value]


_ABSENT = object()
