"""The pricing model against the registry: find a pair's measured acceptance and sizes, and predict every stored
run on real hardware so the model's error is known (stored with the run: `Run.prediction`).

Constants are fitted leave-one-out: a run is never predicted with a bandwidth, efficiency or overhead fitted from
itself, and a fitted constant always comes from at least two other runs (one run would be a copy of its speed).
They are fitted from a bounded sample, the FIT_SAMPLE most recent other runs of the run's fit group (`_fit_group`),
so that recording a run costs the same on a machine with a hundred stored runs as on one with a hundred thousand
(bench/record.py); a median and a two-parameter least-squares fit do not get better past a hundred points, and
the newest runs are the ones that describe the machine as it is now.

Stored, with the model version, rather than only computed on read: storing a run (`drafters verify`, llama.cpp,
`drafters ingest`, all through registry/recording.py) predicts it from the runs already stored and keeps that prediction
with it (its run_prediction row), so the number shown is the forecast the model made before it could have been
adjusted to this run, and it does not move when later runs arrive. The prediction carries MODEL_VERSION; a read
(`drafters runs`, the dashboard) shows a stored prediction only when the current model made it, and otherwise
computes one on read (from all other runs, writing nothing) until `drafters price --calibration` or
`bench/price.py` stores the current model's predictions again. Bump MODEL_VERSION whenever the model's arithmetic
or its fitting rules change.

The fitting arithmetic (bytes per forward, fitted devices) is in fit.py; this module reads the store.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from registry.calibration.fit import RunBytes, SideFacts, fitted_device, run_bytes
from registry.domain import pair, pricing
from registry.domain.catalog import Catalog, load_catalog_data
from registry.domain.conditions import pricing_problem
from registry.domain.gpus import Gpu, find_gpu, load_gpus
from registry.domain.memory import stored_bits_per_weight
from registry.domain.run import Run, RunPrediction
from registry.local import LocalRepoError, looks_like_folder, read_local_repo
from registry.store import Store

# 2: a per-forward overhead fitted per hardware and engine; CPU fits need 2+ other runs.
# 3: constants fitted from the FIT_SAMPLE most recent other runs of the fit group, not from all of them.
MODEL_VERSION = 3
FIT_SAMPLE = 100


class PricingInputError(ValueError):
    """Something the price command needs is missing (no measured run, unknown sizes); the message says what."""


@functools.cache
def _bundled_catalog() -> Catalog:
    """The packaged catalog, parsed once per process: it changes only with the code, and parsing it was a third
    of an API answer for a target with no config of its own (bench/api.py)."""
    return load_catalog_data()


def side_facts(store: Store, ref: str, *, drafter: bool) -> SideFacts:
    """Config and parameter count of a repo id (registry head revision, else the bundled catalog) or a folder."""
    if looks_like_folder(ref):
        try:
            local = read_local_repo(Path(ref))
            config = local.usable_config()
        except LocalRepoError as exc:
            return SideFacts(None, None, None, f"unreadable folder ({exc})")
        parameters = round(local.weight_bytes * 8 / stored_bits_per_weight(config)) if local.weight_bytes else None
        method = pair.drafter_method(config) if drafter else None
        return SideFacts(config, parameters, method, "local folder weights")
    config: dict[str, Any] | None = None
    parameters: int | None = None
    method: str | None = None
    basis = "config estimate"
    if drafter:
        record = store.reads.get_drafter(ref)
        head = store.reads.drafter_head_revision(ref) if record else None
        method = record.method if record else None
        if head is not None:
            config = head.config
            if head.weight_bytes:
                parameters = round(head.weight_bytes * 8 / stored_bits_per_weight(config))
                basis = "registry weight bytes"
    else:
        head = store.reads.head_revision(ref) if store.reads.get_checkpoint(ref) else None
        if head is not None:
            config = head.config
            if head.parameter_count:
                parameters, basis = head.parameter_count, "registry parameter count"
            elif head.weight_bytes:
                parameters = round(head.weight_bytes * 8 / stored_bits_per_weight(config))
                basis = "registry weight bytes"
    if config is None:
        catalog = _bundled_catalog()
        if drafter:
            entry = next((d for d in catalog.drafters if d.repo_id == ref and not d.built_in), None)
            if entry is not None:
                config, method = entry.config, method or entry.method
                if entry.weight_bytes and parameters is None:
                    parameters = round(entry.weight_bytes * 8 / stored_bits_per_weight(config))
        else:
            target = next((t for t in catalog.targets if t.repo_id == ref), None)
            config = target.config if target else None
        basis = basis if parameters is not None else "config estimate (bundled catalog)"
    if method is None and drafter and config:
        method = pair.drafter_method(config)
    return SideFacts(config, parameters, method, basis)


def measured_acceptance(store: Store, target: str, drafter: str, *,
                        prompt_digests: dict[str, str] | None = None) -> pricing.Acceptance:
    """The newest successful run's marginal per-position acceptance; with prompt digests, only a run measured on
    exactly those prompts (its matching sets' rates, pooled by prompt set weight-free mean)."""
    measured = [r for r in store.runs.list_runs(target=target, drafter=drafter, status="ok")
                if r.per_position_acceptance]
    # A lossy or overloaded run never feeds pricing (registry.domain.conditions.pricing_problem).
    runs = [r for r in measured if pricing_problem(r) is None]
    if measured and not runs:
        raise PricingInputError(
            f"no run of {drafter} on {target} may feed pricing: the newest {pricing_problem(measured[0])}; run "
            f"`drafters verify {target} {drafter}` again")
    if prompt_digests:
        wanted = set(prompt_digests.values())
        for run in runs:
            sets = [s for s in run.per_set if s.digest in wanted and s.per_position_acceptance]
            if sets:
                width = min(len(s.per_position_acceptance) for s in sets)
                marginal = tuple(sum(s.per_position_acceptance[i] for s in sets) / len(sets) for i in range(width))
                names = tuple(s.name for s in sets)
                return pricing.Acceptance(marginal, _source(run, names), run.run_id, names)
        raise PricingInputError(
            f"no measured run of {drafter} on {target} used these prompts: run `drafters verify {target} {drafter} "
            f"--prompts FILE` first")
    if not runs:
        raise PricingInputError(
            f"no measured per-position acceptance for {drafter} on {target}: run `drafters verify {target} {drafter}` "
            f"first")
    run = runs[0]
    names = tuple(s.name for s in run.per_set)
    return pricing.Acceptance(run.per_position_acceptance, _source(run, names), run.run_id, names)


def _published_entry(target: str, drafter: str) -> dict[str, Any] | None:
    document = json.loads(resources.files("registry").joinpath("data", "published_acceptance.json").read_text("utf-8"))
    return next((e for e in document["entries"] if e["target"] == target and e["drafter"] == drafter), None)


def published_tau_band(target: str, drafter: str) -> tuple[tuple[float, float] | None, str | None]:
    """(lowest, highest) published τ of the pair over its published prompt sets, and what they are; (None, None)
    when nothing is published (registry/data/published_acceptance.json)."""
    entry = _published_entry(target, drafter)
    if entry is None or not entry["tau"]:
        return None, None
    taus: dict[str, float] = entry["tau"]
    return (min(taus.values()), max(taus.values())), (
        f"published, not measured: τ on {', '.join(sorted(taus))}, {entry['engine']} on {entry['hardware']}, "
        f"T={entry['temperature']:g} ({entry['source']})")


def published_acceptance(target: str, drafter: str, prompt_set: str | None = None) -> pricing.Acceptance | None:
    """A published τ for the pair (registry/data/published_acceptance.json), spread over positions as a constant
    per-token acceptance; the median published set unless `prompt_set` names one. None when nothing is published."""
    entry = _published_entry(target, drafter)
    if entry is None:
        return None
    taus: dict[str, float] = entry["tau"]
    if prompt_set is not None:
        if prompt_set not in taus:
            raise PricingInputError(f"no published τ of {drafter} on {prompt_set!r}; published: {', '.join(taus)}")
        chosen = prompt_set
    else:
        ordered = sorted(taus, key=lambda name: taus[name])
        chosen = ordered[(len(ordered) - 1) // 2]  # the lower median: a real set, not an average of domains
    marginal = pricing.constant_acceptance(taus[chosen], int(entry["drafted"]))
    label = (f"published, not measured: τ {taus[chosen]:.2f} on {chosen}"
             + ("" if prompt_set else f" (median of {len(taus)} published sets)")
             + f", {entry['engine']} on {entry['hardware']}, T={entry['temperature']:g}; spread as constant "
             f"acceptance α={marginal[0]:.2f} per position ({entry['source']})")
    return pricing.Acceptance(marginal, label, None, (chosen,))


def _source(run: Run, sets: Sequence[str]) -> str:
    return f"run {run.run_id[:12]} ({', '.join(sets) or 'no prompt set'}; {run.engine} on {run.hardware})"


# ---- calibration ---------------------------------------------------------------------------------------------


def _run_bytes(store: Store, run: Run, known: dict[tuple[str, bool], SideFacts] | None = None) -> RunBytes | str:
    """What the model needs of a run; `known` keeps each side's facts across the runs of one pass (runs share a
    few targets and drafters, and reading a side costs store reads and, where it falls back, the catalog)."""
    known = {} if known is None else known

    def facts(ref: str, drafter: bool) -> SideFacts:
        if (ref, drafter) not in known:
            known[ref, drafter] = side_facts(store, ref, drafter=drafter)
        return known[ref, drafter]

    return run_bytes(run, facts(run.target, False), facts(run.drafter, True) if run.drafter else None)


def _prepare(store: Store) -> tuple[list[Run], dict[str, RunBytes | str]]:
    """Every successful run with a measured speed, and what the model needs of each (or why it cannot)."""
    runs = [r for r in store.runs.list_runs(status="ok") if r.baseline_tokens_per_s or r.tokens_per_s]
    known: dict[tuple[str, bool], SideFacts] = {}
    return runs, {run.run_id: _run_bytes(store, run, known) for run in runs}  # type: ignore[misc]


def _samples(runs: Sequence[Run], prepared: dict[str, RunBytes | str],
             gpus: tuple[Gpu, ...]) -> dict[str, dict[str, RunBytes | str]]:
    """Each run's peers, as predict_one reads them: the FIT_SAMPLE most recent OTHER runs of its fit group (runs on
    any catalog GPU for a run on one, else the runs on its own hardware), `runs` being newest first."""
    groups: dict[tuple[bool, str | None], list[str]] = {}
    for run in runs:
        if pricing_problem(run) is None:  # only runs that may feed pricing are anyone's peers
            groups.setdefault(_group_key(gpus, run.hardware), []).append(run.run_id)
    samples = {}
    for run in runs:
        # The group's newest FIT_SAMPLE + 1 hold the FIT_SAMPLE newest others (a look at K + 1, not the group).
        newest = groups.get(_group_key(gpus, run.hardware), [])[:FIT_SAMPLE + 1]
        peers = [rid for rid in newest if rid != run.run_id][:FIT_SAMPLE]
        samples[run.run_id] = {rid: prepared[rid] for rid in peers}
    return samples


def _group_key(gpus: tuple[Gpu, ...], hardware: str | None) -> tuple[bool, str | None]:
    """(True, None) for every catalog GPU (one group), else (False, the hardware name)."""
    if hardware and _names_catalog_gpu(gpus, hardware):
        return True, None
    return False, hardware


def _predict(run: Run, entry: RunBytes | str, prepared: dict[str, RunBytes | str],
             gpus: tuple[Gpu, ...], *, overhead: bool) -> RunPrediction:
    if isinstance(entry, str):
        return _missing(run, entry)
    # Leave one out: the judged run is never among the runs its constants are fitted from.
    others = [p for rid, p in prepared.items() if rid != run.run_id and isinstance(p, RunBytes)]
    fitted = fitted_device(entry, others, gpus, overhead=overhead)
    if isinstance(fitted, str):
        return _missing(run, fitted)
    gamma = run.draft_length or (len(run.per_position_acceptance) or None)
    tau = run.tau if run.drafter else None
    try:
        predicted = pricing.predict_run(
            entry.pair, tau=tau, gamma=gamma, quant=entry.quant, context=entry.context, device=fitted.device,
            assumptions=pricing.Assumptions(drafter_quantization=entry.drafter_quant,
                                            step_overhead_s=fitted.overhead_s))
    except (pricing.PricingError, ArithmeticError) as exc:
        return _missing(run, f"the model could not price it ({exc})")
    return RunPrediction(
        run_id=run.run_id, target=run.target, drafter=run.drafter, engine=run.engine, hardware=run.hardware,
        predicted_baseline_tokens_per_s=predicted.baseline_tokens_per_s,
        measured_baseline_tokens_per_s=run.baseline_tokens_per_s,
        baseline_error=pricing.relative_error(predicted.baseline_tokens_per_s, run.baseline_tokens_per_s),
        predicted_tokens_per_s=predicted.tokens_per_s, measured_tokens_per_s=run.tokens_per_s,
        tokens_per_s_error=pricing.relative_error(predicted.tokens_per_s, run.tokens_per_s),
        predicted_speedup=predicted.speedup, measured_speedup=run.speedup,
        speedup_error=pricing.relative_error(predicted.speedup, run.speedup),
        device_basis=fitted.device.basis,
        note=(f"{entry.quant.name} weights, context {entry.context}, γ={gamma}, "
              f"τ={'-' if tau is None else round(tau, 2)}"),
        model_version=MODEL_VERSION, fitted_from=fitted.fitted_from, overhead_s=fitted.overhead_s,
    )


def predict_runs(store: Store, *, overhead: bool = True) -> list[RunPrediction]:
    """Predict every successful run on real hardware (pytorch, llama.cpp, ingested) from the model alone, each
    from the other runs (leave-one-out). `overhead=False` is the model without the fitted per-forward overhead
    (model version 1), kept so bench/price.py can show what the overhead changes."""
    gpus = load_gpus()
    runs, prepared = _prepare(store)
    samples = _samples(runs, prepared, gpus)
    return [_predict(run, prepared[run.run_id], samples[run.run_id], gpus, overhead=overhead) for run in runs]


def predict_one(store: Store, run: Run) -> RunPrediction:
    """One run's prediction, from the FIT_SAMPLE most recent other runs of its fit group (`_fit_group`): the same
    prediction as predict_runs makes of it, at a cost that does not grow with the runs stored."""
    if run.status != "ok":
        return _missing(run, "the run failed: nothing was measured")
    if not (run.baseline_tokens_per_s or run.tokens_per_s):
        return _missing(run, "the run stored no tokens/s")
    gpus = load_gpus()
    known: dict[tuple[str, bool], SideFacts] = {}
    # One more than the sample: the run itself is usually among the group's newest, and never its own peer. Only runs
    # that may feed pricing are peers (a lossy or overloaded run is predicted, never fitted from): when some of the
    # newest cannot, the window read doubles once, so a few such runs do not shrink the sample, and a record still
    # reads at most twice the sample (read twice at once, every record decoded 202 runs where 101 would do).
    for window in (FIT_SAMPLE + 1, 2 * (FIT_SAMPLE + 1)):
        group = _fit_group(store, run, gpus, window)
        peers = [r for r in group if r.run_id != run.run_id and pricing_problem(r) is None][:FIT_SAMPLE]
        if len(peers) == FIT_SAMPLE or len(group) < window:
            break
    prepared = {r.run_id: _run_bytes(store, r, known) for r in peers}
    return _predict(run, _run_bytes(store, run, known), prepared, gpus, overhead=True)


def _fit_group(store: Store, run: Run, gpus: tuple[Gpu, ...], limit: int) -> list[Run]:
    """The `limit` most recent stored runs fitted_device can fit this run's constants from, in predict_runs'
    order (the fits' sums and `fitted_from` follow it): a run on a catalog GPU is fitted from the runs on any
    catalog GPU, any other run from the runs on its own hardware (None included); no other run can change its
    prediction."""
    if run.hardware and _names_catalog_gpu(gpus, run.hardware):
        names = [h for h in store.runs.hardware_names() if _names_catalog_gpu(gpus, h)]
        return store.runs.recent_ok_runs_on_hardware(names, limit)
    return store.runs.recent_ok_runs_on_hardware([run.hardware], limit)


# Hardware name -> whether it names a card of the packaged GPU catalog, which does not change while the process
# runs: matching a name is a fuzzy search of the catalog, repeated for every machine's name on every record.
_CATALOG_GPU_NAMES: dict[str, bool] = {}


def _names_catalog_gpu(gpus: tuple[Gpu, ...], hardware: str) -> bool:
    """`gpus`: the packaged catalog (load_gpus()), the only one predict_one prices with."""
    if hardware not in _CATALOG_GPU_NAMES:
        _CATALOG_GPU_NAMES[hardware] = find_gpu(gpus, hardware) is not None
    return _CATALOG_GPU_NAMES[hardware]


def _missing(run: Run, reason: str) -> RunPrediction:
    return RunPrediction(run.run_id, run.target, run.drafter, run.engine, run.hardware, None,
                         run.baseline_tokens_per_s, None, None, run.tokens_per_s, None, None, run.speedup, None, "",
                         f"not predicted: {reason}", MODEL_VERSION)


def stored_prediction(run: Run) -> RunPrediction | None:
    """The prediction stored with the run, if it was made by the current model version."""
    prediction = run.prediction
    return prediction if prediction is not None and prediction.model_version == MODEL_VERSION else None


def store_predictions(store: Store, predictions: Sequence[RunPrediction]) -> int:
    """Store each prediction with its run; returns how many runs changed."""
    return store.runs.set_predictions({p.run_id: p for p in predictions})


def current_predictions(store: Store, runs: Sequence[Run]) -> dict[str, RunPrediction]:
    """Each run's prediction under the current model: the stored one when the current model version made it,
    else computed now from the other runs (nothing is written; `drafters price --calibration` stores them)."""
    result: dict[str, RunPrediction] = {}
    stale = []
    for run in runs:
        stored = stored_prediction(run)
        if stored is not None:
            result[run.run_id] = stored
        elif run.status != "ok":
            result[run.run_id] = _missing(run, "the run failed: nothing was measured")
        elif not (run.baseline_tokens_per_s or run.tokens_per_s):
            result[run.run_id] = _missing(run, "the run stored no tokens/s")
        else:
            stale.append(run)
    if stale:
        gpus = load_gpus()
        stored, prepared = _prepare(store)
        samples = _samples(stored, prepared, gpus)
        for run in stale:
            entry = prepared.get(run.run_id) or _run_bytes(store, run)
            peers = samples.get(run.run_id)
            if peers is None:  # not a stored run with a speed (a run read elsewhere): the group's newest
                key = _group_key(gpus, run.hardware)
                group = [r.run_id for r in stored if r.run_id != run.run_id and _group_key(gpus, r.hardware) == key]
                peers = {rid: prepared[rid] for rid in group[:FIT_SAMPLE]}
            result[run.run_id] = _predict(run, entry, peers, gpus, overhead=True)
    return result
