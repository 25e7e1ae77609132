"""What the Hub client returns (parsed, validated dataclasses) and the errors it raises."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from registry.errors import Failed


class HubError(Failed):
    """Any failure talking to the Hub. The message is one line and never contains the token (exit status 1)."""


class RepoNotFound(HubError):
    pass


class NotFound(HubError):
    """A 404 for something that is not a repo (an organization or user overview)."""


class GatedRepo(HubError):
    pass


class RevisionNotFound(HubError):
    pass


class RateLimited(HubError):
    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class HubUnavailable(HubError):
    """5xx answers, timeouts and connection failures that outlasted the retries."""


class HubUnreachable(HubUnavailable):
    """No connection could be made at all (refused, no route, connect timeout): the Hub or the network is down,
    so callers stop asking rather than fail the same way for every remaining org."""


class BadResponse(HubError):
    """Truncated or invalid JSON, or a body of an unexpected shape."""


class BudgetExhausted(HubError):
    """The client's `max_requests` budget is spent; no request was sent."""


class InvalidToken(HubError):
    """The Hub rejects the configured token on every call: a configuration error, not a fact about a repo."""


@dataclass(frozen=True)
class HubModel:
    repo_id: str
    sha: str
    last_modified: datetime
    created_at: datetime
    tags: tuple[str, ...]
    gated: bool
    base_models: tuple[str, ...]
    base_model_relation: str | None
    pipeline_tag: str | None
    library_name: str | None
    # From the listing's config summary: enough to tell a drafter from a model without downloading config.json.
    architectures: tuple[str, ...] = ()
    model_type: str | None = None
    private: bool = False


@dataclass(frozen=True)
class ListedRepo:
    """One entry of an org's cheap id listing."""

    repo_id: str
    sha: str | None
    last_modified: datetime | None
    private: bool


@dataclass(frozen=True)
class Unreadable:
    """A listing entry that could not be parsed; `repo_id` when at least that was readable."""

    repo_id: str | None
    problem: str


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int | None
    blob_id: str | None
    lfs_sha256: str | None


@dataclass(frozen=True)
class HubRevision:
    repo_id: str  # canonical: after following a rename
    sha: str
    last_modified: datetime
    created_at: datetime
    files: tuple[HubFile, ...]
    parameters: int | None
    gated: bool
    base_models: tuple[str, ...]
    base_model_relation: str | None
    tags: tuple[str, ...]
    architectures: tuple[str, ...] = ()
    model_type: str | None = None
    private: bool = False

    def as_model(self) -> HubModel:
        """What a listing entry of this repo at this revision would say."""
        return HubModel(
            repo_id=self.repo_id, sha=self.sha, last_modified=self.last_modified, created_at=self.created_at,
            tags=self.tags, gated=self.gated, base_models=self.base_models,
            base_model_relation=self.base_model_relation, pipeline_tag=None, library_name=None,
            architectures=self.architectures, model_type=self.model_type, private=self.private,
        )
