"""`drafters serve`: the registry as a read-only HTTP JSON API, and the Hub webhook endpoint, in one ASGI app.

FastAPI on Starlette, served by uvicorn (drafters/api/server.py): maintained, typed routes with the OpenAPI
document generated from them, and a server that bounds connections, idle time and header sizes so that no
hand-written socket code does (docs/api.md says why this stack).

Reads go through a read-only engine (registry/store/read_only.py: SQLite `query_only`, PostgreSQL read-only
sessions). Every body carries `schema_version`; each answer has an ETag (a hash of its bytes) and a
Last-Modified (the newest change among what it shows), and a repeated request with either gets 304. Bodies are
cached by request and by the database's data version (one query, read at most once a second), so a repeated
read costs no query; a cached GET is answered by a pure ASGI layer in front of FastAPI (`_CachedReads`), since
routing, validation and the thread hop cost more than the answer (bench/api.py: 1.7–3× the warm throughput).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from sqlalchemy import Engine

from drafters.api import bodies
from drafters.api.push_route import hub_webhook
from drafters.api.snapshot import SnapshotStore
from registry.domain.json_shapes import SCHEMA_VERSION, versioned
from registry.store import NotFound, Store
from registry.store.db import DatabaseError
from registry.store.read_only import data_version, open_read_only, schema_problem
from registry.watch.push import PushQueue

CACHE_ENTRIES = 4096
# How long one data-version read answers for: a change shows within this long, and a busy server reads the
# version once per interval instead of once per request.
DATA_VERSION_TTL_S = 1.0


@dataclass
class ApiConfig:
    database_url: str | None
    token: str | None = None  # bearer token the read routes ask for; None: open (bind to loopback)
    cors_origins: list[str] = field(default_factory=list)
    push: PushQueue | None = None  # the Hub webhook endpoint, when a secret is configured
    today: Callable[[], date] = lambda: datetime.now(UTC).date()


@dataclass(frozen=True)
class _Body:
    """One built answer: its bytes and the headers of its 200 and of its 304, ready to send."""

    content: bytes
    etag: str
    changed_at: datetime | None
    ok_headers: list[tuple[bytes, bytes]]
    not_modified_headers: list[tuple[bytes, bytes]]

    @classmethod
    def of(cls, content: bytes, changed_at: datetime | None) -> _Body:
        etag = '"' + hashlib.sha256(content).hexdigest()[:32] + '"'
        validators = _validators(etag, changed_at)
        # The same headers Starlette's Response writes (tests/test_api.py compares both paths byte for byte).
        return cls(content, etag, changed_at,
                   Response(content, media_type="application/json", headers=validators).raw_headers,
                   Response(status_code=304, headers=validators).raw_headers)


def _validators(etag: str, changed_at: datetime | None) -> dict[str, str]:
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if changed_at is not None:
        headers["Last-Modified"] = format_datetime(changed_at.astimezone(UTC).replace(microsecond=0), usegmt=True)
    return headers


class _Reader:
    """The read-only store, opened on first use (the database may not exist yet when the server starts), and the
    body cache keyed by the data version: a body is built once per data version and then served from memory.
    The cache is emptied when the version moves, so it never holds answers about older data."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()  # held by the one thread reading the data version
        self._engine: Engine | None = None
        self._store: Store | None = None
        self._snapshot: SnapshotStore | None = None  # the store of the current data version
        self._cache: OrderedDict[tuple[Any, ...], _Body] = OrderedDict()
        self._version: tuple[float, tuple[object, ...], datetime | None] | None = None
        self.built = 0  # bodies built (not served from the cache): tests read it
        self.served_from_memory = 0  # answers the ASGI layer sent without the app (_CachedReads)

    def data_version(self) -> tuple[tuple[object, ...], datetime | None]:
        """The data version, read again once it is DATA_VERSION_TTL_S old. One thread reads it (the query counts
        the runs: about 7 ms at 100,000); a request that comes while it does uses the version it replaces, as it
        would have had it come a moment earlier, instead of forty threads running the same query at once."""
        with self._lock:
            known = self._version
        if known is not None and time.monotonic() - known[0] < DATA_VERSION_TTL_S:
            return known[1], known[2]
        if not self._refreshing.acquire(blocking=known is None):
            assert known is not None
            return known[1], known[2]
        try:
            assert self._engine is not None and self._store is not None  # store() ran first
            now = time.monotonic()
            version, changed_at = data_version(self._engine)
            with self._lock:
                if self._version is None or version != self._version[1]:
                    self._cache.clear()
                    self._snapshot = SnapshotStore(self._store)
                self._version = (now, version, changed_at)
        finally:
            self._refreshing.release()
        return version, changed_at

    def snapshot(self, version: tuple[object, ...]) -> Store:
        """The store for bodies of `version`: the snapshot store while it is current, else a plain one (the
        version moved while this request was on its way)."""
        with self._lock:
            current = self._version is not None and self._version[1] == version
            snapshot = self._snapshot
        return snapshot if current and snapshot is not None else self.store()

    def version_due(self) -> bool:
        """The data version has been read and is due to be read again."""
        with self._lock:
            known = self._version
        return known is not None and time.monotonic() - known[0] >= DATA_VERSION_TTL_S

    def cached(self, path: str, query: bytes, *, stale_ok: bool = False) -> _Body | None:
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
            key = (path, query, known[1])
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)  # least recently used goes first when the cache is full
            return found

    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                if self.url is None:
                    raise HTTPException(503, "no database is configured")
                try:
                    engine = open_read_only(self.url)
                except DatabaseError as exc:
                    raise HTTPException(503, str(exc)) from None
                problem = schema_problem(engine)
                if problem is not None:
                    engine.dispose()
                    raise HTTPException(503, problem)
                self._engine, self._store = engine, Store(engine)
            return self._store

    def answer(self, request: Request, build: Callable[[Store], Any], *, live: bool = False) -> Response:
        """The body `build` makes, from the cache while the data version stands. `live`: a body that changes with
        time alone (which workers are live), built on every request; its ETag still answers 304."""
        store = self.store()
        version, changed_at = (None, None) if live else self.data_version()
        if version is not None:
            store = self.snapshot(version)
        key = (request.scope["path"], request.scope["query_string"], version)
        cached = None
        if not live:
            with self._lock:
                cached = self._cache.get(key)
                if cached is not None:
                    self._cache.move_to_end(key)
        if cached is None:
            try:
                body = build(store)
            except NotFound as exc:
                raise HTTPException(404, str(exc.args[0] if exc.args else exc)) from None
            cached = _Body.of(json.dumps(versioned(body), separators=(",", ":"), default=str).encode(), changed_at)
            with self._lock:
                self.built += 1
                if not live and self._version is not None and self._version[1] == version:
                    self._cache[key] = cached
                    while len(self._cache) > CACHE_ENTRIES:
                        self._cache.popitem(last=False)
        if _not_modified(request.headers.get("if-none-match"), request.headers.get("if-modified-since"),
                         cached.etag, cached.changed_at):
            return Response(status_code=304, headers=_validators(cached.etag, cached.changed_at))
        return Response(cached.content, media_type="application/json",
                        headers=_validators(cached.etag, cached.changed_at))


class _CachedReads:
    """Pure ASGI in front of FastAPI: a GET whose body is in the cache is answered here, on the event loop, with
    no routing, validation, dependency injection or thread hop (those cost more than the answer). Everything
    else, a cache miss included, goes to the app, which validates, builds and caches; a request this layer
    cannot vouch for (a missing or wrong token) goes to the app too, which refuses it the usual way."""

    def __init__(self, app: Any, reader: _Reader, token: str | None) -> None:
        self.app = app
        self.reader = reader
        self.token = token
        self._reading_version = False  # a request of this event loop is reading the data version

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            if not self._reading_version and self.reader.version_due():
                # This request reads the version (in a thread) and then answers from it; the ones that arrive
                # meanwhile answer from the version it replaces. Left to the app, every request in flight went
                # through FastAPI until the read began: a stall of 70-150 ms each second at 100 clients.
                self._reading_version = True
                try:
                    await asyncio.get_running_loop().run_in_executor(None, self.reader.data_version)
                except Exception:  # noqa: BLE001 - the app answers this request and says what failed
                    pass
                finally:
                    self._reading_version = False
            body = self.reader.cached(scope["path"], scope["query_string"], stale_ok=self._reading_version)
            if body is not None:
                headers = {name: value for name, value in scope["headers"]
                           if name in (b"if-none-match", b"if-modified-since", b"authorization")}
                if _token_ok(self.token, headers.get(b"authorization", b"").decode("latin-1")):
                    # Counted before the send: once the bytes are out, a reader of the count may look before this
                    # coroutine runs again.
                    self.reader.served_from_memory += 1
                    match, since = headers.get(b"if-none-match"), headers.get(b"if-modified-since")
                    if _not_modified(None if match is None else match.decode("latin-1"),
                                     None if since is None else since.decode("latin-1"), body.etag, body.changed_at):
                        await send({"type": "http.response.start", "status": 304,
                                    "headers": body.not_modified_headers})
                        await send({"type": "http.response.body", "body": b""})
                    else:
                        await send({"type": "http.response.start", "status": 200, "headers": body.ok_headers})
                        await send({"type": "http.response.body", "body": body.content})
                    return
        await self.app(scope, receive, send)


def _token_ok(token: str | None, given: str) -> bool:
    if token is None:
        return True
    scheme, _, value = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


def _not_modified(match: str | None, since: str | None, etag: str, changed_at: datetime | None) -> bool:
    if match is not None:  # If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2)
        return etag in {m.strip() for m in match.split(",")} or match.strip() == "*"
    if since is None or changed_at is None:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False
    return when.tzinfo is not None and changed_at.replace(microsecond=0) <= when


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"schema_version": SCHEMA_VERSION, "error": message}, status_code=status)


def create_app(config: ApiConfig) -> FastAPI:
    app = FastAPI(
        title="Drafter Registry API", version=str(SCHEMA_VERSION),
        description="Read-only: which speculative-decoding drafters exist for a model, whether they fit, how much "
                    "they were measured to speed it up, and how to launch them. Every body carries "
                    "`schema_version` (docs/api.md).",
        docs_url="/docs", redoc_url=None, openapi_url="/openapi.json",
    )
    reader = _Reader(config.database_url)
    app.state.push = config.push
    app.state.reader = reader
    # Added first, so CORS (when configured) wraps it and adds its headers to the answers it sends too.
    app.add_middleware(_CachedReads, reader=reader, token=config.token)
    if config.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=config.cors_origins, allow_methods=["GET"],
                           allow_headers=["Authorization", "If-None-Match", "If-Modified-Since"])

    def authorized(request: Request) -> None:
        if config.token is None:
            return
        if not _token_ok(config.token, request.headers.get("authorization", "")):
            raise HTTPException(401, "a bearer token is required", headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors())
        return _error(422, problems)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        response = _error(exc.status_code, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    read = [Depends(authorized)]

    @app.get("/health", summary="Liveness")
    async def health() -> dict[str, Any]:  # on the event loop: no thread for a constant
        return {"schema_version": SCHEMA_VERSION, "status": "ok"}

    @app.get("/v1/targets/{target:path}/drafters", dependencies=read, summary="Drafters of a target")
    def target_drafters(request: Request, target: str,
                        gpu: str | None = Query(None, description="GPU class the launch draft length is priced for")
                        ) -> Response:
        """Every drafter with a verdict for the target (reasons, lag, measured τ and speedup per engine and
        hardware) and, for exact pairs, the launch command of each engine."""
        return reader.answer(request, lambda s: bodies.target_drafters(s, target, config.today(), gpu))

    @app.get("/v1/targets/{target:path}/recommendation", dependencies=read, summary="The drafter to use")
    def recommendation(request: Request, target: str,
                       engine: Literal["vllm", "sglang", "llamacpp"] = Query(..., description="the serving engine"),
                       gpu: str | None = Query(None, description="GPU class to rank for (default H100 SXM)")
                       ) -> Response:
        """One drafter, its command on the engine, and why (measured speedup on this hardware and engine, else a
        published τ, else the rule), with the ranked list it was chosen from."""
        return reader.answer(request, lambda s: bodies.recommendation(s, target, gpu, engine))

    @app.get("/v1/drafters/{drafter:path}", dependencies=read, summary="One drafter")
    def drafter(request: Request, drafter: str) -> Response:
        return reader.answer(request, lambda s: bodies.drafter(s, drafter))

    @app.get("/v1/lag", dependencies=read, summary="Lag per target, worst first (paged)")
    def lag(request: Request, limit: int = Query(100, ge=1, le=bodies.MAX_PAGE), offset: int = Query(0, ge=0)
            ) -> Response:
        def build(store: Store) -> dict[str, Any]:
            rows, total = bodies.lag_page(store, config.today(), limit, offset)
            return {"lag": rows, "total": total, "limit": limit, "offset": offset,
                    "next_offset": offset + limit if offset + limit < total else None}
        return reader.answer(request, build)

    @app.get("/v1/runs", dependencies=read, summary="Measured runs, newest first (paged)")
    def runs(request: Request, target: str | None = None, drafter: str | None = None, engine: str | None = None,
             status: str | None = None, limit: int = Query(100, ge=1, le=bodies.MAX_PAGE),
             offset: int = Query(0, ge=0)) -> Response:
        """Each run in the one JSON encoding `drafters runs --json` prints."""
        def build(store: Store) -> dict[str, Any]:
            page = bodies.runs_page(store, target=target, drafter=drafter, engine=engine, status=status,
                                    limit=limit + 1, offset=offset)
            return {"runs": page[:limit], "limit": limit, "offset": offset,
                    "next_offset": offset + limit if len(page) > limit else None}
        return reader.answer(request, build)

    @app.get("/v1/events", dependencies=read, summary="Events after a cursor")
    def events(request: Request, after: int = Query(0, ge=0, description="the last event id already seen"),
               limit: int = Query(100, ge=1, le=bodies.MAX_PAGE)) -> Response:
        def build(store: Store) -> dict[str, Any]:
            page = bodies.events_after(store, after, limit)
            return {"events": page, "next_after": page[-1]["id"] if page else after}
        return reader.answer(request, build)

    @app.get("/v1/plan", dependencies=read, summary="What is queued or still to be measured")
    def plan(request: Request, limit: int = Query(100, ge=1, le=bodies.MAX_PAGE)) -> Response:
        return reader.answer(request, lambda s: bodies.plan(s, limit), live=True)

    app.add_api_route("/", hub_webhook, methods=["POST"], summary="Hub webhook (X-Webhook-Secret)")
    app.add_api_route("/hub/webhook", hub_webhook, methods=["POST"], summary="Hub webhook (X-Webhook-Secret)")
    return app
