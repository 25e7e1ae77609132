"""A (drafter, target) pair, the one home of what every layer asks of one (pure, no I/O): its two sides as read
from the store, the Hub or a folder; the drafter's method when none is recorded; the verdict (`judge`, by the
rules of `registry.domain.compat`); when each side was released; which files make a tokenizer.

The store's stored verdicts, `drafters check`, the dashboard's local pairs and the verifier's pre-check (both
engines) all judge a pair through `judge`, so they cannot disagree on the same two sides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol

from registry.domain.compat import CompatResult, check_pair
from registry.domain.drafter_facts import detect_method

# The files a tokenizer digest is computed from, wherever the files come from (Hub, local folder, verifier).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")
# A drafter whose config names no method of its own is a plain causal LM: a draft model.
DEFAULT_METHOD = "draft-lm"
# Where a recorded target of a drafter (`drafter_target.declared_by`) comes from, and which of those declare it: the
# drafter's own metadata or the catalog. A target its repo name implies ("name_convention") is one to judge it
# against, never a declaration: anyone can name an upload after any model.
DECLARED_BY_METADATA = frozenset({"catalog", "card_base_model", "speculators_verifier"})
NAME_CONVENTION = "name_convention"


def declared_targets(targets: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The targets of (target, declared_by) pairs that are declarations, in order, once each."""
    return tuple(dict.fromkeys(target for target, by in targets if by in DECLARED_BY_METADATA))


def drafter_method(config: Any, recorded: str | None = None) -> str | None:
    """The drafter's method: the recorded (or requested) one, else the one its config names, else a plain draft
    model. None without a readable config: nothing says what it is."""
    if recorded:
        return recorded
    if not isinstance(config, Mapping):
        return None
    return detect_method(dict(config)) or DEFAULT_METHOD


def method_to_run(config: Any, recorded: str | None = None) -> str:
    """The method a drafter is recorded and run with, the one rule of the default: `drafter_method`, else a plain
    draft model where no readable config says otherwise (never a guess from its name; its verdict stays unknown
    while its config is unread, `judge` sees the config, not this default)."""
    return drafter_method(config, recorded) or DEFAULT_METHOD


@dataclass(frozen=True)
class Side:
    """One side of a pair as far as it is known. A folder has no repo id and declares nothing."""

    config: Any = None  # the parsed config.json (a dict when usable); None: missing
    tokenizer_digest: str | None = None
    repo_id: str | None = None
    # Why the config could not be read: the verdict states a target's; a drafter's unreadable config reads as missing.
    problem: str | None = None
    method: str | None = None  # the drafter's recorded or requested method
    # The targets the drafter's metadata or the catalog declares (canonical repo ids; see declared_targets).
    declared_targets: tuple[str, ...] = ()

    @property
    def drafter_method(self) -> str | None:
        return drafter_method(self.config, self.method)


def judge(drafter: Side, target: Side) -> CompatResult:
    """The verdict for `drafter` on `target`."""
    return check_pair(
        drafter.config,
        target.config,
        drafter_method=drafter.drafter_method,
        target_repo_id=target.repo_id,
        declared_targets=drafter.declared_targets,
        drafter_tokenizer_digest=drafter.tokenizer_digest,
        target_tokenizer_digest=target.tokenizer_digest,
        target_problem=target.problem,
    )


def checks_json(result: CompatResult) -> list[dict[str, Any]]:
    """The checks as they are stored and shown: name, ok, detail."""
    return [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in result.checks]


# ---- release dates ----------------------------------------------------------------------------


class DatedDrafter(Protocol):
    @property
    def released(self) -> date | None: ...
    @property
    def source(self) -> str: ...
    @property
    def first_seen(self) -> datetime: ...


class DatedCheckpoint(Protocol):
    @property
    def released(self) -> date | None: ...
    @property
    def created_at_hub(self) -> datetime | None: ...


def _day(value: date | datetime | str | None) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def drafter_released(
    released: date | datetime | str | None, source: str | None, first_seen: date | datetime | str | None
) -> date | None:
    """When a drafter became available: the published date, else the day the watcher first saw it on the Hub.

    A catalog entry without a date stays undated: the day the catalog was loaded would invent a lag.
    """
    return _day(released) or (_day(first_seen) if source == "hub" else None)


def checkpoint_released(
    released: date | datetime | str | None, created_at_hub: date | datetime | str | None
) -> date | None:
    """When a checkpoint was released: the published date, else the day the Hub says the repo was created."""
    return _day(released) or _day(created_at_hub)


def drafter_release_date(drafter: DatedDrafter) -> date | None:
    return drafter_released(drafter.released, drafter.source, drafter.first_seen)


def checkpoint_release_date(checkpoint: DatedCheckpoint) -> date | None:
    return checkpoint_released(checkpoint.released, checkpoint.created_at_hub)
