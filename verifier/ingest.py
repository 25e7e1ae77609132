"""Speculative-decoding counters read from inference servers, and runs recorded from servers users already run.

llama.cpp (`/metrics`, started with `--metrics`; `/props`, `/slots`), vLLM (Prometheus `/metrics`, `/version`) and
SGLang (`/get_server_info`) each expose cumulative counters since boot. `ingest_server` turns one reading into a
stored run (engine, version, τ, acceptance, tok/s, the user's hardware), so numbers measured on a user's own GPU
land in the history beside the verifier's. The verifier's llama.cpp engine reads the same counters per request.

Parsing the counters and what they mean live in `verifier.counters`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from registry.domain.engines import SERVER_ENGINE_NAMES, SERVER_KINDS
from registry.domain.measurement import SetMeasurement, spread
from registry.domain.run import Run
from registry.recording import record_measurement
from registry.store import Store
from verifier.counters import (
    LLAMACPP_PREFIX,
    VLLM_PREFIX,
    ServerReadError,
    counter_total,
    counter_acceptance,
    parse_prometheus,
    spec_counters,
)
from verifier.metrics import Acceptance
# What an ingested run was measured on: whatever the server served, not one of the verifier's prompt sets.
LIVE_TRAFFIC = "live-traffic"


@dataclass(frozen=True)
class ServerReading:
    """What one look at a running server says about its speculative decoding since boot."""

    engine: str  # "llama.cpp", "vllm" or "sglang"
    engine_version: str | None
    model: str | None
    method: str | None
    draft_length: int | None
    tau: float | None
    acceptance: Acceptance | None
    tokens_per_s: float | None
    counters: dict[str, Any]  # the raw numbers read, for provenance


def _get(client: httpx.Client, url: str, path: str) -> httpx.Response:
    try:
        response = client.get(url.rstrip("/") + path)
    except httpx.HTTPError as error:
        raise ServerReadError(f"cannot reach {public_url(url)}{path}: {error.__class__.__name__}: {error}") from None
    return response


def _json(response: httpx.Response, what: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise ServerReadError(f"{what} did not answer JSON (HTTP {response.status_code})") from None


def read_llamacpp(client: httpx.Client, url: str) -> ServerReading:
    metrics = _get(client, url, "/metrics")
    if metrics.status_code != 200:
        raise ServerReadError(
            f"{public_url(url)}/metrics answered HTTP {metrics.status_code}: start llama-server with --metrics"
        )
    samples = parse_prometheus(metrics.text)
    counters = spec_counters(samples, LLAMACPP_PREFIX)
    props = _get(client, url, "/props")
    props_json = _json(props, "/props") if props.status_code == 200 else {}
    slots = _get(client, url, "/slots")
    slots_json = _json(slots, "/slots") if slots.status_code == 200 else []
    params = slots_json[0].get("params", {}) if isinstance(slots_json, list) and slots_json else {}
    spec_types = [t for t in str(params.get("speculative.types", "")).split(",") if t and t != "none"]
    predicted = counter_total(samples, f"{LLAMACPP_PREFIX}tokens_predicted")
    predicted_seconds = counter_total(samples, f"{LLAMACPP_PREFIX}tokens_predicted_seconds")
    acceptance = counter_acceptance(counters) if counters else None
    return ServerReading(
        engine=SERVER_ENGINE_NAMES["llamacpp"],
        engine_version=props_json.get("build_info"),
        model=props_json.get("model_alias") or props_json.get("model_path"),
        method=",".join(spec_types) or None,
        draft_length=None,
        tau=acceptance.tau if acceptance else None,
        acceptance=acceptance,
        tokens_per_s=predicted / predicted_seconds if predicted and predicted_seconds else None,
        counters={"spec": asdict(counters) if counters else None, "tokens_predicted": predicted,
                  "tokens_predicted_seconds": predicted_seconds},
    )


def read_vllm(client: httpx.Client, url: str) -> ServerReading:
    metrics = _get(client, url, "/metrics")
    if metrics.status_code != 200:
        raise ServerReadError(f"{public_url(url)}/metrics answered HTTP {metrics.status_code}")
    samples = parse_prometheus(metrics.text)
    counters = spec_counters(samples, VLLM_PREFIX)
    version = _get(client, url, "/version")
    version_json = _json(version, "/version") if version.status_code == 200 else {}
    models = sorted({s.labels["model_name"] for s in samples if "model_name" in s.labels})
    # Decode speed per request: mean inter-token latency (older vLLM: time per output token).
    latency_sum = latency_count = None
    for name in ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"):
        latency_sum, latency_count = counter_total(samples, f"{name}_sum"), counter_total(samples, f"{name}_count")
        if latency_sum and latency_count:
            break
    acceptance = counter_acceptance(counters) if counters else None
    return ServerReading(
        engine=SERVER_ENGINE_NAMES["vllm"],
        engine_version=version_json.get("version"),
        model=models[0] if len(models) == 1 else None,
        method=None,
        draft_length=len(counters.accepted_per_position) if counters and counters.accepted_per_position else None,
        tau=acceptance.tau if acceptance else None,
        acceptance=acceptance,
        tokens_per_s=latency_count / latency_sum if latency_sum and latency_count else None,
        counters={"spec": asdict(counters) if counters else None, "latency_sum_s": latency_sum,
                  "latency_count": latency_count},
    )


def read_sglang(client: httpx.Client, url: str) -> ServerReading:
    info = _get(client, url, "/get_server_info")
    if info.status_code != 200:
        raise ServerReadError(f"{public_url(url)}/get_server_info answered HTTP {info.status_code}")
    body = _json(info, "/get_server_info")
    if not isinstance(body, dict):
        raise ServerReadError("/get_server_info did not answer a JSON object")
    states = body.get("internal_states") or [{}]
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    tau = _finite_or_none(state.get("avg_spec_accept_length"))
    throughput = _finite_or_none(state.get("last_gen_throughput"))
    draft_tokens = body.get("speculative_num_draft_tokens")
    return ServerReading(
        engine=SERVER_ENGINE_NAMES["sglang"],
        engine_version=body.get("version"),
        model=body.get("served_model_name") or body.get("model_path"),
        method=str(body["speculative_algorithm"]).lower() if body.get("speculative_algorithm") else None,
        draft_length=draft_tokens if isinstance(draft_tokens, int) else None,
        tau=tau,
        acceptance=None,  # SGLang reports only the mean acceptance length
        tokens_per_s=throughput,
        counters={"avg_spec_accept_length": tau, "last_gen_throughput": throughput},
    )


def _finite_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


READERS: dict[str, Callable[[httpx.Client, str], ServerReading]] = {
    "llamacpp": read_llamacpp,
    "vllm": read_vllm,
    "sglang": read_sglang,
}


def read_server(kind: str, url: str, *, timeout_s: float = 10.0, api_key: str | None = None) -> ServerReading:
    if kind not in READERS:
        raise ServerReadError(f"unknown server kind {kind!r}; choose one of {', '.join(SERVER_KINDS)}")
    if urlsplit(url).scheme not in ("http", "https"):
        raise ServerReadError(f"{public_url(url)} is not an http(s) URL")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=timeout_s, trust_env=False, headers=headers) as client:
        return READERS[kind](client, url)


def public_url(url: str) -> str:
    """The URL without user:password, so credentials are never stored or printed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def ingest_server(
    store: Store,
    kind: str,
    url: str,
    *,
    hardware: str,
    target: str | None = None,
    drafter: str | None = None,
    timeout_s: float = 10.0,
    api_key: str | None = None,
) -> Run:
    """Read a running server's speculative counters and store them as a run; raises ServerReadError when the
    server cannot be read or has verified no drafts yet (nothing is stored then)."""
    if not hardware.strip():
        raise ServerReadError("say which hardware the server runs on (e.g. 'RTX 3060 12GB')")
    reading = read_server(kind, url, timeout_s=timeout_s, api_key=api_key)
    if reading.tau is None:
        raise ServerReadError(
            f"{public_url(url)} reports no speculative decoding yet (no verified drafts): start it with a drafter "
            "and send it some requests first"
        )
    model = target or reading.model
    if model is None:
        raise ServerReadError("the server does not say which model it serves: pass --target")
    source = {"source": "ingested", "url": public_url(url), "server": kind, "counters": reading.counters}
    # One reading of counters since the server started: no baseline, no repeats, no prompt set of ours.
    measured = SetMeasurement(
        name=LIVE_TRAFFIC,
        prompts=0,
        digest=LIVE_TRAFFIC,
        tokens_per_s=spread([reading.tokens_per_s]) if reading.tokens_per_s is not None else None,
        acceptance=reading.acceptance,
        reported_tau=reading.tau if reading.acceptance is None else None,
    )
    run = Run(
        target=model,
        drafter=drafter,
        engine=reading.engine,
        engine_version=reading.engine_version,
        method=reading.method,
        draft_length=reading.draft_length,
        overall=measured,
        per_set=(measured,),
        device_name=hardware,
        hardware=hardware,
        provenance=source,
    )
    # With its regression event and the pricing model's forecast of it, in one transaction.
    return record_measurement(store, run)
