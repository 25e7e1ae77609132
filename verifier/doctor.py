"""`drafters doctor`: is speculation really on in a server a user runs, and does it give what the registry expects?

1. Identify: the engine and its version (llama.cpp `/props`, SGLang `/get_server_info`, vLLM `/version`), the
   model it serves, and, for llama.cpp, the GGUF digest of that model matched against the GGUF files the registry's
   own llama.cpp runs recorded (so a served file is known by its bytes, not by its name).
2. Probe: a few prompts of two kinds sent by the doctor, at temperature 0; the server's speculative counters read
   before and after (llama.cpp and vLLM `/metrics`), or per request (SGLang's `meta_info.spec_verify_ct`,
   python/sglang/srt/managers/tokenizer_manager.py in sgl-project/sglang), so τ and per-position acceptance are of
   the probe alone.
3. Judge: `registry.domain.doctor.diagnose` against the pair's verdict, trained draft length, τ band of measured
   runs on the same engine (else a published τ), and the engine's minimum version.
4. Record: a probe that drafted is stored as a run (source "doctor", the hardware the user names); a probe that
   drafted nothing or fell below the band raises `speculation_not_engaged` / `acceptance_regressed`, which reach
   subscriptions and the feed like every event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime

from registry.calibration import published_tau_band
from registry.domain import pair
from registry.domain.doctor import NOT_ENGAGED, Diagnosis, Expectation, ProbeFacts, diagnose
from registry.domain.drafter_facts import drafter_facts
from registry.domain.engines import SERVER_ENGINE_NAMES
from registry.domain.engine_sources import MINIMUM_VERSIONS
from registry.domain.measurement import SetMeasurement
from registry.domain.names import repo_org
from registry.domain.records import EventSpec
from registry.domain.run import Run
from registry.local import looks_like_folder, resolve_side
from registry.recording import record_events, record_measurement
from registry.store import NotFound, Store
from verifier.ingest import public_url
from verifier.prompts import PromptSet
from verifier.server_probe import Probe, Served, identify, llamacpp_method, open_client, probe, probe_prompts

PROBE_SET = "doctor-probe"
DEFAULT_MAX_NEW_TOKENS = 64
# How many of the pair's newest measured runs on the engine make its τ band.
BAND_RUNS = 20


@dataclass(frozen=True)
class DoctorReport:
    served: Served
    probe: Probe
    facts: ProbeFacts
    expected: Expectation
    diagnosis: Diagnosis
    run: Run | None
    events: tuple[str, ...]


def served_run(store: Store, served: Served) -> Run | None:
    """The newest of the registry's llama.cpp runs whose target GGUF has the served file's bytes; None if none."""
    if served.model_sha256 is None:
        return None
    for run in store.runs.list_runs(engine=SERVER_ENGINE_NAMES["llamacpp"], status="ok", limit=500):
        target_gguf = ((run.provenance or {}).get("gguf") or {}).get("target") or {}
        if target_gguf.get("sha256") == served.model_sha256:
            return run
    return None


def served_ids(store: Store, served: Served) -> tuple[str | None, str | None, str | None]:
    """(target, drafter, target revision) that the registry's llama.cpp runs recorded for the served GGUF's bytes."""
    run = served_run(store, served)
    return (run.target, run.drafter, run.target_revision) if run is not None else (None, None, None)


def trained_draft_length(side: pair.Side) -> int | None:
    """Tokens the drafter drafts per step as trained: a block drafter's block (less its anchor, except DSpark's),
    a Gemma-4 assistant's `num_assistant_tokens`; None where the config does not say."""
    method = side.drafter_method
    if side.config is None or method is None:
        return None
    facts = drafter_facts(dict(side.config), method)
    if method in ("dflash", "dflash2", "dspark") and facts.block_size:
        return facts.block_size if method == "dspark" else facts.block_size - 1
    return None


def expectation(store: Store, served: Served, *, target: str | None, drafter: str | None) -> Expectation:
    """What the registry knows of the served pair; every unknown part is None with its reason in `notes`."""
    notes: list[str] = list(served.notes)
    by_bytes_target, by_bytes_drafter, served_revision = served_ids(store, served)
    target = target or by_bytes_target or served.model
    drafter = drafter or by_bytes_drafter
    if by_bytes_target:
        notes.append(f"the served GGUF's bytes match the registry's conversion of {by_bytes_target}")
    expected = Expectation(target=target, drafter=drafter, served_target_revision=served_revision)
    if drafter is None:
        notes.append("the server does not say which drafter it loaded and no recorded run matches it: pass --drafter "
                     "to compare with what the drafter should give")
        return replace(expected, notes=tuple(notes))
    try:
        drafter_side = resolve_side(store, drafter, drafter=True)
    except NotFound:
        notes.append(f"{drafter} is not in the registry: no verdict, trained length or band to compare with")
        return replace(expected, notes=tuple(notes))
    method = drafter_side.drafter_method
    engine = SERVER_ENGINE_NAMES[served.kind]
    minimum = MINIMUM_VERSIONS.get((served.kind, method or ""))
    verdict = None
    if target is not None:
        try:
            target_side = resolve_side(store, target, drafter=False)
            verdict = pair.judge(drafter_side, target_side).verdict
        except NotFound:
            notes.append(f"{target} is not in the registry: the pair's verdict is unknown")
    band, band_source, thinking = _tau_band(store, target, drafter, engine)
    if band is None and target is not None and not looks_like_folder(target):
        band, band_source = published_tau_band(target, drafter)
    return replace(expected, verdict=verdict, method=method, trained_draft_length=trained_draft_length(drafter_side),
                   tau_band=band, tau_band_source=band_source, measured_thinking=thinking,
                   minimum_version=minimum.version if minimum else None,
                   minimum_version_source=minimum.source if minimum else None, notes=tuple(notes))


def _tau_band(store: Store, target: str | None, drafter: str, engine: str
              ) -> tuple[tuple[float, float] | None, str | None, bool | None]:
    """(low, high) τ of the pair's newest lossless measured runs on this engine at temperature 0, their source, and
    whether they ran with thinking on; probes and ingested readings are not measurements of the pair."""
    if target is None:
        return None, None, None
    runs = [r for r in store.runs.list_runs(target=target, drafter=drafter, status="ok", engine=engine,
                                            limit=BAND_RUNS * 3)
            if r.tau is not None and (r.provenance or {}).get("source") not in ("doctor", "ingested")
            and r.temperature in (None, 0.0) and r.lossless is not False][:BAND_RUNS]
    if not runs:
        return None, None, None
    taus = [r.tau for r in runs if r.tau is not None]
    thinking = {r.settings.enable_thinking for r in runs if r.settings is not None}
    source = f"{len(runs)} measured run{'s' if len(runs) > 1 else ''} on {engine}, newest {runs[0].run_id}"
    return (min(taus), max(taus)), source, thinking.pop() if len(thinking) == 1 else None


def _events(diagnosis: Diagnosis, served: Served, expected: Expectation, facts: ProbeFacts, url: str,
            run: Run | None, checked_at: datetime) -> list[EventSpec]:
    subject = expected.drafter or expected.target or public_url(url)
    messages = {f.code: f.message for f in diagnosis.findings if f.problem}
    specs = []
    for kind in diagnosis.event_types:
        message = messages.get("not_engaged") if kind == NOT_ENGAGED else (
            messages.get("acceptance_collapsed") or messages.get("below_band"))
        specs.append(EventSpec(
            type=kind, subject=subject,
            dedupe_key=f"{kind}:doctor:{public_url(url)}:{checked_at.isoformat()}",
            payload={"message": f"{public_url(url)} ({facts.engine} {facts.engine_version or ''}): {message}",
                     "url": public_url(url), "target": expected.target, "drafter": expected.drafter,
                     "tau": facts.tau, "tau_band": list(expected.tau_band) if expected.tau_band else None,
                     "run": run.run_id if run else None, "source": "doctor"},
            org=repo_org(subject)))
    return specs


def run_doctor(store: Store, url: str, *, kind: str | None = None, target: str | None = None,
               drafter: str | None = None, hardware: str | None = None, prompt_set: PromptSet | None = None,
               max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, api_key: str | None = None, timeout_s: float = 120.0,
               record: bool = True, raise_events: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None,
               on_prompt: Callable[[int, int], None] | None = None) -> DoctorReport:
    """Identify, probe, judge and (with `record`) store the probe and its events. `raise_events` filters which
    event kinds to raise (the canary raises a kind only when the previous check did not already)."""
    with open_client(api_key, timeout_s) as http:
        served = identify(http, url, kind)
        prompts = probe_prompts(prompt_set)
        measured = probe(http, url, served, prompts, max_new_tokens=max_new_tokens, on_prompt=on_prompt)
        if served.kind == "llamacpp":  # the probe's own tasks now show the slot's speculative types
            served = replace(served, method=llamacpp_method(http, url) or served.method)
    draft_length = len(measured.counters.accepted_per_position) if (
        measured.counters is not None and measured.counters.accepted_per_position) else None
    facts = ProbeFacts(engine=SERVER_ENGINE_NAMES[served.kind], engine_version=served.engine_version,
                       drafts=measured.drafts, tau=measured.tau, draft_length=draft_length, thinking=None)
    expected = expectation(store, served, target=target, drafter=drafter)
    diagnosis = diagnose(facts, expected)
    checked_at = datetime.now(UTC)
    run = None
    if record and measured.tau is not None and expected.target is not None:
        run = record_measurement(store, _probe_run(url, served, measured, facts, expected, hardware, prompt_set))
    kinds = diagnosis.event_types if raise_events is None else raise_events(diagnosis.event_types)
    raised: list[str] = []
    if record:
        raised = record_events(store, [spec for spec in _events(diagnosis, served, expected, facts, url, run, checked_at)
                                       if spec.type in kinds])
    return DoctorReport(served, measured, facts, expected, diagnosis, run, tuple(raised))


def _probe_run(url: str, served: Served, measured: Probe, facts: ProbeFacts, expected: Expectation,
               hardware: str | None, prompt_set: PromptSet | None) -> Run:
    name = prompt_set.name if prompt_set is not None else PROBE_SET
    digest = prompt_set.digest if prompt_set is not None else PROBE_SET
    measurement = SetMeasurement(name=name, prompts=measured.prompts, digest=digest, acceptance=measured.acceptance,
                                 reported_tau=measured.tau if measured.acceptance is None else None)
    return Run(
        target=expected.target or "", drafter=expected.drafter, engine=facts.engine,
        engine_version=served.engine_version, method=served.method, draft_length=facts.draft_length,
        overall=measurement, per_set=(measurement,), device_name=hardware, hardware=hardware,
        target_revision=expected.served_target_revision,
        provenance={"source": "doctor", "url": public_url(url), "server": served.kind,
                    "output_tokens": measured.output_tokens, "seconds": measured.seconds,
                    "counters": asdict(measured.counters) if measured.counters else None,
                    "model_sha256": served.model_sha256},
    )
