"""Loading the bundled catalog into the store, idempotently."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError

from registry.domain.catalog import Catalog, CatalogDrafter, load_catalog_data
from registry.domain.records import CheckpointSpec, DrafterSpec, RevisionSpec
from registry.store.checkpoints import Checkpoints
from registry.store.core import StoreCore
from registry.store.drafters import Drafters
from registry.store.reads import Reads
from registry.store.verdicts import Verdicts

# Revision sha for facts the reference publishes but nobody has read from the Hub yet.
CATALOG_SHA = "catalog"


@dataclass(frozen=True)
class CatalogSummary:
    targets: int
    drafters: int  # drafters anyone adds to a target (rows of the drafter table)
    built_in: int  # drafters that ship inside a checkpoint (MTP heads, DeepSeek-V4 DSpark): marks on checkpoints
    dflash_21: int
    verdicts: int


def _config_bytes(config: dict | None) -> bytes | None:
    return json.dumps(config, sort_keys=True).encode() if config is not None else None


# Whole loads tried while another process loads the same rows: each collision restarts the load after a growing,
# jittered pause; once the other loader is done (seconds), the next attempt finds every row and converges.
LOAD_ATTEMPTS = 12


class CatalogImport:
    """The bundled catalog loaded into the store, idempotently, also while another process loads it."""

    def __init__(self, core: StoreCore, checkpoints: Checkpoints, drafters: Drafters, reads: Reads,
                 verdicts: Verdicts) -> None:
        self.core = core
        self.checkpoints = checkpoints
        self.drafters = drafters
        self.reads = reads
        self.verdicts = verdicts

    def load_catalog(self, catalog: Catalog | None = None) -> CatalogSummary:
        """Load the catalog; idempotent, and safe while another process loads it into the same database: a row
        the other inserted between our read and our insert (an IntegrityError on its unique key) makes the whole
        load run again, which then finds that row."""
        catalog = catalog or load_catalog_data()
        for attempt in range(LOAD_ATTEMPTS):
            try:
                return self._load(catalog)
            except IntegrityError:
                if attempt == LOAD_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1) * (0.5 + random.random()))
        raise AssertionError("unreachable: the loop returns or raises")

    def _load(self, catalog: Catalog) -> CatalogSummary:
        for target in catalog.targets:
            self.checkpoints.upsert_checkpoint(
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
            if all(r.last_modified is None for r in self.reads.revisions(target.repo_id)):
                # As for drafters below: a rerun never moves a head the watcher has read from the Hub.
                self.checkpoints.add_checkpoint_revision(
                    target.repo_id, RevisionSpec(sha=target.sha or CATALOG_SHA, config_raw=_config_bytes(target.config))
                )
        for drafter in catalog.drafters:
            if drafter.built_in:
                self._load_built_in(catalog, drafter)
                continue
            self.drafters.upsert_drafter(
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
                    license=drafter.license,
                    replaced_in_place=drafter.replaced_in_place,
                )
            )
            if all(r.last_modified is None for r in self.reads.drafter_revisions(drafter.repo_id)):
                # Nothing read from the Hub yet: the catalog's revision is the best known, under the sha the catalog
                # names where it names one. The watcher's first read of that sha fills in its weights; once the Hub
                # has been read, a rerun leaves the head where the watcher put it.
                self.drafters.add_drafter_revision(
                    drafter.repo_id,
                    RevisionSpec(sha=drafter.sha or CATALOG_SHA, config_raw=_config_bytes(drafter.config),
                                 weight_bytes=drafter.weight_bytes),
                )
        verdicts = self.verdicts.recompute_compatibility()
        return CatalogSummary(
            targets=len(catalog.targets),
            drafters=sum(1 for d in catalog.drafters if not d.built_in),
            built_in=sum(1 for d in catalog.drafters if d.built_in),
            dflash_21=sum(1 for d in catalog.drafters if d.in_21),
            verdicts=len(verdicts),
        )

    def _load_built_in(self, catalog: Catalog, drafter: CatalogDrafter) -> None:
        """A drafter inside a full checkpoint marks that checkpoint; it is no drafter row, so `find` and `lag` never
        offer it as a separate download. The checkpoint is a target of its own (served instead of its base), released
        when the drafter was; an MTP head's checkpoint is the catalog target itself."""
        known_target = drafter.repo_id in {t.repo_id for t in catalog.targets}
        self.checkpoints.upsert_checkpoint(
            CheckpointSpec(
                repo_id=drafter.repo_id,
                source="catalog",
                built_in=(drafter.method,),
                # The target entry's own facts stand for an MTP head's checkpoint; a separate checkpoint gets the
                # entry's.
                **({} if known_target else {
                    "family": drafter.family,
                    "kind": "base",
                    "released": drafter.released,
                    "released_precision": drafter.released_precision,
                    "released_note": drafter.released_note,
                    "gated": drafter.gated,
                    "fact_source": drafter.source,
                    "bases": tuple((t, "built_in_from") for t in drafter.targets if t != drafter.repo_id),
                }),
            )
        )
        if not known_target and not self.reads.revisions(drafter.repo_id):
            self.checkpoints.add_checkpoint_revision(
                drafter.repo_id, RevisionSpec(sha=drafter.sha or CATALOG_SHA, config_raw=_config_bytes(drafter.config))
            )
        # An older import made it a drafter row; a rerun converges on the checkpoint alone.
        self.drafters.drop_catalog_drafter(drafter.repo_id)
