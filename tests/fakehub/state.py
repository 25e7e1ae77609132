"""In-memory model of Hub repositories for the fake Hub: repos, commits, renames, gating and injected faults.

Everything the server reads is an immutable snapshot (frozen dataclasses, tuples, bytes), taken under one lock,
so a request handler never sees a half-applied mutation.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import struct
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import yaml

GatedMode = Literal[False, "auto", "manual"]
# A hostile mirror's file bodies: "endless" never ends (chunked, no length), "wrong_body" has the right length and
# other bytes (its sha256 is not the advertised one).
FaultKind = Literal["429", "500", "503", "timeout", "slow", "truncated", "reset", "endless", "wrong_body"]
FAULT_KINDS: tuple[str, ...] = ("429", "500", "503", "timeout", "slow", "truncated", "reset", "endless",
                                "wrong_body")
TruncationMode = Literal["full_length", "short"]
# What `HubState.malform` can get wrong about a repo.
MALFORMATIONS = frozenset({"blob_ids", "last_modified", "created_at", "tags", "config_summary", "safetensors",
                           "private"})

# Files the Hub stores through LFS/Xet: weights and anything large.
LFS_SUFFIXES: tuple[str, ...] = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".onnx", ".msgpack", ".h5")
LFS_MIN_SIZE = 10 * 1024 * 1024
_FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)


def git_blob_sha(content: bytes) -> str:
    """The git object id of a file, which the Hub reports as `blobId` and as the ETag of non-LFS files."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def is_lfs_path(path: str, content: bytes) -> bool:
    return path.endswith(LFS_SUFFIXES) or len(content) >= LFS_MIN_SIZE


@dataclass(frozen=True)
class FakeBlob:
    """What the Hub knows about one file at one commit."""

    path: str
    content: bytes
    blob_id: str
    lfs_sha256: str | None

    @property
    def size(self) -> int:
        return len(self.content)

    @property
    def etag(self) -> str:
        # The Hub's ETag is the sha256 for LFS files and the git blob id otherwise.
        return self.lfs_sha256 or self.blob_id

    @property
    def lfs_pointer(self) -> bytes | None:
        if self.lfs_sha256 is None:
            return None
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.lfs_sha256}\nsize {self.size}\n".encode()

    @staticmethod
    def of(path: str, content: bytes) -> FakeBlob:
        if not is_lfs_path(path, content):
            return FakeBlob(path, content, git_blob_sha(content), None)
        sha256 = hashlib.sha256(content).hexdigest()
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(content)}\n".encode()
        return FakeBlob(path, content, git_blob_sha(pointer), sha256)


@dataclass(frozen=True)
class FakeCommit:
    sha: str
    date: datetime
    title: str
    files: Mapping[str, bytes]
    author: str = "system"

    def blob(self, path: str) -> FakeBlob | None:
        content = self.files.get(path)
        return None if content is None else FakeBlob.of(path, content)

    def blobs(self) -> list[FakeBlob]:
        return [FakeBlob.of(path, self.files[path]) for path in sorted(self.files)]


def commit_sha(parent: str | None, title: str, date: datetime, files: Mapping[str, bytes]) -> str:
    """Deterministic from content and parent, so a scenario always produces the same shas."""
    digest = hashlib.sha1()
    digest.update(f"parent {parent or '-'}\n{title}\n{date.isoformat()}\n".encode())
    for path in sorted(files):
        digest.update(f"{path}\0{git_blob_sha(files[path])}\n".encode())
    return digest.hexdigest()


def parse_front_matter(readme: bytes | None) -> dict[str, Any]:
    """Card metadata, the way the Hub derives `cardData`: the YAML block at the top of README.md."""
    if not readme:
        return {}
    match = _FRONT_MATTER.match(readme.decode("utf-8", errors="replace"))
    if match is None:
        return {}
    loaded = yaml.safe_load(match.group(1))
    return loaded if isinstance(loaded, dict) else {}


def readme_with_card(card_data: Mapping[str, Any] | None, body: str) -> bytes:
    if not card_data:
        return body.encode()
    front = yaml.safe_dump(dict(card_data), sort_keys=False, allow_unicode=True).strip()
    return f"---\n{front}\n---\n\n{body}".encode()


def readme_body(readme: bytes | None) -> str:
    if not readme:
        return ""
    text = readme.decode("utf-8", errors="replace")
    match = _FRONT_MATTER.match(text)
    return text[match.end():].lstrip("\n") if match else text


def card_base_models(card: Mapping[str, Any]) -> tuple[str, ...]:
    value = card.get("base_model")
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return ()


@dataclass(frozen=True)
class FakeRepo:
    repo_id: str
    author: str
    created_at: datetime
    gated: GatedMode
    tags: tuple[str, ...]
    pipeline_tag: str | None
    library_name: str | None
    commits: tuple[FakeCommit, ...]  # oldest first; the last one is the head of main
    granted_tokens: frozenset[str] = frozenset()
    # The parameter count the Hub reports for the real model; the stored weights are tiny stand-ins.
    reported_parameters: Mapping[str, int] | None = None
    # Visible only to members of the owning org (their tokens); everyone else gets RepoNotFound.
    private: bool = False

    @property
    def head(self) -> FakeCommit:
        return self.commits[-1]

    @property
    def sha(self) -> str:
        return self.head.sha

    @property
    def last_modified(self) -> datetime:
        return self.head.date

    @property
    def files(self) -> Mapping[str, bytes]:
        return self.head.files

    @property
    def card_data(self) -> dict[str, Any]:
        return self.card_data_at(self.head)

    @staticmethod
    def card_data_at(commit: FakeCommit) -> dict[str, Any]:
        return parse_front_matter(commit.files.get("README.md"))

    def commit_by_revision(self, revision: str) -> FakeCommit | None:
        if revision in ("main", "HEAD", "refs/heads/main"):
            return self.head
        for commit in self.commits:
            if commit.sha == revision:
                return commit
        return None

    def base_models_at(self, commit: FakeCommit) -> tuple[tuple[str, ...], str | None]:
        """Parents and the relation the Hub infers (card override first, then files)."""
        card = self.card_data_at(commit)
        parents = card_base_models(card)
        if not parents:
            return (), None
        relation = card.get("base_model_relation")
        if not isinstance(relation, str):
            if len(parents) > 1:
                relation = "merge"
            elif any(path.endswith(".gguf") for path in commit.files):
                relation = "quantized"
            elif "adapter_config.json" in commit.files:
                relation = "adapter"
            else:
                relation = "finetune"
        return parents, relation

    def hub_tags_at(self, commit: FakeCommit) -> list[str]:
        """Tags as the Hub shows them: the repo's own plus library, format, architecture and model-tree tags."""
        card = self.card_data_at(commit)
        tags: list[str] = list(self.tags)
        for tag in card.get("tags") or []:
            tags.append(str(tag))
        if self.library_name:
            tags.append(self.library_name)
        if any(path.endswith(".safetensors") for path in commit.files):
            tags.append("safetensors")
        config = _json_or_none(commit.files.get("config.json"))
        if isinstance(config, dict) and isinstance(config.get("model_type"), str):
            tags.append(config["model_type"])
        if self.pipeline_tag:
            tags.append(self.pipeline_tag)
        parents, relation = self.base_models_at(commit)
        for parent in parents:
            tags.append(f"base_model:{parent}")
            tags.append(f"base_model:{relation}:{parent}")
        if isinstance(card.get("license"), str):
            tags.append(f"license:{card['license']}")
        tags.append("region:us")
        return list(dict.fromkeys(tags))


@dataclass
class Fault:
    """A failure the server produces for the next `remaining` requests whose path matches `pattern`."""

    pattern: re.Pattern[str]
    kind: FaultKind
    remaining: int | None  # None: every matching request, until cleared
    seconds: float
    mode: TruncationMode = "full_length"
    served: int = field(default=0)


def _json_or_none(content: bytes | None) -> Any:
    if content is None:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None


class HubState:
    """The Hub's repositories. Thread-safe: tests mutate it while the server answers requests."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._repos: dict[str, FakeRepo] = {}
        self._renamed: dict[str, str] = {}
        self._faults: list[Fault] = []
        self._version = 0
        self._members: dict[str, set[str]] = {}
        # Namespaces that are users (yuhuili); every other author is an organization.
        self._users: set[str] = set()
        self._revoked: set[str] = set()
        # Webhooks created through POST /api/settings/webhooks, with the token that created each.
        self._webhooks: list[tuple[str, dict[str, Any]]] = []
        # The API bucket (hub-protocol.md §7): `quota` calls per fixed `window` seconds, per client. Generous by
        # default so ordinary tests never meet it; rate-limit tests set a small one.
        self.quota = 100_000
        self.window_s = 300.0
        self._bucket_start: float | None = None
        self._bucket_used = 0
        # Whether LFS redirects carry X-Xet-Hash (clients with hf_xet then take the Xet path, which this fake
        # does not serve).
        self.xet_headers = False
        # Per repo, what the server gets wrong about it (see `malform`), and listing shas that lag main.
        self._malformed: dict[str, frozenset[str]] = {}
        self._tree_only: dict[str, frozenset[str]] = {}
        self._stale_listing: dict[str, str] = {}
        # File bodies (resolve and CDN) sent at this many bytes per second; None: at once.
        self.download_bytes_per_s: float | None = None

    # ---- reads -------------------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """Bumped by every mutation; lets the server cache sorted listings."""
        return self._version

    def repo(self, repo_id: str) -> FakeRepo | None:
        """The repo under this id in any case, as on the Hub (`qwen/qwen3-8b` answers for `Qwen/Qwen3-8B`, with the
        repo's own spelling in the body)."""
        with self._lock:
            found = self._repos.get(repo_id)
            if found is None:
                lowered = repo_id.lower()
                found = next((repo for key, repo in self._repos.items() if key.lower() == lowered), None)
            return found

    def repos(self) -> list[FakeRepo]:
        with self._lock:
            return list(self._repos.values())

    def renamed_to(self, repo_id: str) -> str | None:
        """The current id of a repo that was renamed away from `repo_id` (following chains of renames)."""
        with self._lock:
            target = self._renamed.get(repo_id)
            seen = {repo_id}
            while target is not None and target in self._renamed and target not in seen:
                seen.add(target)
                target = self._renamed[target]
            return target

    def is_member(self, org: str, token: str | None) -> bool:
        with self._lock:
            return token is not None and token in self._members.get(org, set())

    def namespace_kind(self, name: str) -> str | None:
        """"user", "org", or None for a name no repo, member list or user account has."""
        with self._lock:
            if name in self._users:
                return "user"
            if name in self._members or any(repo.author == name for repo in self._repos.values()):
                return "org"
            return None

    def is_revoked(self, token: str | None) -> bool:
        with self._lock:
            return token is not None and token in self._revoked

    def visible(self, repo: FakeRepo, token: str | None) -> bool:
        """Private repos exist only for tokens of their org's members, as on the Hub."""
        return not repo.private or self.is_member(repo.author, token)

    def take_api_call(self, now: float) -> tuple[bool, int, int]:
        """Spend one call from the bucket: (allowed, remaining, seconds until the window resets)."""
        with self._lock:
            if self._bucket_start is None or now - self._bucket_start >= self.window_s:
                self._bucket_start, self._bucket_used = now, 0
            reset = max(0, int(self._bucket_start + self.window_s - now + 0.999))
            if self._bucket_used >= self.quota:
                return False, 0, reset
            self._bucket_used += 1
            return True, self.quota - self._bucket_used, reset

    def children_count(self, repo_id: str) -> int:
        with self._lock:
            return sum(1 for repo in self._repos.values() if repo_id in repo.base_models_at(repo.head)[0])

    # ---- mutations ---------------------------------------------------------------------------------------
    def add_repo(
        self,
        repo_id: str,
        *,
        files: Mapping[str, bytes],
        date: datetime,
        created_at: datetime | None = None,
        gated: GatedMode = False,
        tags: Iterable[str] = (),
        card_data: Mapping[str, Any] | None = None,
        pipeline_tag: str | None = None,
        library_name: str | None = None,
        title: str = "Upload folder using huggingface_hub",
        head_sha: str | None = None,
        reported_parameters: Mapping[str, int] | None = None,
        private: bool = False,
    ) -> FakeRepo:
        """A new repo: the system's "initial commit" at `created_at`, then one commit with `files` at `date`.

        `card_data` becomes the README's YAML front matter (the Hub derives cardData from it). `head_sha` pins
        the upload commit's sha to a real-world value for fixtures.
        """
        _check_repo_id(repo_id)
        created = created_at or date
        if date < created:
            raise ValueError(f"{repo_id}: upload date {date} precedes creation {created}")
        content = dict(files)
        if card_data is not None:
            content["README.md"] = readme_with_card(card_data, readme_body(content.get("README.md")))
        initial_files = {".gitattributes": _GITATTRIBUTES}
        initial = FakeCommit(commit_sha(None, "initial commit", created, initial_files), created,
                             "initial commit", initial_files, "system")
        tree = {**initial_files, **content}
        upload_sha = head_sha or commit_sha(initial.sha, title, date, tree)
        if not re.fullmatch(r"[0-9a-f]{40}", upload_sha):
            raise ValueError(f"head_sha must be 40 lowercase hex digits, got {upload_sha!r}")
        upload = FakeCommit(upload_sha, date, title, tree, repo_id.split("/")[0])
        repo = FakeRepo(
            repo_id=repo_id,
            author=repo_id.split("/")[0],
            created_at=created,
            gated=gated,
            tags=tuple(tags),
            pipeline_tag=pipeline_tag,
            library_name=library_name,
            commits=(initial, upload),
            reported_parameters=dict(reported_parameters) if reported_parameters else None,
            private=private,
        )
        with self._lock:
            if repo_id in self._repos:
                raise ValueError(f"{repo_id} already exists")
            self._renamed.pop(repo_id, None)
            self._repos[repo_id] = repo
            self._version += 1
        return repo

    def commit(
        self, repo_id: str, files_changed: Mapping[str, bytes | None], *, title: str, date: datetime
    ) -> FakeCommit:
        """A new head commit on main; a None value deletes that file."""
        with self._lock:
            repo = self._require(repo_id)
            if date < repo.head.date:
                raise ValueError(f"{repo_id}: commit date {date} precedes the head commit {repo.head.date}")
            tree = dict(repo.head.files)
            for path, content in files_changed.items():
                if content is None:
                    if path not in tree:
                        raise KeyError(f"{repo_id}: cannot delete missing file {path}")
                    del tree[path]
                else:
                    tree[path] = content
            new = FakeCommit(commit_sha(repo.head.sha, title, date, tree), date, title, tree, repo.author)
            self._repos[repo_id] = replace(repo, commits=(*repo.commits, new))
            self._version += 1
            return new

    def force_push(
        self, repo_id: str, files_changed: Mapping[str, bytes | None], *, title: str, date: datetime
    ) -> FakeCommit:
        """Rewrite main's head commit (`git push --force`): the old head's sha no longer resolves anywhere."""
        with self._lock:
            repo = self._require(repo_id)
            parent = repo.commits[-2]
            tree = dict(repo.head.files)
            for path, content in files_changed.items():
                if content is None:
                    tree.pop(path, None)
                else:
                    tree[path] = content
            new = FakeCommit(commit_sha(parent.sha, title, date, tree), date, title, tree, repo.author)
            self._repos[repo_id] = replace(repo, commits=(*repo.commits[:-1], new))
            self._version += 1
            return new

    def rename(self, old: str, new: str) -> FakeRepo:
        """Move a repo; the old id then answers 307 to the new one. Same commits, same shas."""
        _check_repo_id(new)
        with self._lock:
            repo = self._require(old)
            if new in self._repos:
                raise ValueError(f"{new} already exists")
            moved = replace(repo, repo_id=new, author=new.split("/")[0])
            del self._repos[old]
            self._repos[new] = moved
            self._renamed[old] = new
            self._renamed.pop(new, None)
            self._version += 1
            return moved

    def add_member(self, org: str, token: str) -> None:
        """`token` belongs to a member of `org`: it sees the org's private repos (in listings too)."""
        with self._lock:
            self._members.setdefault(org, set()).add(token)
            self._version += 1

    def add_user(self, name: str) -> None:
        """`name` is a user account, not an organization (its repos are listed by `author` all the same)."""
        with self._lock:
            self._users.add(name)
            self._version += 1

    def revoke_token(self, token: str) -> None:
        """Every request with this token then gets 401 (invalid credentials), whatever it asks for."""
        with self._lock:
            self._revoked.add(token)

    def add_webhook(self, token: str, webhook: dict[str, Any]) -> dict[str, Any]:
        """Store a webhook the way the Hub does (an id, enabled); returns it as the Hub shows it."""
        with self._lock:
            created = {**webhook, "id": hashlib.sha1(f"webhook {len(self._webhooks)}".encode()).hexdigest()[:24],
                       "disabled": False, "job": None}
            self._webhooks.append((token, created))
            return dict(created)

    def webhooks(self) -> list[tuple[str, dict[str, Any]]]:
        """(creating token, webhook) for each webhook created so far."""
        with self._lock:
            return [(token, dict(webhook)) for token, webhook in self._webhooks]

    def set_rate_limit(self, quota: int, window_s: float = 300.0) -> None:
        """A fresh bucket of `quota` API calls per `window_s`; the call after the last one gets 429."""
        with self._lock:
            self.quota, self.window_s = quota, window_s
            self._bucket_start, self._bucket_used = None, 0

    def malform(self, repo_id: str, *what: str) -> None:
        """Serve this repo badly: "blob_ids" (file metadata without blob ids), "last_modified" (a listing date
        that is not a date), "created_at" (a creation date that is not one, everywhere), "tags" (a number among
        the tags), "config_summary" (`config` with architectures and model_type of the wrong types),
        "safetensors" (a negative parameter total), "private" (a visibility that is not a boolean). `heal`
        undoes it."""
        unknown = set(what) - MALFORMATIONS
        if unknown:
            raise ValueError(f"unknown malformation {sorted(unknown)}")
        with self._lock:
            self._malformed[repo_id] = frozenset(what)
            self._version += 1

    def heal(self, repo_id: str) -> None:
        with self._lock:
            self._malformed.pop(repo_id, None)
            self._stale_listing.pop(repo_id, None)
            self._version += 1

    def malformed(self, repo_id: str) -> frozenset[str]:
        with self._lock:
            return self._malformed.get(repo_id, frozenset())

    def hide_from_siblings(self, repo_id: str, *paths: str) -> None:
        """A hostile mirror: these files are in the tree listing (and served) but not in model_info's siblings."""
        with self._lock:
            self._tree_only[repo_id] = frozenset(paths)
            self._version += 1

    def tree_only(self, repo_id: str) -> frozenset[str]:
        with self._lock:
            return self._tree_only.get(repo_id, frozenset())

    def stale_listing(self, repo_id: str, sha: str) -> None:
        """Listings report `sha` for this repo (a commit that no longer exists after a force-push) while refs
        and revisions know only the real history (huggingface_hub issue #3406)."""
        with self._lock:
            self._stale_listing[repo_id] = sha
            self._version += 1

    def listing_sha(self, repo: FakeRepo) -> str:
        with self._lock:
            return self._stale_listing.get(repo.repo_id, repo.sha)

    def set_private(self, repo_id: str, private: bool) -> FakeRepo:
        """A settings change, not a commit: sha and lastModified stay as they were (a staged release going
        public looks older than the org's newest commit)."""
        with self._lock:
            repo = replace(self._require(repo_id), private=private)
            self._repos[repo_id] = repo
            self._version += 1
            return repo

    def delete(self, repo_id: str) -> None:
        with self._lock:
            self._require(repo_id)
            del self._repos[repo_id]
            self._version += 1

    def set_gated(self, repo_id: str, gated: GatedMode, *, granted_tokens: Iterable[str] = ()) -> FakeRepo:
        """Gate a repo; only requests with one of `granted_tokens` as bearer token may read its files."""
        with self._lock:
            repo = replace(self._require(repo_id), gated=gated, granted_tokens=frozenset(granted_tokens))
            self._repos[repo_id] = repo
            self._version += 1
            return repo

    # ---- fault injection ---------------------------------------------------------------------------------
    def inject(
        self,
        path_regex: str,
        kind: FaultKind,
        times: int | None = 1,
        *,
        seconds: float | None = None,
        mode: TruncationMode = "full_length",
    ) -> Fault:
        """Fail the next `times` requests (None: all) whose URL path matches `path_regex` (re.search).

        `seconds`: the wait announced by a 429 (default 0), how long `timeout` stalls before dropping the
        connection (default 3) or how long `slow` delays a normal answer (default 0.3). `mode` for `truncated`:
        "full_length" announces the full Content-Length and closes early; "short" sends a cut body whose
        Content-Length matches it (valid HTTP, invalid JSON).
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {', '.join(FAULT_KINDS)}")
        if times is not None and times < 1:
            raise ValueError("times must be positive or None")
        default_seconds = {"429": 0.0, "timeout": 3.0, "slow": 0.3}.get(kind, 0.0)
        fault = Fault(re.compile(path_regex), kind, times, default_seconds if seconds is None else seconds, mode)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def take_fault(self, path: str) -> Fault | None:
        """The first active fault matching `path`, consuming one of its uses."""
        with self._lock:
            for fault in self._faults:
                if fault.remaining == 0 or not fault.pattern.search(path):
                    continue
                fault.served += 1
                if fault.remaining is not None:
                    fault.remaining -= 1
                return fault
            return None

    def _require(self, repo_id: str) -> FakeRepo:
        repo = self._repos.get(repo_id)
        if repo is None:
            raise KeyError(f"no repo {repo_id}")
        return repo


def _check_repo_id(repo_id: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", repo_id):
        raise ValueError(f"repo id must be 'org/name', got {repo_id!r}")


_GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"


# ---- realistic repo contents ---------------------------------------------------------------------------------

def tiny_safetensors(tensors: Mapping[str, tuple[int, ...]], seed: int, dtype: str = "BF16") -> bytes:
    """A valid safetensors file with the given tensor shapes and seeded random bytes (2 bytes per value)."""
    rng = random.Random(seed)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    data = bytearray()
    for name in sorted(tensors):
        shape = tensors[name]
        count = 1
        for dim in shape:
            count *= dim
        start = len(data)
        data += rng.randbytes(count * 2)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [start, len(data)]}
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format pads the header to 8-byte alignment
    return struct.pack("<Q", len(encoded)) + encoded + bytes(data)


def safetensors_parameters(content: bytes) -> dict[str, int]:
    """Parameter count per dtype, read from a safetensors header (what the Hub reports as `safetensors`)."""
    (length,) = struct.unpack("<Q", content[:8])
    header = json.loads(content[8:8 + length])
    counts: dict[str, int] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        numel = 1
        for dim in entry["shape"]:
            numel *= dim
        counts[entry["dtype"]] = counts.get(entry["dtype"], 0) + numel
    return counts


def folder_files(folder: Path) -> dict[str, bytes]:
    """A real model folder's files (a tiny model the project built), to serve as a repo's content."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)}


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2) + "\n").encode()


def dflash_drafter_files(
    config: Mapping[str, Any], weight_bytes_seed: int, *, target_repo: str | None = None
) -> dict[str, bytes]:
    """A DFlash drafter repo: config.json, tiny model.safetensors (DFlash tensor names), dflash.py, README.md.

    The weights change whenever the seed changes; the tensor layout follows dflash-format.md at toy width.
    """
    width, layers = 8, int(config.get("num_hidden_layers", 1))
    fused = len(config.get("dflash_config", {}).get("target_layer_ids", [0]))
    tensors: dict[str, tuple[int, ...]] = {
        "fc.weight": (width, fused * width), "hidden_norm.weight": (width,), "norm.weight": (width,),
    }
    for i in range(layers):
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"layers.{i}.self_attn.{proj}.weight"] = (width, width)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            tensors[f"layers.{i}.mlp.{proj}.weight"] = (width, width)
        for norm in ("input_layernorm", "post_attention_layernorm"):
            tensors[f"layers.{i}.{norm}.weight"] = (width,)
    target_line = (
        f"This drafter must be used in conjunction with the target model `{target_repo}`.\n" if target_repo else ""
    )
    return {
        "config.json": _json_bytes(config),
        "model.safetensors": tiny_safetensors(tensors, weight_bytes_seed),
        "dflash.py": b"# Publisher's remote code (auto_map). Loaders in this project never execute it.\n",
        "README.md": f"# DFlash drafter\n\nBlock-diffusion drafter for speculative decoding.\n{target_line}".encode(),
    }


def tiny_tokenizer_json(extra_tokens: Iterable[str] = ()) -> str:
    """A small but loadable `tokenizers` WordLevel tokenizer."""
    words = ["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "hello", "world", "the", "a", *extra_tokens]
    vocab = {word: index for index, word in enumerate(dict.fromkeys(words))}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
        ],
        "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    })


def target_files(
    config: Mapping[str, Any],
    tokenizer_json: str | None = None,
    *,
    card_data: Mapping[str, Any] | None = None,
    weight_seed: int = 0,
    tokenizer_config: Mapping[str, Any] | None = None,
) -> dict[str, bytes]:
    """A target model repo: config.json, tokenizer files, tiny model.safetensors and a README (front matter when
    `card_data` is given)."""
    width = 8
    tensors: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (16, width), "model.norm.weight": (width,), "lm_head.weight": (16, width),
    }
    name = str(config.get("_name_or_path") or config.get("model_type") or "model")
    return {
        "config.json": _json_bytes(config),
        "generation_config.json": _json_bytes({
            key: config[key] for key in ("bos_token_id", "eos_token_id") if key in config
        }),
        "tokenizer.json": (tokenizer_json or tiny_tokenizer_json()).encode(),
        "tokenizer_config.json": _json_bytes(tokenizer_config or {
            "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None,
            "model_max_length": int(config.get("max_position_embeddings", 4096)),
        }),
        "model.safetensors": tiny_safetensors(tensors, weight_seed),
        "README.md": readme_with_card(card_data, f"# {name}\n\nModel card.\n"),
    }
