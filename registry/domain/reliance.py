"""Which pairs a user can rely on (pure): what closes a lag, what autoverify measures unasked, what `launch` serves.

An "exact" pair always: the drafter's own metadata declares the target and the decisive checks passed on the
recorded configs. A "declared" pair (declared, but the configs did not show it) only when the declaration comes from
someone a user already trusts for this target: the target's own publisher (`Qwen/…` for `Qwen/Qwen3-8B`) or a
publisher the catalog lists (its drafters' publishers and its targets' orgs). A "structural" pair whose repo is
named after the target counts from those publishers too (z-lab names its drafters after their targets and declares
none in its cards): the name is no declaration, so the verdict stays structural, but the publisher is one users
already rely on. Anything else, a repo named after a model by another account, an unchecked upload, a junk config,
is shown with its verdict and never closes a lag.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from registry.domain.pair import NAME_CONVENTION
from registry.domain.records import DrafterRecord

RELIED_VERDICTS = frozenset({"exact", "declared"})


def _org(repo_id: str) -> str:
    return repo_id.split("/", 1)[0].casefold()


def trusted_publisher(drafter_publisher: str, target_repo_id: str, trusted_publishers: Collection[str]) -> bool:
    """The drafter's publisher is the target's own or one the catalog lists (case-insensitively, as the Hub)."""
    publisher = drafter_publisher.casefold()
    return publisher == _org(target_repo_id) or publisher in {p.casefold() for p in trusted_publishers}


def relied_on(verdict: str, drafter_publisher: str, target_repo_id: str, trusted_publishers: Collection[str], *,
              named: bool = False) -> bool:
    """`named`: the drafter's repo name implies this target (its `name_convention` target)."""
    if verdict == "exact":
        return True
    if verdict not in ("declared", "structural") or (verdict == "structural" and not named):
        return False
    return trusted_publisher(drafter_publisher, target_repo_id, trusted_publishers)


def why_not_relied_on(verdict: str, drafter_publisher: str, target_repo_id: str,
                      trusted_publishers: Collection[str], *, named: bool = False) -> str | None:
    """Why this pair does not count (for the lag table); None when it does."""
    if relied_on(verdict, drafter_publisher, target_repo_id, trusted_publishers, named=named):
        return None
    untrusted = f"{drafter_publisher} is neither {target_repo_id.split('/', 1)[0]} nor a catalog or watched publisher"
    if verdict == "declared":
        return f"declared, configs not checked, and {untrusted}"
    if verdict == "structural" and named:
        return f"structural: named after it, declares no target, and {untrusted}"
    if verdict == "structural":
        return "structural: not declared for it"
    return f"{verdict}: not usable as it stands"


def named_pairs(drafters: Iterable[DrafterRecord], aliases: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    """(drafter, target) where the drafter's repo name implies the target (its `name_convention` targets), the
    target under its current id (`aliases`: old id -> current)."""
    return frozenset((d.repo_id, aliases.get(t, t)) for d in drafters for t, by in d.targets
                     if by == NAME_CONVENTION)
