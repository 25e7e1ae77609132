"""The Hub webhook route of the API app: secret, body limits, then a hint queued for the watcher.

Connections, idle time and header sizes are bounded by uvicorn (drafters/api/server.py). The body is always read
before the answer (a chunked body too), capped at MAX_BODY and at BODY_TIMEOUT_S, so a trickling sender holds
one cheap coroutine for a bounded time and never a thread or a slot others need. A caller that hangs up is
simply dropped: nothing is logged for it.
"""

from __future__ import annotations

import asyncio
import json

from fastapi import Request
from fastapi.responses import PlainTextResponse, Response
from starlette.requests import ClientDisconnect

from registry.watch import push


def _answer(status: int, text: str) -> Response:
    return PlainTextResponse(text, status_code=status)


async def _read_body(request: Request) -> bytes | Response:
    body = bytearray()
    try:
        async with asyncio.timeout(push.BODY_TIMEOUT_S):
            async for chunk in request.stream():
                body += chunk
                if len(body) > push.MAX_BODY:
                    return _answer(413, "too large")
    except TimeoutError:
        return _answer(408, "body too slow")
    return bytes(body)


async def hub_webhook(request: Request) -> Response:
    queue: push.PushQueue | None = request.app.state.push
    if queue is None:
        return _answer(404, "no Hub webhook endpoint here (set DRAFTERS_HUB_WEBHOOK_SECRET)")
    if not queue.secret_matches(request.headers.get("x-webhook-secret", "")):
        return _answer(401, "bad secret")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > push.MAX_BODY:
        return _answer(413, "too large")
    try:
        body = await _read_body(request)
    except ClientDisconnect:
        return _answer(400, "client went away")  # never sent: uvicorn drops answers to a closed connection
    if isinstance(body, Response):
        return body
    if push.nesting_depth(body) > push.MAX_DEPTH:
        return _answer(400, "JSON nested too deeply")
    try:
        payload = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return _answer(400, "not JSON")
    hint = push.hint_from_payload(payload)
    if hint is None:
        return _answer(202, "ignored")
    if not queue.offer(hint):
        return _answer(503, "busy")
    return _answer(202, "queued")
