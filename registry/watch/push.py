"""An endpoint for Hub webhooks: a call names a repo that changed, and the watcher reads that repo now.

The HTTP side lives in the API app (drafters/api/push_route.py, served by uvicorn, which bounds connections and
idle time); this module holds what it needs that is not HTTP: the payload rules and the queue of hints with the
one thread that reads them. The Hub sends the shared secret in `X-Webhook-Secret`; a call without the right one
is refused. The webhook is a hint only: the periodic poll stays the source of truth. A hint carries the pushed head (`repo.headSha`), so the
commit that was pushed is read rather than whatever main is by then, and a move carries the old id.
"""

from __future__ import annotations

import hmac
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from registry.domain.names import COMMIT_SHA

log = logging.getLogger(__name__)
MAX_BODY = 1_000_000
# Hub payloads nest four or five levels; anything far deeper is an attack on the parser, not a webhook.
MAX_DEPTH = 32
# Seconds a caller has to send its whole body: a trickling sender is answered 408 rather than holding a slot.
BODY_TIMEOUT_S = 10.0
# Repos waiting for a read; past this the Hub hears 503 and retries later (the periodic poll catches up anyway).
MAX_QUEUED = 1000


def nesting_depth(body: bytes, limit: int = MAX_DEPTH) -> int:
    """How deep the JSON in `body` nests, counted without parsing it; stops counting past `limit`."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


# Scopes that can change what the registry records about a model; `repo.content.*`-style narrower scopes the
# Hub may add count as their parent.
REPO_SCOPES = ("repo", "repo.content", "repo.config")
MAIN_REF = "refs/heads/main"


def repo_from_payload(payload: object) -> str | None:
    """The model repo a Hub webhook payload (version 3) asks us to read, or None when it changes nothing we
    record: other repo types and scopes (discussions), private repos, content updates that leave main alone. A
    move names the new id (the watcher keeps one checkpoint across it); a delete names the repo, whose read then
    finds it gone."""
    if not isinstance(payload, dict):
        return None
    repo = payload.get("repo")
    event = payload.get("event")
    if not isinstance(repo, dict) or repo.get("type") != "model" or not isinstance(event, dict):
        return None
    scope, action = event.get("scope"), event.get("action")
    if not isinstance(scope, str) or not any(scope == s or scope.startswith(f"{s}.") for s in REPO_SCOPES):
        return None
    if scope.startswith("repo.content"):
        refs = payload.get("updatedRefs")
        if not isinstance(refs, list) or not any(isinstance(r, dict) and r.get("ref") == MAIN_REF for r in refs):
            return None  # a PR ref, a tag, another branch: main, which the registry records, did not move
    # Private repos are never recorded; `updatedConfig.private` says what a config change just did. A repo just
    # made private is read once (the read finds it no longer public and marks a recorded one gone), not left to
    # the next poll; other events of private repos change nothing.
    config = payload.get("updatedConfig")
    private = config.get("private") if isinstance(config, dict) and "private" in config else repo.get("private")
    made_private = isinstance(config, dict) and config.get("private") is True
    if private is not False and not made_private:
        return None
    if action == "move":
        moved = payload.get("movedTo")
        name = moved.get("name") if isinstance(moved, dict) else None
        owner = moved.get("owner") if isinstance(moved, dict) else None
        if isinstance(name, str) and "/" not in name and isinstance(owner, str):
            name = f"{owner}/{name}"
        return name if isinstance(name, str) and name.count("/") == 1 else None
    name = repo.get("name")
    return name if isinstance(name, str) and name.count("/") == 1 else None


def head_sha_from_payload(payload: object) -> str | None:
    """The pushed head of main (`repo.headSha`), when the payload carries one."""
    repo = payload.get("repo") if isinstance(payload, dict) else None
    sha = repo.get("headSha") if isinstance(repo, dict) else None
    return sha if isinstance(sha, str) and COMMIT_SHA.fullmatch(sha) else None


@dataclass(frozen=True)
class PushHint:
    """What one Hub webhook asks the watcher to read: the repo, the pushed head, and for a move its old id."""

    repo_id: str
    head_sha: str | None = None
    moved_from: str | None = None
    # `updatedConfig.private: false`: the repo went public just now (a staged release is released today).
    made_public: bool = False


def hint_from_payload(payload: object) -> PushHint | None:
    repo_id = repo_from_payload(payload)
    if repo_id is None or not isinstance(payload, dict):
        return None
    moved_from = None
    if payload.get("event", {}).get("action") == "move":
        old = payload["repo"].get("name")
        moved_from = old if isinstance(old, str) and old.count("/") == 1 and old != repo_id else None
    config = payload.get("updatedConfig")
    made_public = isinstance(config, dict) and config.get("private") is False
    return PushHint(repo_id, head_sha_from_payload(payload), moved_from, made_public)


class PushQueue:
    """Hints in arrival order, read one at a time by `on_repo` on a thread of its own; bounded (`offer` says
    False when full, and the caller answers 503)."""

    def __init__(self, secret: str, on_repo: Callable[[PushHint], None]) -> None:
        self.secret = secret
        self.on_repo = on_repo
        self.repos: queue.Queue[PushHint | None] = queue.Queue(maxsize=MAX_QUEUED)
        self._thread = threading.Thread(target=self._drain, name="push-reader", daemon=True)

    def secret_matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.secret.encode())

    def offer(self, hint: PushHint) -> bool:
        try:
            self.repos.put_nowait(hint)
        except queue.Full:
            return False
        return True

    def _drain(self) -> None:
        while (hint := self.repos.get()) is not None:
            try:
                self.on_repo(hint)
            except Exception as exc:  # noqa: BLE001 - one bad repo must not stop the endpoint
                log.warning("push poll of %s failed: %s: %s", hint.repo_id, type(exc).__name__, exc)
            finally:
                self.repos.task_done()

    def start(self) -> PushQueue:
        self._thread.start()
        return self

    def stop(self) -> None:
        try:
            self.repos.put(None, timeout=5)  # a full queue drains while the reader works through it
        except queue.Full:
            log.warning("push queue still full at stop; the reader stops with the process")
