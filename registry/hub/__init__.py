"""The project's one Hub client: everything that talks to the Hugging Face Hub goes through `HubClient`.

It uses only `huggingface_hub` (HfApi, hf_hub_download) and returns parsed, validated dataclasses; every failure
becomes a `HubError` subclass with a one-line message that never contains the token.

Retries. `huggingface_hub` retries on its own (`http_backoff`: 5 retries, waits 1-2-4-8-8 s, listings and
downloads only), and stacking our retries on top would multiply into minutes. So this module owns the policy:
it installs, once per process, an HTTP client factory for `huggingface_hub` whose transport — only while a
`HubClient` call is running — counts each request, enforces the request budget and the timeout, waits out 429s
(Retry-After / RateLimit) and retries 5xx and transport failures with a capped exponential backoff. A final
failure leaves the transport as a `HubError`, which `huggingface_hub`'s retry loops do not catch, so each request
is tried at most `max_retries + 1` times in all. Outside a `HubClient` call the transport is a plain pass-through.
Requests to the client's own endpoint and the redirects they lead to (the resolve cache, a CDN for LFS/Xet files)
are subject to the policy and counted.

Rate limits. The Hub counts calls in 5-minute buckets and says where a bucket stands on every response
(`RateLimit: "api";r=<left>;t=<seconds to reset>`). The client remembers it per bucket, paces requests once few
calls are left, and when a bucket is empty (or a 429 asks for longer than `max_rate_limit_wait`) raises
`RateLimited` without sending anything: callers stop and come back after the reset.

Proxies. The shared client honours HTTP(S)_PROXY/ALL_PROXY and NO_PROXY from the environment, as httpx's
`trust_env` does, through per-scheme and per-host transports that all carry the policy.

It is over 400 lines: one client over one API, its policy and its reads together. The dataclasses and errors are
in types.py (re-exported here), parsing in parse.py, the HTTP layer in transport.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import huggingface_hub
from huggingface_hub import HfApi, ModelInfo, hf_hub_download
from huggingface_hub import errors as hf_errors
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, httpx, parse_ratelimit_headers
from huggingface_hub.utils import tqdm as hf_tqdm

from registry.domain.names import COMMIT_SHA
from registry.hub.parse import checked_sha, hub_model, hub_revision, iso_or_none
# Re-exported (noqa F401): callers import the client's dataclasses, errors and digests from registry.hub.
from registry.hub.parse import is_weight_file, weight_digest  # noqa: F401
from registry.hub.transport import ACTIVE_CLIENT, GuardedStream, install_http_client_factory, wait_from_headers
from registry.hub.types import (  # noqa: F401
    BadResponse,
    BudgetExhausted,
    GatedRepo,
    HubError,
    HubFile,
    HubModel,
    HubRevision,
    HubUnavailable,
    HubUnreachable,
    InvalidToken,
    ListedRepo,
    NotFound,
    RateLimited,
    RepoNotFound,
    RevisionNotFound,
    Unreadable,
)
from registry.redact import mask_url

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 500, 502, 503, 504})
# A refused or unanswered connection attempt: nothing reached the Hub.
CONNECT_FAILURES = (httpx.ConnectError, httpx.ConnectTimeout)
# Fields a listing needs; requesting them explicitly keeps each page small (the request budget). No
# cardData: the Hub turns a card's `base_model` into `base_model:<relation>:<id>` tags, which say the same.
LIST_EXPAND = ["sha", "lastModified", "createdAt", "tags", "gated", "pipeline_tag", "library_name", "config", "private"]
# The cheap listing of every repo of an org: enough to tell what changed, appeared or went public.
ID_EXPAND = ["sha", "lastModified", "private"]
LIST_PAGE = 100  # a re-poll that finds nothing new reads one page
# A "tagged" query that starts with this lists by the Hub's `search` (a word of the repo id, any case) instead of its
# `filter` (a tag or library name, matched exactly, case included).
SEARCH_PREFIX = "search:"
ID_PAGE = 1000  # the Hub's largest page
# Small files only: anything bigger than this (or stored in LFS) is never downloaded by the watcher.
MAX_SMALL_FILE = 20 * 1024 * 1024
# Pace requests once a bucket has fewer than this share of its quota left (or this many, quota unknown).
PACE_SHARE = 0.05
PACE_MIN = 10


def _tag_query(tag: str) -> tuple[str, str]:
    return ("search", tag[len(SEARCH_PREFIX):]) if tag.startswith(SEARCH_PREFIX) else ("filter", tag)


def _one_line(message: str) -> str:
    return " ".join(message.split())


class _QuietBar(hf_tqdm):  # type: ignore[misc]
    """Snapshot downloads report their progress through the caller (ledger, status row, Rich bar), not stderr."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        super().__init__(*args, **kwargs)


# ---- the client ----------------------------------------------------------------------------------------------

class HubClient:
    """Reads what the registry needs from the Hub (or the fake Hub), politely and within a request budget."""

    def __init__(
        self,
        endpoint: str,
        token: str | None,
        cache_dir: Path,
        *,
        timeout: float = 10.0,
        max_requests: int | None = None,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        max_rate_limit_wait: float = 60.0,
        max_connect_retries: int = 2,
    ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"Hub endpoint must be an http(s) URL, got {mask_url(endpoint)!r}")
        if timeout <= 0 or min(max_retries, max_connect_retries, backoff_base, backoff_cap, max_rate_limit_wait) < 0:
            raise ValueError("timeout must be positive; retries, backoff and waits must not be negative")
        if max_requests is not None and max_requests < 0:
            raise ValueError("max_requests must not be negative")
        self.endpoint = endpoint.rstrip("/")
        self.cache_dir = Path(cache_dir)
        self.timeout = timeout
        self.max_requests = max_requests
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_rate_limit_wait = max_rate_limit_wait
        # A refused connection rarely heals within seconds: give up sooner than on 5xx, so an unreachable Hub is
        # reported after backoff_base * 3 seconds of waiting (1.5 s) instead of after the whole backoff ladder.
        self.max_connect_retries = max_connect_retries
        self._token = token or None
        # token=False: never fall back to a token from the environment or the user's login.
        self._api = HfApi(endpoint=self.endpoint, token=self._token or False, library_name="drafter-registry")
        parsed = httpx.URL(self.endpoint)
        self._origin = (parsed.scheme, parsed.host, parsed.port)
        # While a snapshot runs: each file's advertised size, the most its body may hold (see snapshot).
        self._body_limits: dict[str, int] = {}
        self._count = 0
        self._budget_start = 0
        self._count_lock = threading.Lock()
        # Per bucket ("api", "resolvers"): (calls left, monotonic time of the reset, quota or None).
        self._buckets: dict[str, tuple[int, float, int | None]] = {}
        install_http_client_factory()

    def __repr__(self) -> str:
        return f"HubClient(endpoint={mask_url(self.endpoint)!r}, authenticated={self._token is not None})"

    @property
    def request_count(self) -> int:
        """HTTP requests this client has sent, retries and redirects included."""
        with self._count_lock:
            return self._count

    def start_budget(self) -> None:
        """Give `max_requests` afresh from now on (a watcher does at each poll); `request_count` keeps counting.
        What the Hub said about its rate-limit buckets is forgotten too: the caller waited as long as it was told
        (PollReport.retry_after), and the next answer says where the bucket stands now."""
        with self._count_lock:
            self._budget_start = self._count
            self._buckets.clear()

    # ---- public reads ------------------------------------------------------------------------------------
    def list_org_models(
        self,
        org: str,
        *,
        sort: Literal["last_modified", "created_at"] = "last_modified",
        stop_at: Callable[[HubModel], bool] | None = None,
        on_unreadable: Callable[[Unreadable], None] | None = None,
    ) -> Iterator[HubModel]:
        """The org's models, newest first. Paging stops at the first model for which `stop_at` is true (that
        model is not yielded), so a re-poll that finds nothing new reads a single page. An entry that cannot be
        parsed raises BadResponse, or with `on_unreadable` is handed to it and skipped."""
        if sort not in ("last_modified", "created_at"):
            raise ValueError(f"sort must be 'last_modified' or 'created_at', got {sort!r}")
        params = [("author", org), ("sort", "lastModified" if sort == "last_modified" else "createdAt"),
                  ("limit", str(LIST_PAGE)), *(("expand", key) for key in LIST_EXPAND)]
        yield from self._models(params, f"listing models of {org}", stop_at, on_unreadable)

    def list_tagged_models(
        self,
        tag: str,
        *,
        stop_at: Callable[[HubModel], bool] | None = None,
        on_unreadable: Callable[[Unreadable], None] | None = None,
    ) -> Iterator[HubModel]:
        """Models of anyone carrying `tag` (a tag or library name: `dflash`, `eagle3`, …; or `search:<word>`, a word
        of the repo id in any case), newest change first."""
        params = [_tag_query(tag), ("sort", "lastModified"), ("limit", str(LIST_PAGE)),
                  *(("expand", key) for key in LIST_EXPAND)]
        yield from self._models(params, f"listing models tagged {tag}", stop_at, on_unreadable)

    def list_org_ids(self, org: str) -> list[ListedRepo]:
        """Every repo of the org with its head sha, in pages of 1000: one call for most orgs. Entries without a
        readable id are left out (logged); a bad sha or date reads as unknown."""
        params = [("author", org), ("limit", str(ID_PAGE)), *(("expand", key) for key in ID_EXPAND)]
        return self._ids(params, f"listing repo ids of {org}")

    def list_tagged_ids(self, tag: str) -> list[ListedRepo]:
        """Every repo of anyone carrying `tag` (or named `search:<word>`), as `list_org_ids` lists an org's."""
        params = [_tag_query(tag), ("limit", str(ID_PAGE)), *(("expand", key) for key in ID_EXPAND)]
        return self._ids(params, f"listing repo ids tagged {tag}")

    def _ids(self, params: list[tuple[str, str]], what: str) -> list[ListedRepo]:
        listed: list[ListedRepo] = []
        for page in self._pages(params, what):
            for entry in page:
                repo_id = entry.get("id") if isinstance(entry, dict) else None
                if not isinstance(repo_id, str) or repo_id.count("/") != 1:
                    logger.warning("%s: an entry without a valid id was skipped", what)
                    continue
                sha = entry.get("sha")
                listed.append(ListedRepo(
                    repo_id=repo_id,
                    sha=sha if isinstance(sha, str) and COMMIT_SHA.fullmatch(sha) else None,
                    last_modified=iso_or_none(entry.get("lastModified")),
                    # Anything but an explicit false counts as private: never announce what might be.
                    private=entry.get("private") is not False,
                ))
        return listed

    def _models(
        self,
        params: list[tuple[str, str]],
        what: str,
        stop_at: Callable[[HubModel], bool] | None,
        on_unreadable: Callable[[Unreadable], None] | None,
    ) -> Iterator[HubModel]:
        for page in self._pages(params, what):
            for entry in page:
                try:
                    model = hub_model(ModelInfo(**entry) if isinstance(entry, dict) else entry)
                except Exception as exc:  # noqa: BLE001 - any malformed entry is one unreadable entry
                    repo_id = entry.get("id") if isinstance(entry, dict) else None
                    problem = _one_line(str(exc)) if isinstance(exc, HubError) else (
                        f"listing entry {repo_id or '?'}: unexpected shape ({type(exc).__name__})")
                    if on_unreadable is None:
                        raise self._scrubbed(BadResponse(problem)) from exc
                    on_unreadable(Unreadable(repo_id if isinstance(repo_id, str) else None, problem))
                    continue
                if stop_at is not None and stop_at(model):
                    return
                yield model

    def _pages(self, params: list[tuple[str, str]], what: str) -> Iterator[list[Any]]:
        """The pages of `/api/models` for these parameters, following the Hub's `Link: rel="next"` (an opaque
        cursor); each page is requested only when the previous one is used up."""
        url: str | None = f"{self.endpoint}/api/models"
        query: list[tuple[str, str]] | None = params
        headers = build_hf_headers(token=self._token or False, library_name="drafter-registry")
        while url is not None:
            with self._calling(what):
                response = huggingface_hub.get_session().get(url, params=query, headers=headers)
                hf_raise_for_status(response)
                body = response.json()
                if not isinstance(body, list):
                    raise BadResponse(f"{what}: the listing is not a JSON array")
                next_url = response.links.get("next", {}).get("url")
            yield body
            url, query = next_url, None

    def namespace_kind(self, name: str) -> Literal["org", "user"]:
        """Whether `name` is an organization or a user on the Hub (a webhook watches each under its own type:
        `yuhuili` is a user, `Qwen` an org). NotFound when it is neither."""
        for kind, read in (("org", self._api.get_organization_overview), ("user", self._api.get_user_overview)):
            try:
                with self._calling(f"{kind} {name}"):
                    read(name)
            except (NotFound, RepoNotFound):
                continue
            return kind  # type: ignore[return-value]
        raise NotFound(f"{name}: neither an organization nor a user on the Hub")

    def fits_download(self, file: HubFile) -> bool:
        """Whether the watcher may download this file: small and not LFS (no CDN), so one read stays cheap."""
        return file.lfs_sha256 is None and (file.size is None or file.size <= MAX_SMALL_FILE)

    def revision(self, repo_id: str, revision: str | None = None) -> HubRevision:
        """The repo at `revision` (default: main) with every file's size and blob ids."""
        what = f"{repo_id}@{revision or 'main'}"
        with self._calling(what):
            info = self._api.model_info(repo_id, revision=revision, files_metadata=True, timeout=self.timeout)
            return hub_revision(info, what)

    def head_sha(self, repo_id: str) -> str:
        """The commit main points to, from refs: `/revision/main` can lag behind a force-push
        (huggingface_hub issue #3406)."""
        what = f"refs of {repo_id}"
        with self._calling(what):
            refs = self._api.list_repo_refs(repo_id)
            for branch in refs.branches:
                if branch.name == "main":
                    return checked_sha(branch.target_commit, what)
        raise BadResponse(f"{what}: no main branch")

    def download(self, repo_id: str, filename: str, sha: str) -> bytes | None:
        """The file's bytes at commit `sha` (cached on disk; a warm cache costs no request), or None when the file
        does not exist at that commit."""
        if not COMMIT_SHA.fullmatch(sha):
            raise ValueError(f"download needs a 40-hex commit sha, got {sha!r}")
        what = f"{repo_id}/{filename}@{sha[:12]}"
        with self._calling(what):
            try:
                path = hf_hub_download(
                    repo_id, filename, revision=sha, cache_dir=self.cache_dir, endpoint=self.endpoint,
                    token=self._token or False, etag_timeout=self.timeout,
                )
            except hf_errors.RemoteEntryNotFoundError:
                return None
            return Path(path).read_bytes()

    def snapshot(self, repo_id: str, sha: str, local_dir: Path, *, files: dict[str, int]) -> Path:
        """The named files of the repo at commit `sha`, into `local_dir`, each no larger than its advertised size
        (`files`: path -> bytes). Files already there are kept (a download killed midway resumes with the files
        it finished); returns once every file is in place.

        File by file in this thread, not `snapshot_download`: that lists the repo's tree, which a mirror can fill
        with files the revision's file list (and so the download budget) never counted, and fetches in a thread
        pool, outside this client's policy. No body is read past its file's size (one fetched through a redirect,
        which names no file, past the largest), so an endless body is refused early."""
        if not COMMIT_SHA.fullmatch(sha):
            raise ValueError(f"snapshot needs a 40-hex commit sha, got {sha!r}")
        what = f"{repo_id}@{sha[:12]}"
        with self._calling(what):
            self._body_limits = dict(files)
            try:
                for filename in files:
                    hf_hub_download(repo_id, filename, revision=sha, local_dir=local_dir, endpoint=self.endpoint,
                                    token=self._token or False, etag_timeout=self.timeout, tqdm_class=_QuietBar)
            finally:
                self._body_limits = {}
        return local_dir

    def _body_limit(self, request: httpx.Request, ours: bool) -> int | None:
        """The most bytes a file body may have during a snapshot: its advertised size, found by the path it is
        resolved under; the largest advertised size for a body elsewhere (a CDN after a redirect)."""
        limits = self._body_limits
        if not limits or request.method != "GET":
            return None
        path = unquote(request.url.path)
        if ours and "/resolve/" not in path:
            return None  # listings and metadata
        for name, size in limits.items():
            if path.endswith(f"/{name}"):
                return size
        return max(limits.values())

    # ---- policy ------------------------------------------------------------------------------------------
    @contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """Runs huggingface_hub code under this client's HTTP policy and turns its errors into HubErrors."""
        marker = ACTIVE_CLIENT.set(self)
        try:
            yield
        except HubError as error:
            raise self._scrubbed(error)
        except Exception as exc:  # noqa: BLE001 - every library failure becomes one typed HubError
            raise self._scrubbed(self._map_error(exc, what)) from exc
        finally:
            ACTIVE_CLIENT.reset(marker)

    def _scrubbed(self, error: HubError) -> HubError:
        """One line, and the token masked should any layer below have echoed it."""
        message = _one_line(str(error))
        if self._token:
            message = message.replace(self._token, "***")
        # A mirror's `user:password@` may come back in a library's message with the URL it asked for.
        password = httpx.URL(self.endpoint).password
        message = message.replace(self.endpoint, mask_url(self.endpoint))
        if password:
            message = message.replace(password, "***")
        error.args = (message,)
        return error

    def _map_error(self, exc: Exception, what: str) -> HubError:
        request_id = getattr(exc, "request_id", None)
        suffix = f" (request id {request_id})" if request_id else ""
        response = getattr(exc, "response", None) if isinstance(exc, hf_errors.HfHubHTTPError) else None
        status = response.status_code if response is not None else None
        error: HubError
        # Gated and not-found answers are facts about the repo, which the watcher stores with the revision: no
        # request id in them, or two reads of one revision would store two different texts.
        if isinstance(exc, hf_errors.GatedRepoError):
            error = GatedRepo(f"{what}: gated repository, access not granted (HTTP {status})")
        elif isinstance(exc, (hf_errors.RepositoryNotFoundError, hf_errors.DisabledRepoError)):
            error = RepoNotFound(f"{what}: repository not found or not accessible (HTTP {status})")
        elif isinstance(exc, hf_errors.RevisionNotFoundError):
            error = RevisionNotFound(f"{what}: revision not found")
        elif response is not None and status == 429:
            retry_after = wait_from_headers(response.headers) or self.backoff_cap
            error = RateLimited(f"{what}: rate limited, retry after {retry_after:g}s{suffix}", retry_after)
        elif isinstance(exc, hf_errors.HfHubHTTPError) and status is not None and (
            status in RETRYABLE_STATUSES or status >= 500
        ):
            error = HubUnavailable(f"{what}: Hub answered HTTP {status}{suffix}")
        elif isinstance(exc, hf_errors.HfHubHTTPError) and status == 404:
            error = NotFound(f"{what}: not found (HTTP 404)")
        elif isinstance(exc, hf_errors.HfHubHTTPError):
            error = HubError(f"{what}: Hub answered HTTP {status}{suffix}")
        elif isinstance(exc, (httpx.TransportError, hf_errors.OfflineModeIsEnabled,
                              hf_errors.LocalEntryNotFoundError)):
            error = HubUnavailable(f"{what}: Hub unreachable ({type(exc).__name__})")
        elif isinstance(exc, hf_errors.HFValidationError):
            error = HubError(f"{what}: invalid repository id or revision")
        elif isinstance(exc, (ValueError, KeyError, TypeError, AttributeError, hf_errors.FileMetadataError,
                              httpx.HTTPError)):
            error = BadResponse(f"{what}: unexpected response ({type(exc).__name__})")
        else:
            error = HubError(f"{what}: {type(exc).__name__}")
        return error

    def _spend_request(self, what: str) -> None:
        with self._count_lock:
            if self.max_requests is not None and self._count - self._budget_start >= self.max_requests:
                raise BudgetExhausted(f"{what}: request budget of {self.max_requests} spent")
            self._count += 1

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff_cap, self.backoff_base * 2**attempt)

    def _bucket_of(self, request: httpx.Request) -> str | None:
        if (request.url.scheme, request.url.host, request.url.port) != self._origin:
            return None  # a CDN: its own limits, not the Hub's buckets
        path = request.url.path
        return "api" if path.startswith("/api/") and not path.startswith("/api/resolve-cache/") else "resolvers"

    def _note_rate_limit(self, bucket: str | None, headers: httpx.Headers) -> None:
        info = parse_ratelimit_headers(headers)
        if info is None or bucket is None:
            return
        with self._count_lock:
            self._buckets[bucket] = (info.remaining, time.monotonic() + info.reset_in_seconds, info.limit)

    def _pace(self, bucket: str | None, what: str) -> None:
        """Before a request: wait for the bucket's reset when it is empty, or spread what is left of it over the
        rest of the window when little is; a wait beyond `max_rate_limit_wait` raises RateLimited instead."""
        with self._count_lock:
            state = self._buckets.get(bucket) if bucket else None
        if state is None:
            return
        remaining, reset_at, quota = state
        to_reset = reset_at - time.monotonic()
        if to_reset <= 0:
            return
        reserve = max(PACE_MIN, int((quota or 0) * PACE_SHARE))
        if remaining > reserve:
            return
        wait = to_reset + 1.0 if remaining == 0 else to_reset / remaining
        if wait > self.max_rate_limit_wait:
            raise RateLimited(f"{what}: the Hub's {bucket} rate limit is spent; it resets in {to_reset + 1:.0f}s",
                              to_reset + 1.0)
        time.sleep(wait)
        if remaining == 0:
            with self._count_lock:
                self._buckets.pop(bucket, None)

    def _send_with_policy(self, inner: httpx.BaseTransport, request: httpx.Request) -> httpx.Response:
        """Called by the transport for each request huggingface_hub sends during one of our calls.

        Requests to our endpoint and the redirects they lead to (resolve cache, CDN) are ours to count, pace,
        time out and retry; huggingface_hub's own once-a-day telemetry fetch (`/api/agent-harnesses` on
        huggingface.co) passes through.
        """
        ours = (request.url.scheme, request.url.host, request.url.port) == self._origin
        # The token goes to our endpoint's origin (scheme, host and port) only. huggingface_hub and our listing
        # pages put it on every request of a call, and a `Link: rel="next"` (or any URL in a response) can name
        # another origin: there the request goes without it, as httpx does on a redirect to another origin.
        if not ours and self._token and request.headers.get("authorization") == f"Bearer {self._token}":
            del request.headers["authorization"]
        if not ours and request.url.path.startswith("/api/agent-harnesses"):
            return inner.handle_request(request)
        bucket = self._bucket_of(request)
        what = f"{request.method} {request.url.path}"
        # huggingface_hub sends listings with timeout=None (no limit); every request gets ours.
        request.extensions = {**request.extensions, "timeout": dict.fromkeys(
            ("connect", "read", "write", "pool"), self.timeout)}
        for attempt in range(self.max_retries + 1):
            self._pace(bucket, what)
            self._spend_request(what)
            last_attempt = self.max_retries
            try:
                response = inner.handle_request(request)
            except CONNECT_FAILURES as exc:
                failure: HubError = HubUnreachable(
                    f"{what}: Hub unreachable ({type(exc).__name__} after {attempt + 1} attempt(s))")
                wait = self._backoff(attempt)
                last_attempt = min(self.max_retries, self.max_connect_retries)
            except httpx.TransportError as exc:
                failure = HubUnavailable(f"{what}: {type(exc).__name__} after {attempt + 1} attempt(s)")
                wait = self._backoff(attempt)
            else:
                self._note_rate_limit(bucket, response.headers)
                if response.status_code == 401 and "authorization" in request.headers and (
                    not response.headers.get("x-error-code")
                    or "invalid credentials" in response.headers.get("x-error-message", "").lower()
                ):
                    # Gated and private repos answer with an error code; a bare 401 to a request that carried a
                    # token is the token itself being refused, and every other call would fail the same way.
                    _discard(response)
                    raise InvalidToken("the Hub rejected the configured token (HTTP 401): check HF_TOKEN / "
                                       "DRAFTERS_HF_TOKEN or remove it to read public repos anonymously")
                if response.status_code == 429:
                    server_wait = wait_from_headers(response.headers)
                    _discard(response)
                    wait = self._backoff(attempt) if server_wait is None else server_wait
                    failure = RateLimited(f"{what}: rate limited, retry after {wait:g}s", wait)
                    if wait > self.max_rate_limit_wait:
                        raise failure  # too long to block a caller: let it reschedule
                elif response.status_code in RETRYABLE_STATUSES:
                    _discard(response)
                    failure = HubUnavailable(
                        f"{what}: Hub answered HTTP {response.status_code} after {attempt + 1} attempt(s)")
                    wait = self._backoff(attempt)
                else:
                    limit = self._body_limit(request, ours) if response.status_code in (200, 206) else None
                    return httpx.Response(
                        status_code=response.status_code, headers=response.headers,
                        stream=GuardedStream(response.stream, what, limit), extensions=response.extensions,
                    )
            if attempt >= last_attempt:
                raise failure
            logger.info("%s; retry %d/%d in %.2fs", failure, attempt + 1, self.max_retries, wait)
            time.sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")


def _discard(response: httpx.Response) -> None:
    """Drain a small error body so the connection can be reused; a broken one is simply closed."""
    try:
        response.read()
    except httpx.TransportError:
        pass
    finally:
        response.close()
