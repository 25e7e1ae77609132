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

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from registry.calibration import published_tau_band
from registry.calibration.recording import record_measurement
from registry.domain import pair
from registry.domain.doctor import NOT_ENGAGED, Diagnosis, Expectation, ProbeFacts, diagnose
from registry.domain.drafter_facts import drafter_facts
from registry.domain.engines import SERVER_ENGINE_NAMES, SERVER_KINDS
from registry.domain.launch import MINIMUM_VERSIONS
from registry.domain.measurement import SetMeasurement
from registry.domain.records import EventSpec
from registry.domain.run import Run
from registry.local import looks_like_folder, resolve_side
from registry.store import NotFound, Store
from registry.store.runs import list_runs
from verifier.counters import (
    LLAMACPP_PREFIX,
    NO_COUNTS,
    VLLM_PREFIX,
    ServerReadError,
    SpecCounters,
    counter_acceptance,
    parse_prometheus,
    spec_counters,
)
from verifier.ingest import public_url
from verifier.metrics import Acceptance
from verifier.prompts import Prompt, PromptSet, bundled_set

PROBE_SET = "doctor-probe"
# Two kinds of prompt, since τ depends on the kind (code drafts well, chat less): the first prompts of each.
DEFAULT_PROBE_SETS = ("code", "chat")
DEFAULT_PROBE_PROMPTS = 3
DEFAULT_MAX_NEW_TOKENS = 64
# Hashing a served GGUF identifies it by its bytes; beyond this size it costs more than a probe and is skipped.
HASH_LIMIT_BYTES = 8 * 2**30
# How many of the pair's newest measured runs on the engine make its τ band.
BAND_RUNS = 20


@dataclass(frozen=True)
class Served:
    """What a server says it serves."""

    kind: str  # "llamacpp", "vllm", "sglang"
    engine_version: str | None
    model: str | None  # the model name it answers to
    model_path: str | None = None
    model_sha256: str | None = None
    method: str | None = None
    draft_length: int | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Probe:
    prompts: int
    output_tokens: int
    seconds: float
    counters: SpecCounters | None  # None: the server exposes no per-step counters (SGLang's are per request)
    acceptance: Acceptance | None
    tau: float | None
    drafts: int | None


@dataclass(frozen=True)
class DoctorReport:
    served: Served
    probe: Probe
    facts: ProbeFacts
    expected: Expectation
    diagnosis: Diagnosis
    run: Run | None
    events: tuple[str, ...]


def _client(api_key: str | None, timeout_s: float) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(timeout=timeout_s, trust_env=False, headers=headers)


def _get_json(client: httpx.Client, url: str, path: str) -> Any | None:
    """The JSON a GET answers, or None when the route is not there (another engine)."""
    try:
        response = client.get(url.rstrip("/") + path)
    except httpx.HTTPError as error:
        raise ServerReadError(f"cannot reach {public_url(url)}{path}: {error.__class__.__name__}") from None
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _post_json(client: httpx.Client, url: str, path: str, body: dict[str, Any]) -> Any:
    try:
        response = client.post(url.rstrip("/") + path, json=body)
    except httpx.HTTPError as error:
        raise ServerReadError(f"{public_url(url)}{path} failed: {error.__class__.__name__}") from None
    if response.status_code != 200:
        raise ServerReadError(f"{public_url(url)}{path} answered HTTP {response.status_code}: {response.text[:200]}")
    try:
        return response.json()
    except ValueError:
        raise ServerReadError(f"{public_url(url)}{path} did not answer JSON") from None


def _metrics(client: httpx.Client, url: str, prefix: str) -> SpecCounters | None:
    """The speculative counters since boot; None when /metrics answers none (the server drafts nothing)."""
    try:
        response = client.get(url.rstrip("/") + "/metrics")
    except httpx.HTTPError as error:
        raise ServerReadError(f"cannot reach {public_url(url)}/metrics: {error.__class__.__name__}") from None
    if response.status_code != 200:
        raise ServerReadError(f"{public_url(url)}/metrics answered HTTP {response.status_code}: the doctor reads "
                              "the server's counters (llama-server: start it with --metrics)")
    return spec_counters(parse_prometheus(response.text), prefix)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def identify(client: httpx.Client, url: str, kind: str | None = None) -> Served:
    """Which engine answers at `url` (tried in the order llama.cpp, SGLang, vLLM unless `kind` says) and what it serves."""
    if kind is not None and kind not in SERVER_KINDS:
        raise ServerReadError(f"unknown engine {kind!r}; choose one of {', '.join(SERVER_KINDS)}")
    if kind in (None, "llamacpp"):
        props = _get_json(client, url, "/props")
        if isinstance(props, dict) and "build_info" in props:
            return _llamacpp_served(client, url, props)
    if kind in (None, "sglang"):
        info = _get_json(client, url, "/get_server_info")
        if isinstance(info, dict) and ("speculative_algorithm" in info or "model_path" in info):
            return _sglang_served(info)
    if kind in (None, "vllm"):
        version = _get_json(client, url, "/version")
        models = _get_json(client, url, "/v1/models")
        if isinstance(version, dict) and "version" in version:
            return _vllm_served(version, models)
    raise ServerReadError(f"{public_url(url)} answers none of llama.cpp's /props, SGLang's /get_server_info or "
                          "vLLM's /version: is it an inference server (and is --engine right)?")


def _llamacpp_served(client: httpx.Client, url: str, props: dict[str, Any]) -> Served:
    model_path = props.get("model_path") if isinstance(props.get("model_path"), str) else None
    sha256, notes = None, []
    if model_path:
        path = Path(model_path)
        if path.is_file() and path.stat().st_size <= HASH_LIMIT_BYTES:
            sha256 = _file_sha256(path)
        elif path.is_file():
            notes.append(f"{path.name} is over {HASH_LIMIT_BYTES // 2**30} GiB: not hashed, so it is matched by name")
        else:
            notes.append("the served GGUF is not on this machine: it is matched by name, not by its bytes")
    return Served(kind="llamacpp", engine_version=props.get("build_info"),
                  model=props.get("model_alias") or model_path, model_path=model_path, model_sha256=sha256,
                  method=_llamacpp_method(client, url), notes=tuple(notes))


def _llamacpp_method(client: httpx.Client, url: str) -> str | None:
    """The speculative types of the slot's last task (/slots); before any request the slot has none to show."""
    slots = _get_json(client, url, "/slots")
    params = slots[0].get("params", {}) if isinstance(slots, list) and slots and isinstance(slots[0], dict) else {}
    types = [t for t in str(params.get("speculative.types", "")).split(",") if t and t != "none"]
    return ",".join(types) or None


def _sglang_served(info: dict[str, Any]) -> Served:
    algorithm = info.get("speculative_algorithm")
    tokens = info.get("speculative_num_draft_tokens")
    notes = (f"SGLang drafts {tokens} tokens per step (speculative_num_draft_tokens)",) if isinstance(tokens, int) else ()
    return Served(kind="sglang", engine_version=info.get("version"),
                  model=info.get("served_model_name") or info.get("model_path"),
                  method=str(algorithm).lower() if algorithm else None, notes=notes)


def _vllm_served(version: dict[str, Any], models: Any) -> Served:
    data = models.get("data") if isinstance(models, dict) else None
    ids = [m.get("id") for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)] if isinstance(data, list) else []
    return Served(kind="vllm", engine_version=version.get("version"), model=ids[0] if len(ids) == 1 else None,
                  notes=() if len(ids) == 1 else (f"the server lists {len(ids)} models: pass --target",))


def probe_prompts(prompt_set: PromptSet | None = None, per_set: int = DEFAULT_PROBE_PROMPTS) -> list[Prompt]:
    if prompt_set is not None:
        return list(prompt_set.prompts)
    return [p for name in DEFAULT_PROBE_SETS for p in bundled_set(name).prompts[:per_set]]


def prompt_text(prompt: Prompt) -> str:
    """The prompt as raw text: the doctor sends completions, not chat, so no template of ours stands in the way."""
    if prompt.text is not None:
        return prompt.text
    return "\n".join(m.content for m in prompt.messages or ())


def probe(client: httpx.Client, url: str, served: Served, prompts: Sequence[Prompt], *,
          max_new_tokens: int, on_prompt: Callable[[int, int], None] | None = None) -> Probe:
    """Send `prompts` at temperature 0 and measure what speculation did for them alone."""
    started = datetime.now(UTC)
    output_tokens = 0
    verify_steps = 0
    prefix = {"llamacpp": LLAMACPP_PREFIX, "vllm": VLLM_PREFIX}.get(served.kind)
    before = _metrics(client, url, prefix) if prefix else None
    for index, prompt in enumerate(prompts):
        text = prompt_text(prompt)
        if served.kind == "llamacpp":
            answer = _post_json(client, url, "/completion", {
                "prompt": text, "n_predict": max_new_tokens, "temperature": 0.0, "cache_prompt": False,
                "stream": False})
            output_tokens += int((answer.get("timings") or {}).get("predicted_n") or 0)
        elif served.kind == "vllm":
            answer = _post_json(client, url, "/v1/completions", {
                "model": served.model, "prompt": text, "max_tokens": max_new_tokens, "temperature": 0.0})
            output_tokens += int((answer.get("usage") or {}).get("completion_tokens") or 0)
        else:
            answer = _post_json(client, url, "/generate", {
                "text": text, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0}})
            meta = answer.get("meta_info") or {}
            output_tokens += int(meta.get("completion_tokens") or 0)
            verify_steps += int(meta.get("spec_verify_ct") or 0)
        if on_prompt is not None:
            on_prompt(index + 1, len(prompts))
    seconds = (datetime.now(UTC) - started).total_seconds()
    if prefix is not None:
        after = _metrics(client, url, prefix)
        if after is None:  # no speculative counters at all: the server was not started with a drafter
            return Probe(len(prompts), output_tokens, seconds, NO_COUNTS, None, None, 0)
        delta = after.minus(before or NO_COUNTS)
        acceptance = counter_acceptance(delta)
        return Probe(len(prompts), output_tokens, seconds, delta, acceptance,
                     acceptance.tau if acceptance else None, delta.drafts)
    # SGLang: every verify step emits its accepted drafts and one token of its own (its accept length).
    tau = output_tokens / verify_steps if verify_steps else None
    return Probe(len(prompts), output_tokens, seconds, None, None, tau, verify_steps)


def _served_ids(store: Store, served: Served) -> tuple[str | None, str | None, str | None]:
    """(target, drafter, target revision) that the registry's llama.cpp runs recorded for the served GGUF's bytes."""
    if served.model_sha256 is None:
        return None, None, None
    for run in list_runs(store, engine=SERVER_ENGINE_NAMES["llamacpp"], status="ok", limit=500):
        target_gguf = ((run.provenance or {}).get("gguf") or {}).get("target") or {}
        if target_gguf.get("sha256") == served.model_sha256:
            return run.target, run.drafter, run.target_revision
    return None, None, None


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
    by_bytes_target, by_bytes_drafter, served_revision = _served_ids(store, served)
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
    runs = [r for r in list_runs(store, target=target, drafter=drafter, status="ok", engine=engine, limit=BAND_RUNS * 3)
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
            org=subject.split("/", 1)[0] if subject.count("/") == 1 else None))
    return specs


def run_doctor(store: Store, url: str, *, kind: str | None = None, target: str | None = None,
               drafter: str | None = None, hardware: str | None = None, prompt_set: PromptSet | None = None,
               max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, api_key: str | None = None, timeout_s: float = 120.0,
               record: bool = True, raise_events: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None,
               on_prompt: Callable[[int, int], None] | None = None) -> DoctorReport:
    """Identify, probe, judge and (with `record`) store the probe and its events. `raise_events` filters which
    event kinds to raise (the canary raises a kind only when the previous check did not already)."""
    with _client(api_key, timeout_s) as client:
        served = identify(client, url, kind)
        prompts = probe_prompts(prompt_set)
        measured = probe(client, url, served, prompts, max_new_tokens=max_new_tokens, on_prompt=on_prompt)
        if served.kind == "llamacpp":  # the probe's own tasks now show the slot's speculative types
            served = replace(served, method=_llamacpp_method(client, url) or served.method)
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
        for spec in _events(diagnosis, served, expected, facts, url, run, checked_at):
            if spec.type in kinds:
                store.events.record_event(spec)
                raised.append(spec.type)
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
