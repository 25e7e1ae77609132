"""What `drafters launch` and the API's launch commands read from the registry: a target's exact pairs with the
shas recorded for them, and the draft length `price` finds best on the pair's measured acceptance.

Reads only (no verdict is recomputed here), so the read-only API can call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

from registry.calibration import PricingInputError, measured_acceptance, side_facts
from registry.calibration.fit import SideFacts
from registry.domain import pricing
from registry.domain.catalog import load_catalog_data
from registry.domain.conditions import pricing_problem
from registry.domain.coverage import layout_of
from registry.domain.gpus import Gpu, GpuCatalogError, find_gpu, load_gpus
from registry.domain.launch import DraftLength, PairFacts
from registry.domain.llama_commands import eagle3_converter_layers
from registry.domain.names import COMMIT_SHA
from registry.domain.records import CheckpointRecord, CompatRecord, DrafterRecord
from registry.domain.run import Run
from registry.store import Store

# The GPU class `price` is asked about when the caller names none: the most common serving card of the catalog.
DEFAULT_GPU = "H100 SXM"


def _sha(value: str | None) -> str | None:
    # The catalog loader records "catalog" where it knows no commit: that pins nothing.
    return value if value is not None and COMMIT_SHA.fullmatch(value) else None


@cache
def _built_in() -> frozenset[str]:
    """Drafters that ship inside their checkpoint (the bundled catalog says which; read once per process)."""
    return frozenset(d.repo_id for d in load_catalog_data().drafters if d.built_in)


@cache
def _gpus() -> tuple[Gpu, ...]:
    return load_gpus()


def exact_pairs(store: Store, target: str, drafter: str | None = None, *,
                verdicts: list[CompatRecord] | None = None, records: Mapping[str, DrafterRecord | None] | None = None,
                checkpoint: CheckpointRecord | None = None) -> list[PairFacts]:
    """The target's exact pairs (verdicts between the current heads), newest facts the registry holds. A caller
    that already read the verdicts, drafter records or checkpoint passes them (one read per request)."""
    built_in = _built_in()
    checkpoint = checkpoint or store.reads.get_checkpoint(target)
    pairs = []
    for verdict in verdicts if verdicts is not None else store.reads.verdicts(checkpoint_repo_id=target,
                                                                        drafter_repo_id=drafter):
        if verdict.verdict != "exact":
            continue
        record = records[verdict.drafter_repo_id] if records is not None and verdict.drafter_repo_id in records \
            else store.reads.get_drafter(verdict.drafter_repo_id)
        revision = store.reads.drafter_head_revision(verdict.drafter_repo_id)
        block_size = (revision.block_size if revision is not None and revision.block_size else None) or (
            record.block_size if record is not None else None)
        pairs.append(PairFacts(
            target=verdict.checkpoint_repo_id, target_sha=_sha(verdict.checkpoint_sha),
            drafter=verdict.drafter_repo_id, drafter_sha=_sha(verdict.drafter_sha), method=verdict.method,
            block_size=block_size, built_in=verdict.drafter_repo_id in built_in,
            gguf=verdict.drafter_repo_id.lower().endswith("-gguf"),
            target_family=checkpoint.family if checkpoint is not None else None,
            eagle3_layers=_eagle3_layers(revision.config if revision is not None else None),
            drafter_config_read=revision is not None and revision.config is not None,
            layout=layout_of(verdict.method, revision.config if revision is not None else None,
                             verdict.drafter_repo_id),
        ))
    pairs.sort(key=lambda p: (p.method, p.drafter))
    return pairs


def _eagle3_layers(config: Mapping[str, object] | None) -> tuple[int, ...] | None:
    """What llama.cpp's converter must be told of an EAGLE-3 head's fused layers (None: nothing, or no config)."""
    layers = eagle3_converter_layers(config) if config else None
    return tuple(layers) if layers is not None else None


def pick_gpu(name: str | None) -> Gpu:
    gpus = _gpus()
    found = find_gpu(gpus, name or DEFAULT_GPU)
    if found is None:
        raise GpuCatalogError(f"unknown GPU {name!r}; known: {', '.join(g.name for g in gpus)}")
    return found


# Side facts by (repo, drafter?, head sha): they follow from the head revision (and the static catalog), so a new
# revision is a new key. Bounded: cleared when full.
_FACTS: dict[tuple[str, bool, str | None], SideFacts] = {}
MAX_FACTS = 20_000


def _side_facts(store: Store, ref: str, sha: str | None, *, drafter: bool) -> SideFacts:
    key = (ref, drafter, sha)
    found = _FACTS.get(key)
    if found is None:
        if len(_FACTS) >= MAX_FACTS:
            _FACTS.clear()
        found = _FACTS[key] = side_facts(store, ref, drafter=drafter)
    return found


def _acceptance(store: Store, pair: PairFacts, runs: Sequence[Run] | None) -> pricing.Acceptance | None:
    """The newest run's per-position acceptance that may feed pricing (`pricing_problem`: successful, not lossy,
    not overloaded): from `runs` (the target's, newest first) when the caller has read them, else from the store."""
    if runs is None:
        try:
            return measured_acceptance(store, pair.target, pair.drafter)
        except PricingInputError:
            return None
    run = next((r for r in runs if r.drafter == pair.drafter and r.per_position_acceptance
                and pricing_problem(r) is None), None)
    if run is None:
        return None
    names = tuple(s.name for s in run.per_set)
    source = f"run {(run.run_id or '')[:12]} ({', '.join(names) or 'no prompt set'}; {run.engine} on {run.hardware})"
    return pricing.Acceptance(run.per_position_acceptance, source, run.run_id, names)


def measured_draft_length(store: Store, pair: PairFacts, gpu: Gpu, runs: Sequence[Run] | None = None
                          ) -> DraftLength | None:
    """The best γ of `price` for the pair on `gpu` from its newest measured run; None when nothing was measured or
    the sizes `price` needs are unknown. `runs`: the target's runs, newest first, when the caller has them."""
    acceptance = _acceptance(store, pair, runs)
    if acceptance is None:
        return None
    target_facts = _side_facts(store, pair.target, pair.target_sha, drafter=False)
    drafter_facts = _side_facts(store, pair.drafter, pair.drafter_sha, drafter=True)
    try:
        shape = pricing.pair_shape(target_facts.config, drafter_facts.config, drafter_facts.method or pair.method,
                                   target_parameters=target_facts.parameters,
                                   drafter_parameters=drafter_facts.parameters)
        result = pricing.price(shape, acceptance, pricing.device_for(gpu), quant=pricing.quantization("bf16"),
                               context=8192)
    except pricing.PricingError:
        return None
    return DraftLength(result.best_gamma, f"best γ of `drafters price` on {gpu.name} (bf16, 8192-token context) "
                                          f"from {acceptance.source}")
