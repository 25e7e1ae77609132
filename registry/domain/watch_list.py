"""Which orgs the watcher polls: DRAFTERS_WATCHED_ORGS when set, else every publisher the bundled catalog names."""

from __future__ import annotations

from registry.domain.catalog import Catalog, load_catalog_data


def catalog_publishers(catalog: Catalog) -> list[str]:
    """Every org or user that publishes a target or a drafter of the catalog, as the Hub spells it."""
    owners = {entry.repo_id.split("/", 1)[0] for entry in (*catalog.targets, *catalog.drafters)}
    return sorted(owners, key=lambda owner: (owner.lower(), owner))


def watched_orgs(configured: list[str] | None, catalog: Catalog | None = None) -> list[str]:
    """The orgs the watcher polls: DRAFTERS_WATCHED_ORGS when it is set, else every publisher of the catalog (a new
    release of any of them may need, or be, a drafter)."""
    if configured is not None:
        return list(configured)
    return catalog_publishers(catalog or load_catalog_data())
