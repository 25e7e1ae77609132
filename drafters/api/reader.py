"""The API's reading side: the database's read object (registry/store/read_queries.py, the one the dashboard reads
through too), the data version and what its moves drop, and the built answers (bytes and headers) the app and its
ASGI fast path send.

A body is built once and then served from memory until a write touches what it shows (drafters/api/cache.py
says what each change drops); one request builds a missing body while the others asking for it wait, and a
body new runs made stale is rebuilt by one thread while the stale one still answers. The data version is read
at most once a second, by one thread.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from urllib.parse import parse_qsl, urlencode

from fastapi import Request
from fastapi.responses import Response

from drafters.api import bodies
from drafters.api.cache import BodyCache, Key
from drafters.api.problems import ApiError
from registry.domain.json_shapes import versioned
from registry.domain.records import DataParts
from registry.store import Store
from registry.store.db import DatabaseError
from registry.store.read_queries import ReadOnlyQueries

log = logging.getLogger(__name__)
CACHE_BYTES = 64 * 2**20  # the body cache's cap (bodies, keys and headers), per API process
# How long one data-version read answers for: a change shows within this long, and a busy server reads the
# version once per interval instead of once per request.
DATA_VERSION_TTL_S = 1.0
# If-Modified-Since answers 304 only for a date this much after the server saw the body's data change: HTTP dates
# count whole seconds, and another API process may have seen (or missed, for up to DATA_VERSION_TTL_S) a change
# at another instant, so an echoed Last-Modified of the same second proves nothing. The ETag is the validator.
MODIFIED_SINCE_MARGIN = timedelta(seconds=2)
BUILD_WAIT_S = 5.0  # how long a request waits for another one building the same body


@dataclass(frozen=True)
class Body:
    """One built answer: its bytes and the headers of its 200 and of its 304, ready to send."""

    content: bytes
    etag: str
    changed_at: datetime | None
    ok_headers: list[tuple[bytes, bytes]]
    not_modified_headers: list[tuple[bytes, bytes]]

    @classmethod
    def of(cls, content: bytes, changed_at: datetime | None, link: str | None = None) -> Body:
        etag = '"' + hashlib.sha256(content).hexdigest()[:32] + '"'
        validators = _validators(etag, changed_at)
        extra = {} if link is None else {"Link": link}
        # The same headers Starlette's Response writes (tests/test_api.py compares both paths byte for byte).
        return cls(content, etag, changed_at,
                   Response(content, media_type="application/json", headers={**validators, **extra}).raw_headers,
                   Response(status_code=304, headers=validators).raw_headers)


def _validators(etag: str, changed_at: datetime | None) -> dict[str, str]:
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if changed_at is not None:
        headers["Last-Modified"] = format_datetime(changed_at.astimezone(UTC).replace(microsecond=0), usegmt=True)
    return headers


def query_key(path: str, query_string: bytes) -> Key:
    """The cache key of a request: its path and its parameters, sorted (the order they come in is no part of the
    answer). The app refuses unknown or repeated parameters before it caches anything."""
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    return path, tuple(sorted(pairs))


def _version_tag(parts: DataParts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


class Reader:
    """The database's read object, opened on first use (the database may not exist yet when the server starts), and
    the body cache: a body is built once and then served from memory until a write touches what it shows."""

    def __init__(self, url: str | None, cache_bytes: int = CACHE_BYTES) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()  # held by the one thread reading the data version
        self._db: ReadOnlyQueries | None = None
        self._snapshot: Store | None = None  # drafters remembered until the catalog moves
        self.cache = BodyCache(cache_bytes)
        self._version: tuple[float, DataParts, str] | None = None  # (read at, parts, tag)
        self._building: dict[Key, threading.Event] = {}  # keys a request is building now
        self._refresh_pool: ThreadPoolExecutor | None = None
        self.built = 0  # bodies built (not served from the cache): tests read it
        self.served_from_memory = 0  # answers the ASGI layer sent without the app (_CachedReads)

    def version_tag(self) -> str | None:
        with self._lock:
            return None if self._version is None else self._version[2]

    def data_version(self) -> str:
        """The data version's tag, read again once it is DATA_VERSION_TTL_S old. One thread reads it (about 7 ms
        at 100,000 runs); a request that comes while it does uses the version it replaces, as it would have had
        it come a moment earlier, instead of forty threads running the same query at once. A new version drops
        what its change touched (drafters/api/cache.py)."""
        with self._lock:
            known = self._version
        if known is not None and time.monotonic() - known[0] < DATA_VERSION_TTL_S:
            return known[2]
        if not self._refreshing.acquire(blocking=known is None):
            assert known is not None
            return known[2]
        try:
            db = self.db()
            now = time.monotonic()
            parts = db.version.parts()
            old = None if known is None else known[1]
            if old is None or (old.events, old.verdicts, old.catalog) != (parts.events, parts.verdicts, parts.catalog):
                self.cache.clear()
                with self._lock:
                    self._snapshot = db.snapshot()
            elif old.runs != parts.runs:
                runs = db.version.runs_after(old.runs_max_id)
                # Every run above the old newest id accounts for the whole change in count: nothing committed late
                # below it (PostgreSQL) and nothing went away. Otherwise every body that shows runs goes.
                exact = runs.count - old.runs_count == runs.added
                for rebuild in self.cache.invalidate_runs(runs.pairs if exact else None):
                    self._refresher().submit(rebuild)
                parts = replace(parts, runs=(runs.count, runs.max_id))  # the snapshot the pairs were read in
            with self._lock:
                self._version = (now, parts, _version_tag(parts))
        finally:
            self._refreshing.release()
        return self._version[2]

    def _refresher(self) -> ThreadPoolExecutor:
        """One thread that rebuilds stale bodies (made on first use: after `drafters serve` forks its workers)."""
        with self._lock:
            if self._refresh_pool is None:
                self._refresh_pool = ThreadPoolExecutor(1, thread_name_prefix="api-refresh")
            return self._refresh_pool

    def snapshot(self) -> Store:
        with self._lock:
            snapshot = self._snapshot
        return snapshot if snapshot is not None else self.store()

    def version_due(self) -> bool:
        """The data version has been read and is due to be read again."""
        with self._lock:
            known = self._version
        return known is not None and time.monotonic() - known[0] >= DATA_VERSION_TTL_S

    def cached(self, key: Key, *, stale_ok: bool = False) -> Body | None:
        """The cached body for this request while the data version read stands (no query, no thread): what the
        event loop answers by itself. None: the app builds it (or reads the version again) in its thread pool."""
        with self._lock:
            known = self._version
            if known is None:
                return None
            # Past its time, the version is still the one to answer with while another request reads the new
            # one (see data_version); otherwise this request goes to the app, which reads it.
            if time.monotonic() - known[0] >= DATA_VERSION_TTL_S and not (stale_ok or self._refreshing.locked()):
                return None
        return self.cache.get(key)

    def db(self) -> ReadOnlyQueries:
        """The database's read object, opened on first use; 503 while there is none or its schema is not current."""
        with self._lock:
            if self._db is None:
                if self.url is None:
                    raise ApiError(503, "no database is configured")
                try:
                    db = ReadOnlyQueries(self.url)
                except DatabaseError as exc:
                    raise ApiError(503, str(exc)) from None
                problem = db.schema_problem()
                if problem is not None:
                    db.close()
                    raise ApiError(503, problem)
                self._db = db
            return self._db

    def store(self) -> Store:
        return self.db().store

    def answer(self, request: Request, build: Callable[[Store], bodies.Built], *, live: bool = False) -> Response:
        """The body `build` makes, from the cache until a write touches it. `live`: a body that changes with time
        alone (which workers are live, which events have settled), built on every request; its ETag still
        answers 304."""
        self.store()
        tag = self.data_version()
        key = query_key(request.scope["path"], request.scope["query_string"])
        cached, mine = (None, None) if live else self._cached_or_claim(key)
        if cached is None:
            try:
                cached = self._build(key, build, live, request.url.path, dict(request.query_params))
            finally:
                if mine is not None:
                    with self._lock:
                        if self._building.get(key) is mine:
                            del self._building[key]
                    mine.set()
        if not_modified(request.headers.get("if-none-match"), request.headers.get("if-modified-since"),
                         cached.etag, cached.changed_at):
            return Response(status_code=304, headers={**_validators(cached.etag, cached.changed_at),
                                                      "X-Data-Version": tag})
        return raw_response(cached.ok_headers, cached.content, tag)

    def _cached_or_claim(self, key: Key) -> tuple[Body | None, threading.Event | None]:
        """The cached body; or none and the event this request sets once it has built it. A body a write just
        dropped is asked for by many clients at once: one builds it and the others wait for it (a build per
        request was the tail of the warm path with a writer running: bench/api.py). A builder slower than
        BUILD_WAIT_S is not waited for longer: (None, None), build it here too."""
        while True:
            found = self.cache.get(key)
            if found is not None:
                return found, None
            with self._lock:
                building = self._building.get(key)
                if building is None:
                    mine = self._building[key] = threading.Event()
                    return None, mine
            if not building.wait(BUILD_WAIT_S):
                return None, None

    def _build(self, key: Key, build: Callable[[Store], bodies.Built], live: bool, path: str,
               params: dict[str, str]) -> Body:
        generation = self.cache.generation()
        built = build(self.snapshot())
        content = json.dumps(versioned(built.body), separators=(",", ":"), default=str).encode()
        changed_at = None if live else self.cache.changed_at(built.scope)
        cached = Body.of(content, changed_at, _link(path, params, built.next_query))
        with self._lock:
            self.built += 1
        if not live:
            size = len(content) + sum(len(name) + len(value) for name, value in cached.ok_headers)
            self.cache.put(key, cached, built.scope, size, generation,
                           rebuild=lambda: self._refresh(key, build, path, params))
        return cached

    def _refresh(self, key: Key, build: Callable[[Store], bodies.Built], path: str, params: dict[str, str]) -> None:
        """Build the successor of a body new runs made stale (in the refresher thread, off the request path)."""
        try:
            self._build(key, build, False, path, params)
        except Exception:  # noqa: BLE001 - the stale body expires and a request builds it (and reports why)
            log.debug("refreshing %s failed", path, exc_info=True)


def raw_response(headers: list[tuple[bytes, bytes]], content: bytes, tag: str) -> Response:
    """A 200 with exactly the cached headers (the ASGI layer sends the same ones) and the data version."""
    response = Response(content)
    response.raw_headers = [*headers, (b"x-data-version", tag.encode())]
    return response


def _link(path: str, params: dict[str, str], next_query: dict[str, str] | None) -> str | None:
    """The RFC 8288 Link to the next page: this request's parameters with the next page's cursor."""
    if next_query is None:
        return None
    kept = {k: v for k, v in params.items() if k not in next_query}
    return f'<{path}?{urlencode({**kept, **next_query})}>; rel="next"'


def token_ok(token: str | None, given: str) -> bool:
    if token is None:
        return True
    scheme, _, value = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


def _opaque(tag: str) -> str:
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def not_modified(match: str | None, since: str | None, etag: str, changed_at: datetime | None) -> bool:
    if match is not None:  # If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2)
        # The weak comparison (RFC 9110 §8.8.3.2, §13.1.2): W/"x" matches "x".
        return match.strip() == "*" or _opaque(etag) in {_opaque(m) for m in match.split(",")}
    if since is None or changed_at is None:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False
    return when.tzinfo is not None and when >= changed_at + MODIFIED_SINCE_MARGIN


