"""Which pairs a user can rely on (pure): what closes a lag, what autoverify measures unasked, what `launch` serves.

An "exact" pair always: the drafter's own metadata declares the target and the decisive checks passed on the
recorded configs. A "declared" pair (declared, but the configs did not show it) only when the declaration comes from
someone a user already trusts for this target: the target's own publisher (`Qwen/…` for `Qwen/Qwen3-8B`) or a
publisher the catalog lists (its drafters' publishers and its targets' orgs). Anything else, a repo named after a
model, an unchecked upload from another account, a structural fit, is shown with its verdict and never closes a lag.
"""

from __future__ import annotations

from collections.abc import Collection

RELIED_VERDICTS = frozenset({"exact", "declared"})


def _org(repo_id: str) -> str:
    return repo_id.split("/", 1)[0].casefold()


def trusted_publisher(drafter_publisher: str, target_repo_id: str, catalog_publishers: Collection[str]) -> bool:
    """The drafter's publisher is the target's own or one the catalog lists (case-insensitively, as the Hub)."""
    publisher = drafter_publisher.casefold()
    return publisher == _org(target_repo_id) or publisher in {p.casefold() for p in catalog_publishers}


def relied_on(verdict: str, drafter_publisher: str, target_repo_id: str, catalog_publishers: Collection[str]) -> bool:
    if verdict == "exact":
        return True
    return verdict == "declared" and trusted_publisher(drafter_publisher, target_repo_id, catalog_publishers)


def why_not_relied_on(verdict: str, drafter_publisher: str, target_repo_id: str,
                      catalog_publishers: Collection[str]) -> str | None:
    """Why this pair does not count (for the lag table and alerts); None when it does."""
    if relied_on(verdict, drafter_publisher, target_repo_id, catalog_publishers):
        return None
    if verdict == "declared":
        return (f"declared by {drafter_publisher}, configs not checked: {drafter_publisher} is neither "
                f"{_org(target_repo_id)} nor a catalog publisher")
    if verdict == "structural":
        return "structural: not declared for it (a repo name is no declaration)"
    return f"{verdict}: not usable as it stands"
