"""The API's one error shape: RFC 9457 problem details (`application/problem+json`) with `schema_version`.

Every error the API sends has it: an unknown route (404), a wrong method (405), a bad or unknown query
parameter (422), a missing token (401), an unknown id (404), no database yet (503), and anything unforeseen
(500, with no traceback in the body). A route joins by raising `ApiError` (or `bodies.BadParameter`, or
`NotFound`) and by listing its statuses in `responses(...)` for the OpenAPI document; the handlers
installed by `install` turn each into the same body.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from drafters.api.bodies import BadParameter
from drafters.api.schemas import Problem
from registry.domain.json_shapes import SCHEMA_VERSION
from registry.store import NotFound

MEDIA_TYPE = "application/problem+json"
log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answer: its status, what went wrong (`detail`), and headers to send with it."""

    def __init__(self, status: int, detail: str, *, headers: dict[str, str] | None = None,
                 errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}
        self.errors = errors


def body(status: int, detail: str, *, errors: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The problem object; `type` is about:blank, so `title` is the status's own phrase (RFC 9457 §4.2.1)."""
    problem: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "type": "about:blank",
                               "title": HTTPStatus(status).phrase, "status": status, "detail": detail}
    if errors is not None:
        problem["errors"] = errors
    return problem


def response(status: int, detail: str, *, headers: dict[str, str] | None = None,
             errors: list[dict[str, str]] | None = None) -> JSONResponse:
    return JSONResponse(body(status, detail, errors=errors), status_code=status, headers=headers,
                        media_type=MEDIA_TYPE)


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` entries of these error statuses (the app moves them to problem+json)."""
    return {status: {"model": Problem, "description": HTTPStatus(status).phrase} for status in statuses}


def install(app: FastAPI) -> None:
    """The handlers that give every error the problem shape."""

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return response(exc.status, exc.detail, headers=exc.headers, errors=exc.errors)

    @app.exception_handler(BadParameter)
    async def bad_parameter(_request: Request, exc: BadParameter) -> JSONResponse:
        return response(422, str(exc), errors=[{"parameter": exc.parameter, "reason": exc.reason}])

    @app.exception_handler(NotFound)
    async def not_found(_request: Request, exc: NotFound) -> JSONResponse:
        return response(404, str(exc.args[0] if exc.args else exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"parameter": ".".join(str(p) for p in e.get("loc", ())[1:]) or "request",
                   "reason": str(e.get("msg"))} for e in exc.errors()]
        return response(422, "; ".join(f"{e['parameter']}: {e['reason']}" for e in errors), errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Routing's own answers (unknown route 404, wrong method 405) and any HTTPException.
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        if exc.status_code == 404 and detail == "Not Found":
            detail = "no such route (GET / lists them)"
        return response(exc.status_code, detail, headers=dict(exc.headers or {}))

    @app.exception_handler(Exception)
    async def unforeseen(request: Request, exc: Exception) -> JSONResponse:
        log.error("API error on %s: %s", request.url.path, type(exc).__name__, exc_info=exc)
        return response(500, f"internal error ({type(exc).__name__}); the server log has the details")


def problem_openapi(document: dict[str, Any]) -> dict[str, Any]:
    """The generated document as sent: error responses are problem+json, and the 422 FastAPI documents by itself
    (its own validation shape, which this API never sends) is the Problem."""
    ref = {"$ref": "#/components/schemas/Problem"}
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for status, answer in operation.get("responses", {}).items():
                if str(status)[0] in "45" and "application/json" in answer.get("content", {}):
                    answer["content"] = {MEDIA_TYPE: {"schema": ref}}
    schemas = document.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return document
