"""A real HTTP server on 127.0.0.1 that speaks the subset of the Hub REST protocol `huggingface_hub` uses.

See /work/shared/reference/hub-protocol.md §5. Routes:
  GET  /api/models                                   listing: author, search, filter, gated, sort, limit, skip,
                                                     expand (repeated), full, config, cardData; Link pagination
  GET  /api/models/{org}/{name}[/revision/{rev}]     model_info: expand, blobs, securityStatus
  GET  /api/models/{org}/{name}/refs                 list_repo_refs
  GET  /api/models/{org}/{name}/commits/{rev}        list_repo_commits, newest first, Link pagination
  GET  /api/models/{org}/{name}/tree/{rev}[/{path}]  list_repo_tree (snapshot_download): files and folders
  HEAD/GET /{org}/{name}/resolve/{rev}/{path}        file metadata and bytes (Range, If-None-Match)
  HEAD/GET /api/resolve-cache/models/{org}/{name}/{commit}/{path}   where a branch resolve of a small file goes
  GET  /cdn/{sha256}                                 where an LFS download goes (another host: `localhost`)
  POST /api/settings/webhooks                        create_webhook: a token is required; JSON body checked
  GET  /api/organizations/{name}/overview            get_organization_overview (404 for users and unknowns)
  GET  /api/users/{name}/overview                    get_user_overview (404 for organizations and unknowns)
Renamed repos answer 307 with a relative Location; every response carries X-Request-Id and the API bucket's
`RateLimit` header; a spent bucket answers 429 to every /api/ call until its window resets. A revoked token gets
401 everywhere; private repos exist only for their org members' tokens (listings included). The `author` filter
is case-sensitive, `limit` is the page size (at most 1000) and the next page's `cursor` is an opaque keyset
position, as on the Hub. As on the Hub, a repo id in a path matches in any case (huggingface.co/qwen/qwen3-8b is
Qwen/Qwen3-8B), `filter` matches a tag exactly, case included (tags keep their author's spelling), and `search`
matches repo ids in any case.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from tests.fakehub.state import FakeCommit, FakeRepo, Fault, HubState, safetensors_parameters

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
DEFAULT_COMMITS_PAGE_SIZE = 50

LIST_EXPAND_KEYS = frozenset({
    "author", "cardData", "config", "createdAt", "disabled", "downloads", "downloadsAllTime", "evalResults",
    "gated", "gguf", "inference", "inferenceProviderMapping", "lastModified", "library_name", "likes",
    "mask_token", "model-index", "pipeline_tag", "private", "safetensors", "sha", "siblings", "spaces", "tags",
    "transformersInfo", "trendingScore", "widgetData", "resourceGroup",
})
INFO_EXPAND_KEYS = LIST_EXPAND_KEYS | {"baseModels", "childrenModelCount", "usedStorage"}
LIST_DEFAULT_FIELDS = (
    "_id", "id", "likes", "trendingScore", "private", "downloads", "tags", "pipeline_tag", "library_name",
    "createdAt", "modelId",
)
LIST_FULL_FIELDS = (*LIST_DEFAULT_FIELDS, "author", "sha", "lastModified", "gated", "disabled", "siblings")
INFO_FULL_FIELDS = (
    "_id", "id", "modelId", "author", "sha", "lastModified", "createdAt", "private", "gated", "disabled",
    "downloads", "likes", "library_name", "tags", "pipeline_tag", "cardData", "config", "siblings", "spaces",
    "safetensors", "usedStorage",
)
SORT_KEYS: dict[str, Callable[[FakeRepo], Any]] = {
    "createdAt": lambda repo: repo.created_at,
    "lastModified": lambda repo: repo.last_modified,
}
WEBHOOK_WATCH_TYPES = frozenset({"user", "org", "model", "dataset", "space"})
UNSORTABLE_BUT_VALID = frozenset({"downloads", "likes", "trendingScore"})  # all zero here: stable id order


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    received: float = 0.0  # time.monotonic() on arrival: lets a test see how long a client waited between tries


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes = b""


class HubError(Exception):
    """An error answer with the Hub's X-Error-Code / X-Error-Message headers."""

    def __init__(self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra or {}

    def reply(self) -> Reply:
        headers = {"X-Error-Message": self.message, **self.extra}
        if self.code:
            headers["X-Error-Code"] = self.code
        return json_reply({"error": self.message}, self.status, headers)


def json_reply(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})},
                 json.dumps(value).encode())


def iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _flag(query: dict[str, list[str]], name: str) -> bool:
    values = query.get(name)
    return bool(values) and values[-1].lower() in ("1", "true")


def _single(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _encode_cursor(after_id: str) -> str:
    """A keyset cursor: the last repo id served. Opaque to clients; insertions while paging neither repeat nor
    skip entries before it."""
    return base64.urlsafe_b64encode(json.dumps({"after": after_id}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after = json.loads(base64.urlsafe_b64decode(padded))["after"]
    except (ValueError, KeyError, TypeError) as exc:
        raise HubError(400, None, "Invalid cursor") from exc
    if not isinstance(after, str):
        raise HubError(400, None, "Invalid cursor")
    return after


class HubApp:
    """Turns a request into a Reply. Pure routing over a HubState snapshot; the HTTP plumbing is elsewhere."""

    def __init__(self, state: HubState, base_url: Callable[[], str], page_size: int, commits_page_size: int,
                 max_page_size: int = MAX_PAGE_SIZE):
        self.state = state
        self.base_url = base_url
        self.page_size = page_size
        self.max_page_size = max_page_size
        self.commits_page_size = commits_page_size
        self._sorted_cache: dict[tuple[str, int], list[FakeRepo]] = {}
        self._cache_lock = threading.Lock()

    def handle(self, method: str, raw_path: str, query: dict[str, list[str]], headers: dict[str, str],
               body: bytes = b"") -> Reply:
        try:
            if self.state.is_revoked(_bearer(headers.get("authorization"))):
                raise HubError(401, None, "Invalid credentials in Authorization header")
            if raw_path.rstrip("/") == "/api/settings/webhooks":
                if method != "POST":
                    raise HubError(405, None, "Method not allowed")
                return self._create_webhook(body, _bearer(headers.get("authorization")))
            if method == "POST":
                raise HubError(405, None, "Method not allowed")
            return self._route(method, raw_path, query, headers)
        except HubError as error:
            return error.reply()

    def _create_webhook(self, body: bytes, token: str | None) -> Reply:
        """What `HfApi.create_webhook` sends: {watched, domains, url | jobSourceId, secret?}; the Hub answers
        {"webhook": {id, url, job, watched, domains, secret, disabled}}."""
        if token is None:
            raise HubError(401, None, "Invalid username or password.")
        try:
            spec = json.loads(body)
        except ValueError as exc:
            raise HubError(400, None, "Invalid JSON body") from exc
        if not isinstance(spec, dict):
            raise HubError(400, None, "Invalid JSON body")
        watched, domains, url = spec.get("watched"), spec.get("domains"), spec.get("url")
        if not isinstance(watched, list) or not watched or not all(
            isinstance(item, dict) and item.get("type") in WEBHOOK_WATCH_TYPES and isinstance(item.get("name"), str)
            and item["name"] for item in watched
        ):
            raise HubError(400, None, "watched: a non-empty list of {type, name} is required")
        if not isinstance(domains, list) or not domains or not set(domains) <= {"repo", "discussion"}:
            raise HubError(400, None, "domains: a non-empty subset of repo, discussion is required")
        if not isinstance(url, str) or not url.startswith("https://"):
            raise HubError(400, None, "url: a public https:// URL is required")
        secret = spec.get("secret")
        if secret is not None and not isinstance(secret, str):
            raise HubError(400, None, "secret must be a string")
        webhook = self.state.add_webhook(token, {"url": url, "watched": [
            {"type": item["type"], "name": item["name"]} for item in watched], "domains": domains, "secret": secret})
        return json_reply({"webhook": webhook})

    # ---- routing -----------------------------------------------------------------------------------------
    def _route(self, method: str, raw_path: str, query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        segments = raw_path.strip("/").split("/")
        token = _bearer(headers.get("authorization"))
        if segments[:3] == ["api", "resolve-cache", "models"] and len(segments) >= 7:
            if method not in ("GET", "HEAD"):
                raise HubError(405, None, "Method not allowed")
            repo = self._visible_repo(f"{unquote(segments[3])}/{unquote(segments[4])}", token)
            return self._resolve(repo, unquote(segments[5]), unquote("/".join(segments[6:])), method, headers,
                                 cached=True)
        if len(segments) == 4 and segments[0] == "api" and segments[1] in ("organizations", "users") \
                and segments[3] == "overview":
            return self._overview(segments[1], unquote(segments[2]))
        if segments[0] == "cdn" and len(segments) == 2:
            return self._cdn(unquote(segments[1]), method, headers)
        if segments[:2] == ["api", "models"]:
            if method != "GET":
                raise HubError(405, None, "Method not allowed")
            if len(segments) == 2:
                return self._list_models(query, token)
            if len(segments) < 4:
                raise HubError(404, "RepoNotFound", "Repository not found")
            repo_id = f"{unquote(segments[2])}/{unquote(segments[3])}"
            rest = segments[4:]
            suffix = "".join(f"/{segment}" for segment in rest)
            repo = self._repo_or_redirect(repo_id, lambda new_id: f"/api/models/{new_id}{suffix}", query, token)
            if not rest:
                return self._model_info(repo, "main", query)
            if rest[0] == "revision" and len(rest) == 2:
                return self._model_info(repo, unquote(rest[1]), query)
            if rest == ["refs"]:
                return self._refs(repo)
            if rest[0] == "commits" and len(rest) == 2:
                return self._commits(repo, unquote(rest[1]), raw_path, query)
            if rest[0] == "tree" and len(rest) >= 2:
                return self._tree(repo, unquote(rest[1]), unquote("/".join(rest[2:])), _flag(query, "recursive"))
            raise HubError(404, None, "Not found")
        if len(segments) >= 5 and segments[2] == "resolve":
            if method not in ("GET", "HEAD"):
                raise HubError(405, None, "Method not allowed")
            repo_id = f"{unquote(segments[0])}/{unquote(segments[1])}"
            tail = "/".join(segments[2:])
            repo = self._repo_or_redirect(repo_id, lambda new_id: f"/{new_id}/{tail}", query, token)
            return self._resolve(repo, unquote(segments[3]), unquote("/".join(segments[4:])), method, headers)
        raise HubError(404, None, "Not found")

    def _overview(self, collection: str, name: str) -> Reply:
        """`get_organization_overview` / `get_user_overview`: each answers only for its own kind of namespace."""
        kind = self.state.namespace_kind(name)
        wanted = "org" if collection == "organizations" else "user"
        if kind != wanted:
            raise HubError(404, None, "Organization not found" if wanted == "org" else "User not found")
        models = sum(1 for repo in self.state.repos() if repo.author == name and not repo.private)
        common = {"_id": hashlib.md5(name.encode()).hexdigest()[:24], "avatarUrl": f"/avatars/{name}.svg",
                  "fullname": name, "type": wanted, "isFollowing": False, "numModels": models, "numDatasets": 0,
                  "numSpaces": 0, "numFollowers": 0}
        if wanted == "org":
            return json_reply({**common, "name": name, "isVerified": False, "numUsers": 1, "numPapers": 0})
        return json_reply({**common, "user": name, "isPro": False, "numLikes": 0, "numUpvotes": 0,
                           "createdAt": "2023-03-01T12:00:00.000Z"})

    def _visible_repo(self, repo_id: str, token: str | None) -> FakeRepo:
        repo = self.state.repo(repo_id)
        if repo is None or not self.state.visible(repo, token):
            raise HubError(404, "RepoNotFound", "Repository not found")
        return repo

    def _repo_or_redirect(
        self, repo_id: str, location_for: Callable[[str], str], query: dict[str, list[str]], token: str | None
    ) -> FakeRepo:
        repo = self.state.repo(repo_id)
        if repo is not None:
            if not self.state.visible(repo, token):
                raise HubError(404, "RepoNotFound", "Repository not found")
            return repo
        moved_to = self.state.renamed_to(repo_id)
        if moved_to is not None:
            location = location_for(moved_to)
            pairs = [(key, value) for key, values in query.items() for value in values]
            if pairs:
                location += "?" + urlencode(pairs)
            raise HubError(307, None, f"Repository moved to {moved_to}", {"Location": location})
        raise HubError(404, "RepoNotFound", "Repository not found")

    # ---- listing -----------------------------------------------------------------------------------------
    def _sorted(self, sort: str | None) -> list[FakeRepo]:
        key = sort if sort in SORT_KEYS else "id"
        cache_key = (key, self.state.version)
        with self._cache_lock:
            cached = self._sorted_cache.get(cache_key)
        if cached is not None:
            return cached
        repos = sorted(self.state.repos(), key=lambda repo: repo.repo_id)
        if key in SORT_KEYS:
            repos.sort(key=SORT_KEYS[key], reverse=True)  # always descending (huggingface_hub PR #3882)
        with self._cache_lock:
            self._sorted_cache = {cache_key: repos}
        return repos

    def _list_models(self, query: dict[str, list[str]], token: str | None) -> Reply:
        expand = query.get("expand", [])
        full, with_config, with_card = _flag(query, "full"), _flag(query, "config"), _flag(query, "cardData")
        if expand and (full or with_config or with_card):
            raise HubError(400, None, "expand cannot be combined with full, config or cardData")
        unknown = [key for key in expand if key not in LIST_EXPAND_KEYS]
        if unknown:
            raise HubError(400, None, f"Invalid expand keys: {', '.join(unknown)}")
        sort = _single(query, "sort")
        if sort is not None and sort not in SORT_KEYS and sort not in UNSORTABLE_BUT_VALID:
            raise HubError(400, None, f"Invalid sort: {sort}")
        limit = self._int_param(query, "limit")
        author = _single(query, "author")
        search = (_single(query, "search") or "").lower()
        filters = query.get("filter", [])
        gated = _single(query, "gated")

        def keep(repo: FakeRepo) -> bool:
            if not self.state.visible(repo, token):
                return False
            if author is not None and repo.author != author:  # case-sensitive, as on the Hub
                return False
            if search and search not in repo.repo_id.lower():
                return False
            if gated is not None and (repo.gated is not False) != (gated.lower() == "true"):
                return False
            if filters:
                tags = set(repo.hub_tags_at(repo.head))
                return all(item in tags for item in filters)
            return True

        matches = [repo for repo in self._sorted(sort) if keep(repo)]
        # `limit` is the page size, not a total: the Hub still links the next page (the client stops itself).
        page_size = min(limit, self.max_page_size) if limit else self.page_size
        cursor = _single(query, "cursor")
        if cursor:
            after = _decode_cursor(cursor)
            ids = [repo.repo_id for repo in matches]
            offset = ids.index(after) + 1 if after in ids else len(matches)
        else:
            offset = self._int_param(query, "skip") or 0
        page = matches[offset:offset + page_size]
        if expand:
            fields: tuple[str, ...] = ("_id", "id", *expand)
        elif full:
            fields = LIST_FULL_FIELDS + (("config",) if with_config else ()) + (("cardData",) if with_card else ())
        else:
            fields = LIST_DEFAULT_FIELDS + (("config",) if with_config else ()) + (("cardData",) if with_card else ())
        body = [self._model_json(repo, repo.head, fields, blobs=False, listing=True) for repo in page]
        headers = {"X-Total-Count": str(len(matches))}
        next_offset = offset + len(page)
        if next_offset < len(matches):
            pairs = [(k, v) for k, values in query.items() if k not in ("cursor", "skip") for v in values]
            pairs.append(("cursor", _encode_cursor(page[-1].repo_id)))
            headers["Link"] = f'<{self.base_url()}/api/models?{urlencode(pairs)}>; rel="next"'
        return json_reply(body, 200, headers)

    @staticmethod
    def _int_param(query: dict[str, list[str]], name: str) -> int | None:
        value = _single(query, name)
        if value is None:
            return None
        if not value.isdigit():
            raise HubError(400, None, f"Invalid {name}: {value}")
        return int(value)

    # ---- one model ---------------------------------------------------------------------------------------
    def _commit_or_error(self, repo: FakeRepo, revision: str) -> FakeCommit:
        commit = repo.commit_by_revision(revision)
        if commit is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return commit

    def _model_info(self, repo: FakeRepo, revision: str, query: dict[str, list[str]]) -> Reply:
        expand = query.get("expand", [])
        blobs, security = _flag(query, "blobs"), _flag(query, "securityStatus")
        if expand and (blobs or security):
            raise HubError(400, None, "expand cannot be combined with blobs or securityStatus")
        unknown = [key for key in expand if key not in INFO_EXPAND_KEYS]
        if unknown:
            raise HubError(400, None, f"Invalid expand keys: {', '.join(unknown)}")
        commit = self._commit_or_error(repo, revision)
        fields = ("_id", "id", *expand) if expand else INFO_FULL_FIELDS
        body = self._model_json(repo, commit, fields, blobs=blobs)
        if security:
            body["securityRepoStatus"] = {"scansDone": True, "filesWithIssues": []}
        return json_reply(body)

    def _model_json(self, repo: FakeRepo, commit: FakeCommit, fields: tuple[str, ...], *, blobs: bool,
                    listing: bool = False) -> dict:
        malformed = self.state.malformed(repo.repo_id)
        values: dict[str, Callable[[], Any]] = {
            "_id": lambda: hashlib.md5(repo.commits[0].sha.encode()).hexdigest()[:24],  # stable across renames
            "id": lambda: repo.repo_id,
            "modelId": lambda: repo.repo_id,
            "author": lambda: repo.author,
            "sha": lambda: self.state.listing_sha(repo) if listing else commit.sha,
            "lastModified": lambda: "yesterday" if listing and "last_modified" in malformed else iso(commit.date),
            "createdAt": lambda: "last spring" if "created_at" in malformed else iso(repo.created_at),
            "private": lambda: "nope" if "private" in malformed else repo.private,
            "gated": lambda: repo.gated,
            "disabled": lambda: False,
            "downloads": lambda: 0,
            "downloadsAllTime": lambda: 0,
            "likes": lambda: 0,
            "trendingScore": lambda: 0,
            "library_name": lambda: repo.library_name,
            "pipeline_tag": lambda: repo.pipeline_tag,
            "tags": lambda: [*repo.hub_tags_at(commit), 42] if "tags" in malformed else repo.hub_tags_at(commit),
            "cardData": lambda: FakeRepo.card_data_at(commit) or None,
            "config": lambda: ({"architectures": {"x": 1}, "model_type": ["qwen3"]} if "config_summary" in malformed
                               else _config_summary(commit)),
            "siblings": lambda: [_sibling(blob, blobs and "blob_ids" not in malformed) for blob in commit.blobs()
                                 if blob.path not in self.state.tree_only(repo.repo_id)],
            "spaces": lambda: [],
            "safetensors": lambda: ({"parameters": {"BF16": -5}, "total": -5} if "safetensors" in malformed
                                    else _safetensors_summary(repo, commit)),
            "usedStorage": lambda: sum(blob.size for blob in commit.blobs()),
            "baseModels": lambda: _base_models(repo, commit),
            "childrenModelCount": lambda: self.state.children_count(repo.repo_id),
        }
        body: dict[str, Any] = {}
        for name in fields:
            producer = values.get(name)
            if producer is None:
                continue  # a valid key this fake does not model (gguf, inference, …): absent, as for most repos
            value = producer()
            if value is not None:
                body[name] = value
        return body

    def _refs(self, repo: FakeRepo) -> Reply:
        return json_reply({
            "branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": repo.head.sha}],
            "converts": [], "tags": [], "pullRequests": [],
        })

    def _commits(self, repo: FakeRepo, revision: str, raw_path: str, query: dict[str, list[str]]) -> Reply:
        commit = self._commit_or_error(repo, revision)
        history = list(repo.commits[: repo.commits.index(commit) + 1])[::-1]
        page_index = self._int_param(query, "p") or 0
        start = page_index * self.commits_page_size
        page = history[start:start + self.commits_page_size]
        formatted = "formatted" in query.get("expand[]", []) + query.get("expand", [])
        body = []
        for item in page:
            entry: dict[str, Any] = {
                "id": item.sha, "authors": [{"user": item.author}], "date": iso(item.date),
                "title": item.title, "message": "",
            }
            if formatted:
                entry["formatted"] = {"title": f"<p>{item.title}</p>", "message": ""}
            body.append(entry)
        headers: dict[str, str] = {"X-Total-Count": str(len(history))}
        if start + len(page) < len(history):
            pairs = [(k, v) for k, values in query.items() if k != "p" for v in values]
            pairs.append(("p", str(page_index + 1)))
            headers["Link"] = f'<{self.base_url()}{raw_path}?{urlencode(pairs)}>; rel="next"'
        return json_reply(body, 200, headers)

    def _tree(self, repo: FakeRepo, revision: str, folder: str, recursive: bool) -> Reply:
        """list_repo_tree (what snapshot_download lists): files with size and blob id (and LFS oid, size and
        pointer size), and folders, under `folder` at `revision`; all levels with `recursive`."""
        commit = self._commit_or_error(repo, revision)
        prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
        entries: list[dict[str, Any]] = []
        folders: set[str] = set()
        for blob in commit.blobs():
            if not blob.path.startswith(prefix):
                continue
            rest = blob.path[len(prefix):].split("/")
            for depth in range(1, len(rest)):
                if depth > 1 and not recursive:
                    break
                folders.add(prefix + "/".join(rest[:depth]))
            if len(rest) > 1 and not recursive:
                continue
            entry: dict[str, Any] = {"type": "file", "oid": blob.blob_id, "size": blob.size, "path": blob.path}
            if blob.lfs_sha256 is not None:
                entry["lfs"] = {"oid": blob.lfs_sha256, "size": blob.size, "pointerSize": len(blob.lfs_pointer or b"")}
            entries.append(entry)
        if prefix and not entries and not folders:
            raise HubError(404, "EntryNotFound", f"{folder} does not exist on {revision}")
        entries += [{"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "size": 0, "path": path}
                    for path in sorted(folders)]
        return json_reply(entries)

    # ---- files -------------------------------------------------------------------------------------------
    def _resolve(self, repo: FakeRepo, revision: str, path: str, method: str, headers: dict[str, str], *,
                 cached: bool = False) -> Reply:
        if repo.gated is not False:
            token = _bearer(headers.get("authorization"))
            if token is None:
                raise HubError(401, "GatedRepo", "Access to this repo is restricted: you must be authenticated")
            if token not in repo.granted_tokens:
                raise HubError(403, "GatedRepo", "Access to this gated repo has not been granted")
        commit = self._commit_or_error(repo, revision)
        blob = commit.blob(path)
        if blob is None:
            raise HubError(404, "EntryNotFound", f"{path} does not exist on {revision}",
                           {"X-Repo-Commit": commit.sha})
        common = {
            "X-Repo-Commit": commit.sha, "ETag": f'"{blob.etag}"', "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if blob.lfs_sha256 is not None:
            # LFS/Xet files live on a CDN (another host): a 302 with the file's metadata in X-Linked-* headers.
            cdn = self.base_url().replace("127.0.0.1", "localhost")
            return Reply(302, {
                "X-Repo-Commit": commit.sha, "X-Linked-Etag": f'"{blob.lfs_sha256}"',
                "X-Linked-Size": str(blob.size), "ETag": f'"{blob.lfs_sha256}"',
                "Location": f"{cdn}/cdn/{blob.lfs_sha256}?repo={repo.repo_id}&commit={commit.sha}",
                **({"X-Xet-Hash": blob.lfs_sha256} if self.state.xet_headers else {}),
            })
        if not cached and not re.fullmatch(r"[0-9a-f]{40}", revision):
            # Small files on a branch: the Hub sends the client to a commit-pinned, cacheable URL.
            return Reply(307, {**common, "Location": f"/api/resolve-cache/models/{repo.repo_id}/{commit.sha}/"
                                                     f"{path}?etag={blob.etag}"})
        if_none_match = headers.get("if-none-match", "").strip().strip('"').removeprefix("W/").strip('"')
        if if_none_match and if_none_match == blob.etag:
            return Reply(304, common)
        content = blob.content
        range_header = headers.get("range")
        if range_header and method == "GET":
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", range_header.strip())
            if match is None or int(match.group(1)) >= len(content):
                return Reply(416, {**common, "Content-Range": f"bytes */{len(content)}"})
            start = int(match.group(1))
            end = min(int(match.group(2)) if match.group(2) else len(content) - 1, len(content) - 1)
            return Reply(206, {**common, "Content-Range": f"bytes {start}-{end}/{len(content)}"},
                         content[start:end + 1])
        return Reply(200, common, content)


    def _cdn(self, sha256: str, method: str, headers: dict[str, str]) -> Reply:
        for repo in self.state.repos():
            for commit in repo.commits:
                for blob in commit.blobs():
                    if blob.lfs_sha256 == sha256:
                        common = {"ETag": f'"{sha256}"', "Accept-Ranges": "bytes",
                                  "Content-Type": "application/octet-stream"}
                        content = blob.content
                        match = re.fullmatch(r"bytes=(\d+)-(\d*)", (headers.get("range") or "").strip())
                        if match and method == "GET" and int(match.group(1)) < len(content):
                            start = int(match.group(1))
                            end = min(int(match.group(2)) if match.group(2) else len(content) - 1, len(content) - 1)
                            return Reply(206, {**common, "Content-Range": f"bytes {start}-{end}/{len(content)}"},
                                         content[start:end + 1])
                        return Reply(200, common, content)
        raise HubError(404, None, "Not found")


def _bearer(authorization: str | None) -> str | None:
    if not authorization or not authorization.lower().startswith("bearer "):
        return None
    return authorization[7:].strip() or None


def _sibling(blob: Any, with_blobs: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"rfilename": blob.path}
    if with_blobs:
        entry["size"] = blob.size
        entry["blobId"] = blob.blob_id
        if blob.lfs_sha256 is not None:
            entry["lfs"] = {"sha256": blob.lfs_sha256, "size": blob.size, "pointerSize": len(blob.lfs_pointer)}
    return entry


def _json_file(commit: FakeCommit, path: str) -> dict[str, Any] | None:
    content = commit.files.get(path)
    if content is None:
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _config_summary(commit: FakeCommit) -> dict[str, Any] | None:
    """The Hub's `config` is a summary, not config.json (hub-protocol.md §3.3)."""
    config = _json_file(commit, "config.json")
    if config is None:
        return None
    summary: dict[str, Any] = {key: config[key] for key in ("architectures", "model_type") if key in config}
    tokenizer_config = _json_file(commit, "tokenizer_config.json")
    if tokenizer_config is not None:
        summary["tokenizer_config"] = {
            key: tokenizer_config[key] for key in ("bos_token", "eos_token", "pad_token", "unk_token",
                                                   "chat_template") if key in tokenizer_config
        }
    return summary


def _safetensors_summary(repo: FakeRepo, commit: FakeCommit) -> dict[str, Any] | None:
    files = [path for path in commit.files if path.endswith(".safetensors")]
    if not files:
        return None
    if repo.reported_parameters is not None:
        parameters = dict(repo.reported_parameters)
    else:
        parameters = {}
        for path in files:
            try:
                counts = safetensors_parameters(commit.files[path])
            except (ValueError, KeyError, struct.error):
                continue
            for dtype, count in counts.items():
                parameters[dtype] = parameters.get(dtype, 0) + count
    return {"parameters": parameters, "total": sum(parameters.values())}


def _base_models(repo: FakeRepo, commit: FakeCommit) -> dict[str, Any] | None:
    parents, relation = repo.base_models_at(commit)
    if not parents:
        return None
    return {"relation": relation, "models": [{"id": parent} for parent in parents]}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, app_factory: Callable[[_Server], HubApp]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.app = app_factory(self)
        self.stopping = threading.Event()
        self.requests: list[RecordedRequest] = []
        self.requests_lock = threading.Lock()
        self.request_ids = itertools.count(1)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-request (a killed watcher) is normal here; anything else is reported."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def drop_open_connections(self) -> None:
        """Unblock handler threads parked on keep-alive connections so they exit with the server."""
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real Hub; every reply has a Content-Length
    # Headers and body go out as two writes: with Nagle's algorithm the body waits for the client's delayed ACK
    # (~40 ms on Linux), which made every reply slow.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silent: the request log is `FakeHub.requests`."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self._serve("POST")

    def _serve(self, method: str) -> None:
        split = urlsplit(self.path)
        query = parse_qs(split.query, keep_blank_values=True)
        headers = {key.lower(): value for key, value in self.headers.items()}
        length = headers.get("content-length", "0").strip()
        # Read the whole body first, so the keep-alive connection stays in step whatever the answer.
        body = self.rfile.read(int(length)) if method == "POST" and length.isdigit() else b""
        with self.server.requests_lock:
            self.server.requests.append(
                RecordedRequest(method, split.path, query, headers.get("authorization"), time.monotonic())
            )
        self._ratelimit: dict[str, str] = {}
        if split.path.startswith("/api/") and not split.path.startswith("/api/resolve-cache/"):
            allowed, remaining, reset = self.server.app.state.take_api_call(time.monotonic())
            quota, window = self.server.app.state.quota, int(self.server.app.state.window_s)
            self._ratelimit = {"RateLimit": f'"api";r={remaining};t={reset}',
                               "RateLimit-Policy": f'"fixed window";"api";q={quota};w={window}'}
            if not allowed:
                self._send(json_reply({"error": "Too Many Requests: you have reached your 'api' rate limit"},
                                      429), method)
                return
        fault = self.server.app.state.take_fault(split.path)
        if fault is not None and self._apply_fault(fault):
            return
        reply = self.server.app.handle(method, split.path, query, headers, body)
        if fault is not None and fault.kind == "truncated":
            self._send_truncated(reply, fault, method)
            return
        if fault is not None and fault.kind in ("endless", "wrong_body") and method == "GET" and reply.status == 200:
            self._send_hostile_body(reply, fault)
            return
        rate = self.server.app.state.download_bytes_per_s
        if rate and method == "GET" and reply.status in (200, 206) and (
                split.path.startswith("/cdn/") or "/resolve/" in split.path):
            self._send_paced(reply, rate)
            return
        self._send(reply, method)

    def _send_paced(self, reply: Reply, bytes_per_s: float) -> None:
        """A file body at `bytes_per_s`, as a slow link delivers it: a client killed midway has part of it."""
        chunk = max(1024, int(bytes_per_s / 20))
        try:
            self._write_head(reply, len(reply.body))
            for start in range(0, len(reply.body), chunk):
                if self.server.stopping.is_set():
                    break
                self.wfile.write(reply.body[start:start + chunk])
                self.wfile.flush()
                time.sleep(chunk / bytes_per_s)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_hostile_body(self, reply: Reply, fault: Fault) -> None:
        """A hostile mirror's body: the same length with every byte changed, or one that never ends (chunked, no
        Content-Length; it stops when the client hangs up, or after 256 MiB)."""
        if fault.kind == "wrong_body":
            self._send(Reply(reply.status, reply.headers, bytes(b ^ 0x5A for b in reply.body)), "GET")
            return
        try:
            self.send_response(reply.status)
            for name, value in {**getattr(self, "_ratelimit", {}), **reply.headers}.items():
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"A" * 65536
            for _ in range(4096):
                if self.server.stopping.is_set():
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _apply_fault(self, fault: Fault) -> bool:
        """Answer with the fault; False when the normal reply should still be produced (slow, truncated)."""
        if fault.kind == "429":
            wait = max(0, int(fault.seconds))
            self._send(json_reply({"error": "Too Many Requests"}, 429, {
                "Retry-After": str(wait), "RateLimit": f'"api";r=0;t={wait}',
                "RateLimit-Policy": '"fixed window";"api";q=500;w=300',
            }), "GET")
            return True
        if fault.kind in ("500", "503"):
            status = int(fault.kind)
            self._send(json_reply({"error": "Internal Error" if status == 500 else "Service Unavailable"}, status),
                       "GET")
            return True
        if fault.kind == "timeout":
            self.server.stopping.wait(fault.seconds)
            self.close_connection = True
            return True
        if fault.kind == "slow":
            self.server.stopping.wait(fault.seconds)
            return False
        if fault.kind == "reset":
            # SO_LINGER 0: close() sends a TCP RST instead of a clean FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return True
        return False

    def _write_head(self, reply: Reply, content_length: int) -> None:
        self.send_response(reply.status)
        for name, value in {**getattr(self, "_ratelimit", {}), **reply.headers}.items():
            self.send_header(name, value)
        self.send_header("X-Request-Id", f"fakehub-{next(self.server.request_ids)}")
        self.send_header("Content-Length", str(content_length))
        self.end_headers()

    def _send(self, reply: Reply, method: str) -> None:
        try:
            self._write_head(reply, len(reply.body))
            if method != "HEAD" and reply.status not in (204, 304):
                self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_truncated(self, reply: Reply, fault: Fault, method: str) -> None:
        cut = reply.body[: len(reply.body) // 2]
        closing = Reply(reply.status, {**reply.headers, "Connection": "close"}, reply.body)
        try:
            self._write_head(closing, len(reply.body) if fault.mode == "full_length" else len(cut))
            if method != "HEAD":
                self.wfile.write(cut)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


class FakeHub:
    """`with FakeHub(state) as hub:` serves `state` at `hub.url` from a background thread."""

    def __init__(self, state: HubState, *, page_size: int = DEFAULT_PAGE_SIZE,
                 commits_page_size: int = DEFAULT_COMMITS_PAGE_SIZE, max_page_size: int = MAX_PAGE_SIZE) -> None:
        """`page_size`: a listing page without `limit`; `max_page_size`: the largest `limit` honoured (the Hub's
        is 1000; tests of paging make it small)."""
        if page_size < 1 or commits_page_size < 1 or max_page_size < 1:
            raise ValueError("page sizes must be positive")
        self.state = state
        self._server = _Server(lambda server: HubApp(state, lambda: server.url, page_size, commits_page_size,
                                                     max_page_size))
        # A short poll interval keeps shutdown (once per test) fast.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fakehub", daemon=True)

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._server.requests_lock:
            return list(self._server.requests)

    def count(self, method: str | None = None, path_regex: str | None = None) -> int:
        pattern = re.compile(path_regex) if path_regex else None
        return sum(
            1 for request in self.requests
            if (method is None or request.method == method) and (pattern is None or pattern.search(request.path))
        )

    def clear_requests(self) -> None:
        with self._server.requests_lock:
            self._server.requests.clear()

    def start(self) -> FakeHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.stopping.set()
        self._server.shutdown()
        self._server.drop_open_connections()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
