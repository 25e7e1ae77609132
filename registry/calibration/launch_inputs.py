"""What `drafters launch` and the API's launch commands read from the registry: a target's launchable pairs with
the shas recorded for them (and the drafter its checkpoint ships inside, if any), and the draft length `price`
finds best on the pair's measured acceptance, from runs of the same engine on the same hardware class only.

Reads only (no verdict is recomputed here), so the read-only API can call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

from registry.calibration import side_facts
from registry.calibration.fit import SideFacts
from registry.domain import pricing, reliance
from registry.domain.catalog import load_catalog_data
from registry.domain.conditions import pricing_problem
from registry.domain.coverage import layout_of
from registry.domain.gpus import Gpu, GpuCatalogError, find_gpu, load_gpus
from registry.domain.engines import SERVER_ENGINE_NAMES
from registry.domain.launch import BLOCK_METHODS, DraftLength, PairFacts
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


def launchable(verdict: CompatRecord, publishers: frozenset[str] | set[str]) -> bool:
    """The verdicts `launch` writes commands for (the one place that says which): exact pairs, and declared ones from
    the target's publisher or a catalog publisher (domain/reliance.py): the publisher's word, served with its verdict
    shown; never another account's unchecked upload."""
    return reliance.relied_on(verdict.verdict, verdict.publisher, verdict.checkpoint_repo_id, publishers)


def built_in_pairs(store: Store, target: str, checkpoint: CheckpointRecord | None = None) -> list[PairFacts]:
    """The drafters the checkpoint ships inside itself (MTP heads, DeepSeek-V4 DSpark): target and drafter are the
    checkpoint, pinned to its head sha."""
    checkpoint = checkpoint or store.reads.get_checkpoint(target)
    if checkpoint is None:
        return []
    sha = _sha(checkpoint.head_sha)
    head = store.reads.head_revision(checkpoint.repo_id)
    return [PairFacts(target=checkpoint.repo_id, target_sha=sha, drafter=checkpoint.repo_id, drafter_sha=sha,
                      method=method, built_in=True, target_family=checkpoint.family,
                      target_architecture=_architecture(head.config if head is not None else None))
            for method in sorted(checkpoint.built_in)]


def exact_pairs(store: Store, target: str, drafter: str | None = None, *,
                verdicts: list[CompatRecord] | None = None, records: Mapping[str, DrafterRecord | None] | None = None,
                checkpoint: CheckpointRecord | None = None) -> list[PairFacts]:
    """The target's pairs a user can rely on (exact, or declared by a trusted publisher; verdicts between the
    current heads), newest facts the registry holds. A caller that already read the verdicts, drafter records or
    checkpoint passes them (one read per request)."""
    built_in = _built_in()
    checkpoint = checkpoint or store.reads.get_checkpoint(target)
    target_head = store.reads.head_revision(target)
    architecture = _architecture(target_head.config if target_head is not None else None)
    publishers = store.reads.trusted_publishers()
    pairs = []
    for verdict in verdicts if verdicts is not None else store.reads.verdicts(checkpoint_repo_id=target,
                                                                        drafter_repo_id=drafter):
        if not launchable(verdict, publishers):
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
            target_architecture=architecture,
        ))
    pairs.sort(key=lambda p: (p.method, p.drafter))
    return pairs


def _architecture(config: Mapping[str, object] | None) -> str | None:
    architectures = config.get("architectures") if config else None
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


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


# Launch engine → the engine name its runs are stored under (registry.domain.engines).
STORED_ENGINE: dict[str, str] = {"vllm": SERVER_ENGINE_NAMES["vllm"], "sglang": SERVER_ENGINE_NAMES["sglang"],
                                 "llamacpp": SERVER_ENGINE_NAMES["llamacpp"]}
# A run whose target weighed less than this many bytes per parameter of the real target measured another model
# (a tiny or test stand-in): 4-bit weights are 0.5 bytes per parameter, the smallest real quantization here.
MIN_BYTES_PER_PARAMETER = 0.25


def same_hardware(run: Run, gpu: Gpu) -> bool:
    """The run's hardware string names the GPU class `gpu` (a CPU or an unknown card names none)."""
    hardware = find_gpu(_gpus(), run.hardware or "")
    return hardware is not None and hardware.name == gpu.name


def real_target_run(run: Run, target_parameters: int | None) -> bool:
    """False for a run whose target weighed far less than the real target: a tiny or test stand-in."""
    if run.target_weight_bytes is not None and target_parameters:
        return run.target_weight_bytes >= target_parameters * MIN_BYTES_PER_PARAMETER
    return True


def run_sets_length(run: Run, pair: PairFacts, engine: str, gpu: Gpu, target_parameters: int | None) -> bool:
    """Whether `run` may set the draft length of `pair`'s command on `engine` for `gpu`: a successful run of this
    very pair on the same engine and the same hardware class, of the real target (not a tiny or test model)."""
    if run.status != "ok" or run.drafter != pair.drafter or run.target != pair.target:
        return False
    if run.engine != STORED_ENGINE[engine] or not run.per_position_acceptance:
        return False
    if pricing_problem(run) is not None:  # lossy, overloaded or failed: it says nothing about the pair's length
        return False
    return same_hardware(run, gpu) and real_target_run(run, target_parameters)


def _acceptance(store: Store, pair: PairFacts, engine: str, gpu: Gpu, runs: Sequence[Run] | None,
                target_parameters: int | None) -> pricing.Acceptance | None:
    """The newest qualifying run's per-position acceptance: from `runs` (the target's, newest first) when the
    caller has read them, else from the store."""
    if runs is None:
        runs = store.runs.list_runs(target=pair.target, drafter=pair.drafter, status="ok")
    run = next((r for r in runs if run_sets_length(r, pair, engine, gpu, target_parameters)), None)
    if run is None:
        return None
    names = tuple(s.name for s in run.per_set)
    source = f"run {(run.run_id or '')[:12]} ({', '.join(names) or 'no prompt set'}; {run.engine} on {run.hardware})"
    return pricing.Acceptance(run.per_position_acceptance, source, run.run_id, names)


def measured_draft_length(store: Store, pair: PairFacts, gpu: Gpu, engine: str, runs: Sequence[Run] | None = None
                          ) -> DraftLength | None:
    """The best γ of `price` for the pair on `gpu` from its newest run on `engine` on that hardware class; None
    when no such run exists or the sizes `price` needs are unknown (the command then takes the trained block or
    the engine's default). `runs`: the target's runs, newest first, when the caller has them."""
    if pair.built_in:
        return None
    target_facts = _side_facts(store, pair.target, pair.target_sha, drafter=False)
    acceptance = _acceptance(store, pair, engine, gpu, runs, side_parameters(store, pair.target, pair.target_sha))
    if acceptance is None:
        return None
    drafter_facts = _side_facts(store, pair.drafter, pair.drafter_sha, drafter=True)
    try:
        shape = pricing.pair_shape(target_facts.config, drafter_facts.config, drafter_facts.method or pair.method,
                                   target_parameters=target_facts.parameters,
                                   drafter_parameters=drafter_facts.parameters)
        result = pricing.price(shape, acceptance, pricing.device_for(gpu), quant=pricing.quantization("bf16"),
                               context=8192, gammas=range(1, len(acceptance.marginal) + 1))
    except pricing.PricingError:
        return None
    if (pair.method in BLOCK_METHODS and pair.block_size and result.best_gamma == len(acceptance.marginal)
            and result.best_gamma < pair.block_size - 1):
        # Best at the longest length the run drafted: nothing measured says a shorter draft than the trained
        # block is better, so the block stands.
        return None
    return DraftLength(result.best_gamma, f"best γ of `drafters price` on {gpu.name} (bf16, 8192-token context) "
                                          f"from {acceptance.source}")


def side_parameters(store: Store, target: str, sha: str | None) -> int | None:
    """The target's parameter count: counted or from weight bytes, else estimated from its config (None: unknown)."""
    facts = _side_facts(store, target, sha, drafter=False)
    if facts.parameters is not None or facts.config is None:
        return facts.parameters
    shape = pricing.shape_from_config(facts.config)
    return shape.parameters if shape is not None else None
