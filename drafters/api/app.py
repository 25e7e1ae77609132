"""`drafters serve`: the registry as a read-only HTTP JSON API, and the Hub webhook endpoint, in one ASGI app.

FastAPI on Starlette, served by uvicorn (drafters/api/server.py): maintained, typed routes with the OpenAPI
document generated from them, and a server that bounds connections, idle time and header sizes so that no
hand-written socket code does (docs/api.md says why this stack).

Reads go through a read-only engine (registry/store/read_only.py: SQLite `query_only`, PostgreSQL read-only
sessions). Every body carries `schema_version`; every error is problem+json (drafters/api/problems.py); body
shapes are drafters/api/schemas.py. Each answer has an ETag (a hash of its bytes; If-None-Match compares weakly,
RFC 9110 §13.1.2), a Last-Modified (when this server saw what it shows change) and X-Data-Version. Bodies are
cached as bytes (drafters/api/reader.py, drafters/api/cache.py), keyed by path and validated parameters, and
dropped by what a write changed: the data version is read at most once a second, and new runs drop only their
targets' and drafters' bodies. A cached GET or HEAD is answered by a pure ASGI layer in front of FastAPI (`_CachedReads`), since
routing, validation and the thread hop cost more than the answer (bench/api.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer

from drafters.api import bodies, problems, schemas
from drafters.api.problems import ApiError
from drafters.api.push_route import hub_webhook
from drafters.api.reader import CACHE_BYTES, Reader, not_modified, query_key, token_ok
from registry.domain.compat import VERDICT_ORDER
from registry.domain.json_shapes import SCHEMA_VERSION
from registry.domain.launch import ENGINES
from registry.store import Store
from registry.watch.push import PushQueue

VERDICTS = tuple(VERDICT_ORDER)  # the verdict words, from the one place that defines them


@dataclass
class ApiConfig:
    database_url: str | None
    token: str | None = None  # bearer token the read routes ask for; None: open (bind to loopback)
    cors_origins: list[str] = field(default_factory=list)
    push: PushQueue | None = None  # the Hub webhook endpoint, when a secret is configured
    today: Callable[[], date] = lambda: datetime.now(UTC).date()
    cache_bytes: int = CACHE_BYTES


class _CachedReads:
    """Pure ASGI in front of FastAPI: a GET or HEAD whose body is in the cache is answered here, on the event loop,
    with no routing, validation, dependency injection or thread hop (those cost more than the answer).
    Everything else, a cache miss included, goes to the app, which validates, builds and caches; a request this
    layer cannot vouch for (a missing or wrong token) goes to the app too, which refuses it the usual way."""

    def __init__(self, app: Any, reader: Reader, token: str | None) -> None:
        self.app = app
        self.reader = reader
        self.token = token
        self._reading_version = False  # a request of this event loop is reading the data version

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
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
            body = self.reader.cached(query_key(scope["path"], scope["query_string"]), stale_ok=self._reading_version)
            tag = self.reader.version_tag()
            if body is not None and tag is not None:
                headers = {name: value for name, value in scope["headers"]
                           if name in (b"if-none-match", b"if-modified-since", b"authorization")}
                if token_ok(self.token, headers.get(b"authorization", b"").decode("latin-1")):
                    # Counted before the send: once the bytes are out, a reader of the count may look before this
                    # coroutine runs again.
                    self.reader.served_from_memory += 1
                    match, since = headers.get(b"if-none-match"), headers.get(b"if-modified-since")
                    version = (b"x-data-version", tag.encode())
                    if not_modified(None if match is None else match.decode("latin-1"),
                                     None if since is None else since.decode("latin-1"), body.etag, body.changed_at):
                        await send({"type": "http.response.start", "status": 304,
                                    "headers": [*body.not_modified_headers, version]})
                        await send({"type": "http.response.body", "body": b""})
                    else:
                        await send({"type": "http.response.start", "status": 200,
                                    "headers": [*body.ok_headers, version]})
                        await send({"type": "http.response.body",
                                    "body": b"" if scope["method"] == "HEAD" else body.content})
                    return
        await self.app(scope, receive, send)


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route reads, its dependencies' included."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _known_parameters(request: Request) -> None:
    """Refuse a query parameter the route does not take, or one given twice: an ignored `?type=` reads as if it
    had filtered, and junk must not make cache entries."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = _query_names(route.dependant)
    given = [k for k, _ in request.query_params.multi_items()]
    unknown = sorted({k for k in given if k not in known})
    repeated = sorted({k for k in given if given.count(k) > 1})
    errors = [{"parameter": k, "reason": "not a parameter of this route; it takes: " + (", ".join(sorted(known))
                                                                                       or "none")} for k in unknown]
    errors += [{"parameter": k, "reason": "given more than once"} for k in repeated]
    if errors:
        raise ApiError(422, "; ".join(f"{e['parameter']}: {e['reason']}" for e in errors), errors=errors)


Limit = Annotated[int, Query(ge=1, le=bodies.MAX_PAGE, description="rows per page")]
Cursor = Annotated[str | None, Query(max_length=2048, description="next_cursor of the previous page (keyset paging)")]


def _ok(model: type, description: str) -> dict[int | str, dict[str, Any]]:
    return {200: {"model": model, "description": description}}


def create_app(config: ApiConfig) -> FastAPI:
    app = FastAPI(
        title="Drafter Registry API", version=str(SCHEMA_VERSION),
        description="Read-only: which speculative-decoding drafters exist for a model, whether they fit, how much "
                    "they were measured to speed it up, and how to launch them. Every body carries "
                    "`schema_version`; every error is RFC 9457 problem+json (docs/api.md).",
        # No /docs page: Swagger UI loads its scripts from a CDN, which a registry offline cannot reach (and no
        # package ships them to serve here). The document itself is /openapi.json.
        docs_url=None, redoc_url=None, openapi_url="/openapi.json",
    )
    reader = Reader(config.database_url, config.cache_bytes)
    app.state.push = config.push
    app.state.reader = reader
    # Added first, so CORS (when configured) wraps it and adds its headers to the answers it sends too.
    app.add_middleware(_CachedReads, reader=reader, token=config.token)
    if config.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=config.cors_origins, allow_methods=["GET", "HEAD"],
                           allow_headers=["Authorization", "If-None-Match", "If-Modified-Since"])
    problems.install(app)
    bearer = HTTPBearer(auto_error=False, description="DRAFTERS_API_TOKEN, as `Authorization: Bearer …`")

    def authorized(request: Request) -> None:
        if config.token is None:
            return
        if not token_ok(config.token, request.headers.get("authorization", "")):
            raise ApiError(401, "a bearer token is required", headers={"WWW-Authenticate": "Bearer"})

    auth = [Depends(bearer), Depends(authorized)] if config.token is not None else [Depends(authorized)]
    read = [*auth, Depends(_known_parameters)]
    errors = problems.responses(401, 404, 422, 503) if config.token else problems.responses(404, 422, 503)

    def route(path: str, model: type, summary: str, responses: dict[int | str, dict[str, Any]],
              dependencies: list[Any], response_class: type[Response] = Response) -> Callable[[Any], Any]:
        """GET (documented) and HEAD (the same answer without its body) for one function."""
        def register(function: Any) -> Any:
            app.add_api_route(path, function, methods=["GET"], dependencies=dependencies, summary=summary,
                              responses={**_ok(model, summary), **responses}, response_class=response_class)
            app.add_api_route(path, function, methods=["HEAD"], dependencies=dependencies, summary=summary,
                              include_in_schema=False, response_class=response_class)
            return function
        return register

    def get(path: str, model: type, summary: str, *, extra: tuple[int, ...] = ()) -> Callable[[Any], Any]:
        """A read route: GET and HEAD, the token, unknown parameters refused, its body and error schemas. A new
        route joins with `@get(path, its schemas model, summary)` and raises ApiError / BadParameter / NotFound."""
        return route(path, model, summary, {**errors, **problems.responses(*extra)}, read)

    @route("/", schemas.Index, "Index: what this server serves", problems.responses(422),
           [Depends(_known_parameters)], JSONResponse)
    async def index() -> dict[str, Any]:
        links = [{"href": r.path_format, "description": r.summary or ""} for r in app.routes
                 if isinstance(r, APIRoute) and "GET" in r.methods and r.path != "/"]
        links.append({"href": "/openapi.json", "description": "the OpenAPI document"})
        return {"schema_version": SCHEMA_VERSION, "name": app.title, "openapi": "/openapi.json", "links": links}

    @route("/health", schemas.Health, "Liveness", problems.responses(422), [Depends(_known_parameters)], JSONResponse)
    async def health() -> dict[str, Any]:  # on the event loop: no thread for a constant
        return {"schema_version": SCHEMA_VERSION, "status": "ok"}

    @get("/v1/targets", schemas.TargetsPage, "Targets by id (search with q)")
    def targets(request: Request, q: Annotated[str | None, Query(max_length=300)] = None, limit: Limit = 100,
                cursor: Cursor = None) -> Response:
        return reader.answer(request, lambda s: bodies.targets_page(s, q, limit, cursor))

    @get("/v1/targets/{target:path}/drafters", schemas.TargetDrafters, "Drafters of a target")
    def target_drafters(request: Request, target: str,
                        gpu: Annotated[str | None, Query(max_length=100, description=(
                            "GPU class the launch draft length is priced for (422 names the known ones)"))] = None,
                        engine: Annotated[str | None, Query(pattern="^(" + "|".join(ENGINES) + ")$", description=(
                            "only this engine's launch command and runs"))] = None,
                        verdict: Annotated[str | None, Query(pattern="^(" + "|".join(VERDICTS) + ")$", description=(
                            "only drafters with this verdict"))] = None) -> Response:
        """Every drafter with a verdict for the target (reasons, lag, measured τ and speedup per engine and
        hardware) and, for exact pairs, the launch command of each engine."""
        return reader.answer(request, lambda s: bodies.target_drafters(s, target, config.today(), gpu, engine=engine,
                                                                       verdict=verdict))

    @get("/v1/targets/{target:path}/recommendation", schemas.Recommendation, "The drafter to use on an engine")
    def recommendation(request: Request, target: str,
                       engine: Annotated[str, Query(pattern="^(" + "|".join(ENGINES) + ")$",
                                                    description="the serving engine")],
                       gpu: Annotated[str | None, Query(max_length=100, description=(
                           "GPU class to rank for (default H100 SXM; 422 names the known ones)"))] = None) -> Response:
        """One drafter, its command on the engine, and why (measured speedup on this hardware and engine, else a
        published τ, else the rule), with the ranked list it was chosen from."""
        return reader.answer(request, lambda s: bodies.recommendation(s, target, gpu, engine))

    @get("/v1/drafters", schemas.DraftersPage, "Drafters by id (search with q, filter by method)")
    def drafters(request: Request, q: Annotated[str | None, Query(max_length=300)] = None,
                 method: Annotated[str | None, Query(max_length=30)] = None, limit: Limit = 100,
                 cursor: Cursor = None) -> Response:
        return reader.answer(request, lambda s: bodies.drafters_page(s, q, method, limit, cursor))

    @get("/v1/drafters/{drafter:path}", schemas.DrafterBody, "One drafter")
    def drafter(request: Request, drafter: str) -> Response:
        return reader.answer(request, lambda s: bodies.drafter(s, drafter))

    @get("/v1/revisions/{sha}", schemas.Revision, "Targets and drafters whose head revision is this commit")
    def revision(request: Request, sha: Annotated[str, Path(min_length=7, max_length=80)]) -> Response:
        return reader.answer(request, lambda s: bodies.revision(s, sha))

    @get("/v1/lag", schemas.LagPage, "Lag per target, worst first (keyset pages)")
    def lag(request: Request, limit: Limit = 100, cursor: Cursor = None) -> Response:
        return reader.answer(request, lambda s: bodies.lag_page(s, config.today(), limit, cursor))

    @get("/v1/upgrades", schemas.Upgrades, "Base upgrades and whether each has an exact drafter yet")
    def upgrades(request: Request) -> Response:
        return reader.answer(request, lambda s: bodies.upgrades(s, config.today()))

    @get("/v1/runs", schemas.RunsPage, "Measured runs, newest first (keyset pages)")
    def runs(request: Request, target: Annotated[str | None, Query(max_length=300)] = None,
             drafter: Annotated[str | None, Query(max_length=300)] = None,
             engine: Annotated[str | None, Query(max_length=30)] = None,
             status: Annotated[str | None, Query(max_length=20)] = None, limit: Limit = 100,
             cursor: Cursor = None) -> Response:
        """Each run in the one JSON encoding `drafters runs --json` prints."""
        return reader.answer(request, lambda s: bodies.runs_page(s, target=target, drafter=drafter, engine=engine,
                                                                 status=status, limit=limit, cursor=cursor))

    @get("/v1/events", schemas.EventsPage, "Events after a cursor, oldest first")
    def events(request: Request,
               after: Annotated[int, Query(ge=0, le=bodies.MAX_INT64,
                                           description="the last event id already seen")] = 0,
               type: Annotated[str | None, Query(max_length=40, description="only events of this type")] = None,
               limit: Limit = 100) -> Response:
        def build(store: Store) -> bodies.Built:
            return bodies.events_after(store, after, limit, None if type is None else [type],
                                       reader.db().version.settled_event_id())
        return reader.answer(request, build, live=True)

    @get("/v1/plan", schemas.Plan, "What is queued or still to be measured")
    def plan(request: Request, limit: Limit = 100) -> Response:
        return reader.answer(request, lambda s: bodies.plan(s, limit), live=True)

    # The Hub's protocol, not this API's: the Hub reads only the status, so these answers are short plain text.
    hub = {"status_code": 202, "response_class": PlainTextResponse, "summary": "Hub webhook (X-Webhook-Secret)",
           "responses": {202: {"description": "`queued` or `ignored`"}, 401: {"description": "bad secret"},
                         404: {"description": "no webhook secret is configured"}, 413: {"description": "too large"}}}
    app.add_api_route("/", hub_webhook, methods=["POST"], **hub)
    app.add_api_route("/hub/webhook", hub_webhook, methods=["POST"], **hub)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = problems.problem_openapi(get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
