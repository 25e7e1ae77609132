"""Loading the bundled catalog into the store, idempotently."""

from __future__ import annotations

import json
from dataclasses import dataclass

from registry.domain.catalog import Catalog, load_catalog_data
from registry.store import Store
from registry.store.records import CheckpointSpec, DrafterSpec, RevisionSpec

# Revision sha for facts the reference publishes but nobody has read from the Hub yet.
CATALOG_SHA = "catalog"


@dataclass(frozen=True)
class CatalogSummary:
    targets: int
    drafters: int
    dflash_21: int
    verdicts: int


def _config_bytes(config: dict | None) -> bytes | None:
    return json.dumps(config, sort_keys=True).encode() if config is not None else None


def load_catalog(store: Store, catalog: Catalog | None = None) -> CatalogSummary:
    catalog = catalog or load_catalog_data()
    for target in catalog.targets:
        store.upsert_checkpoint(
            CheckpointSpec(
                repo_id=target.repo_id,
                source="catalog",
                family=target.family,
                kind="base",
                released=target.released,
                released_precision=target.released_precision,
                released_note=target.released_note,
                gated=target.gated,
                fact_source=target.source,
            )
        )
        if all(r.last_modified is None for r in store.revisions(target.repo_id)):
            # As for drafters below: a rerun never moves a head the watcher has read from the Hub.
            store.add_checkpoint_revision(
                target.repo_id, RevisionSpec(sha=target.sha or CATALOG_SHA, config_raw=_config_bytes(target.config))
            )
    for drafter in catalog.drafters:
        store.upsert_drafter(
            DrafterSpec(
                repo_id=drafter.repo_id,
                method=drafter.method,
                publisher=drafter.publisher,
                source="catalog",
                targets=tuple((t, drafter.target_declared_by) for t in drafter.targets),
                family=drafter.family,
                released=drafter.released,
                released_precision=drafter.released_precision,
                released_note=drafter.released_note,
                block_size=drafter.block_size,
                in_21=drafter.in_21,
                gated=drafter.gated,
                notes=drafter.notes,
                fact_source=drafter.source,
            )
        )
        if all(r.last_modified is None for r in store.drafter_revisions(drafter.repo_id)):
            # Nothing read from the Hub yet: the catalog's revision is the best known, under the sha the catalog
            # names where it names one. The watcher's first read of that sha fills in its weights; once the Hub
            # has been read, a rerun leaves the head where the watcher put it.
            store.add_drafter_revision(
                drafter.repo_id,
                RevisionSpec(sha=drafter.sha or CATALOG_SHA, config_raw=_config_bytes(drafter.config),
                             weight_bytes=drafter.weight_bytes),
            )
    verdicts = store.recompute_compatibility()
    return CatalogSummary(
        targets=len(catalog.targets),
        drafters=len(catalog.drafters),
        dflash_21=sum(1 for d in catalog.drafters if d.in_21),
        verdicts=len(verdicts),
    )
