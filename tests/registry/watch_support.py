"""Helpers of the watcher's fault and kill tests: a Hub client with quick retries, and a picture of the database."""

from __future__ import annotations

from pathlib import Path

from registry.hub import HubClient
from registry.store import Store
from tests.snapshot import snapshot

Events = list[tuple[object, ...]]
Tables = dict[str, list[str]]
Picture = tuple[Events, Tables]


def make_client(url: str, cache_dir: Path, **overrides: float) -> HubClient:
    options: dict = {"timeout": 5.0, "max_retries": 2, "backoff_base": 0.01, "backoff_cap": 0.05, **overrides}
    return HubClient(url, None, cache_dir, **options)


def picture(store: Store) -> Picture:
    """Every event with its dedupe key and payload, in order, and every table's rows.

    `snapshot` already leaves out surrogate ids and clock columns, which legitimately differ between a run with a
    fault and one without: watch_cursor's polled_at/lease_* (when and by whom an org was last polled) and the
    *_at times of rows. watch_cursor.last_error is kept on purpose: the clean rerun must clear it.
    """
    events = [(e.type, e.subject, e.dedupe_key, e.org, e.family, e.payload) for e in store.events.events()]
    return events, snapshot(store.engine)
