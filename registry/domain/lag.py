"""Drafter lag arithmetic (pure): how long a target model waited for its first exact drafter.

A target with a drafter has a closed lag: days from the target's Hub release to the first exact drafter's
release. A target without one has an open lag: its age at `today`, growing by a day every day. A drafter dated
before its target (possible with month-precision or approximate dates) counts as lag 0 and is flagged rather
than producing a negative number.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class Lag:
    days: int
    open: bool  # no drafter released by `today`; `days` is the target's age and still growing
    first_drafter_released: date | None
    drafter_before_target: bool = False  # the dates say the drafter came first: days was clamped to 0


@dataclass(frozen=True)
class GroupLag:
    median_days: float
    worst_days: int
    n: int
    open_count: int


@dataclass(frozen=True)
class UpgradeLag:
    """How long the successor of a model waited for a drafter, and whether users of its predecessor had one."""

    lag: Lag
    predecessor_had_drafter: bool  # the predecessor had a drafter by the day the successor was released

    @property
    def left_without_drafter(self) -> bool:
        """Upgrading to the successor means giving up speculative decoding (for now)."""
        return self.predecessor_had_drafter and self.lag.open


def target_lag(target_released: date, exact_drafter_releases: Sequence[date], today: date) -> Lag:
    """Lag of one target as seen on `today`; drafters dated after `today` have not shipped yet."""
    if target_released > today:
        raise ValueError(f"target released {target_released.isoformat()} is after today ({today.isoformat()})")
    shipped = [released for released in exact_drafter_releases if released <= today]
    if not shipped:
        return Lag(days=(today - target_released).days, open=True, first_drafter_released=None)
    first = min(shipped)
    days = (first - target_released).days
    return Lag(days=max(days, 0), open=False, first_drafter_released=first, drafter_before_target=days < 0)


def summarize_group(lags: Sequence[Lag]) -> GroupLag:
    """Median and worst lag of a group; open lags count with their current age (a lower bound)."""
    if not lags:
        raise ValueError("cannot summarize an empty group of lags")
    days = [lag.days for lag in lags]
    return GroupLag(
        median_days=float(statistics.median(days)),
        worst_days=max(days),
        n=len(lags),
        open_count=sum(1 for lag in lags if lag.open),
    )


def summarize(lags_by_group: Mapping[str, Sequence[Lag]]) -> dict[str, GroupLag]:
    """One GroupLag per group (family, publisher, ...); every group must hold at least one lag."""
    summaries: dict[str, GroupLag] = {}
    for group, lags in lags_by_group.items():
        if not lags:
            raise ValueError(f"group {group!r} has no lags to summarize")
        summaries[group] = summarize_group(lags)
    return summaries


def upgrade_lag(
    predecessor: Lag, successor_released: date, successor_drafter_releases: Sequence[date], today: date
) -> UpgradeLag:
    """Lag of a successor release (e.g. Qwen3.6-27B after Qwen3.5-27B), open until a drafter for it ships.

    `predecessor` is the predecessor's own target_lag, computed for the same `today`."""
    had_drafter = (
        predecessor.first_drafter_released is not None and predecessor.first_drafter_released <= successor_released
    )
    return UpgradeLag(
        lag=target_lag(successor_released, successor_drafter_releases, today), predecessor_had_drafter=had_drafter
    )
