"""What a poll reports, per org and in all, and the two exceptions that stop a unit or an org."""

from __future__ import annotations

from dataclasses import dataclass, field

from registry.domain.records import EventRecord
from registry.hub import HubError, HubModel

NOT_POLLED = "not polled: "  # an org's error when the poll skipped it because the Hub had stopped answering


@dataclass
class OrgReport:
    org: str
    listed: int = 0
    processed: int = 0
    skipped_lease: bool = False
    error: str | None = None
    unreachable: bool = False
    cut: bool = False  # stopped by the poll's time or request budget
    failed: list[str] = field(default_factory=list)  # repos that failed this poll (each logged once)
    quarantined: list[str] = field(default_factory=list)  # of those, the ones now skipped for a while
    stop_poll: bool = False  # rate limited beyond the wait budget, or the token refused: no other org will do
    retry_after: float | None = None


@dataclass
class PollReport:
    orgs: list[OrgReport] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0
    # Set when the Hub could not be reached at all: the orgs after the failing one were not tried.
    unreachable: str | None = None
    # Set when the Hub's rate limit or a refused token stopped the poll; retry_after: seconds until it is worth
    # polling again (the bucket's reset plus a second).
    stopped: str | None = None
    retry_after: float | None = None
    config_error: str | None = None  # the token is refused: nothing will work until the configuration changes

    @property
    def errors(self) -> list[str]:
        return [f"{o.org}: {o.error}" for o in self.orgs if o.error]


class PollCut(Exception):
    """The poll hit its request or time budget; the current org stops after its last whole unit."""


class RepoFailed(Exception):
    """Recording one repo failed for a reason of its own; the org goes on without it."""

    def __init__(self, model: HubModel, cause: BaseException) -> None:
        message = str(cause) if isinstance(cause, HubError) else f"{type(cause).__name__}: {cause}"
        super().__init__(" ".join(f"{model.repo_id}: {message}".split())[:500])
        self.model = model
