"""`drafters sweep`: a drafter's speedup at each concurrency, measured on two servers a user runs.

The speculative server (target + drafter) and a baseline server (the same target alone) get the same closed-loop
load at each level: `c` clients, each sending its next prompt as soon as its last one answered, until the level's
requests are done. Output tokens per second of all clients together, with ÷ without, is the speedup at `c`; the
speculative server's counters read around the level give its τ there. The servers run as the user configured them
(llama.cpp needs `-np c` parallel slots to serve `c` requests at once; fewer slots queue them, which the curve then
shows). The PyTorch engine of `drafters verify` decodes one request at a time: it measures batch 1 only.

Prompts go as raw text through the engine's completion route by default. With `thinking` on or off they go as
conversations through its chat route with `chat_template_kwargs.enable_thinking`; whether the served template reads
the switch is seen, not assumed (`server_probe.thinking_switch`), and a curve records `thinking` only then.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from registry.domain.curve import CurvePoint, SpeedupCurve, SweepConditions
from registry.domain.engines import SERVER_ENGINE_NAMES
from registry.store import Store
from verifier.counters import ServerReadError
from verifier.doctor import served_run
from verifier.ingest import public_url
from verifier.prompts import Prompt, PromptSet
from verifier.server_probe import (
    Completion,
    Served,
    chat_complete,
    complete,
    identify,
    llamacpp_method,
    measured,
    open_client,
    probe_prompts,
    prompt_text,
    read_counters,
    thinking_switch,
)

DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_MAX_NEW_TOKENS = 128
PROBE_SET = "sweep-default"


@dataclass(frozen=True)
class LevelLoad:
    completions: tuple[Completion, ...]
    seconds: float  # first request sent to last answer received

    @property
    def tokens_per_s(self) -> float:
        return sum(c.output_tokens for c in self.completions) / self.seconds

    @property
    def latency_per_token_s(self) -> float:
        return statistics.median(c.seconds / max(c.output_tokens, 1) for c in self.completions)


def closed_loop(url: str, served: Served, prompts: Sequence[Prompt], *, concurrency: int, requests: int,
                max_new_tokens: int, api_key: str | None, timeout_s: float, thinking: bool | None = None) -> LevelLoad:
    """`requests` completions from `concurrency` clients, each sending its next one when its last one answered."""
    lock = threading.Lock()
    taken = 0
    done: list[Completion] = []
    failures: list[BaseException] = []

    def client_loop() -> None:
        nonlocal taken
        with open_client(api_key, timeout_s) as http:
            while True:
                with lock:
                    if taken >= requests or failures:
                        return
                    index, taken = taken, taken + 1
                prompt = prompts[index % len(prompts)]
                try:
                    result = (complete(http, url, served, prompt_text(prompt), max_new_tokens) if thinking is None
                              else chat_complete(http, url, served, prompt, max_new_tokens, thinking))
                except BaseException as error:  # noqa: BLE001 - handed to the caller below
                    with lock:
                        failures.append(error)
                    return
                with lock:
                    done.append(result)

    threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if failures:
        raise failures[0]
    return LevelLoad(tuple(done), seconds)


def _per_request(completions: Sequence[Completion]) -> dict[str, int | None]:
    """The requests' own draft counts summed (every request must report them, or none counts)."""
    if not completions or any(c.drafted is None or c.accepted is None for c in completions):
        return {"request_drafted": None, "request_accepted": None}
    return {"request_drafted": sum(c.drafted or 0 for c in completions),
            "request_accepted": sum(c.accepted or 0 for c in completions)}


def run_sweep(store: Store, url: str, baseline_url: str, **options: Any) -> SpeedupCurve:
    """Measure both servers at each concurrency (`measure_sweep`) and store the curve."""
    return store.curves.record_curve(measure_sweep(store, url, baseline_url, **options))


def measure_sweep(store: Store, url: str, baseline_url: str, *, concurrency: Sequence[int] = DEFAULT_CONCURRENCY,
                  prompt_set: PromptSet | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                  requests_per_level: int | None = None, target: str | None = None, drafter: str | None = None,
                  hardware: str | None = None, kind: str | None = None, api_key: str | None = None,
                  baseline_api_key: str | None = None, timeout_s: float = 600.0, thinking: bool | None = None,
                  engine_version: str | None = None, provenance: dict[str, Any] | None = None,
                  job_id: int | None = None,
                  on_level: Callable[[int, int, CurvePoint], None] | None = None) -> SpeedupCurve:
    """Both servers at each concurrency, the curve returned unstored. `requests_per_level` defaults to 2 per client
    (at least 8), so each client sends more than one request and the level is a steady load, not one burst.
    `thinking`: None sends raw text; True or False sends chats with that switch (recorded where the template reads
    it). `engine_version`, `provenance`, `job_id`: what a curve job knows of the servers it started."""
    levels = sorted(set(concurrency))
    if not levels or levels[0] < 1:
        raise ServerReadError("--concurrency takes positive numbers, e.g. 1,4,16,64")
    with open_client(api_key, timeout_s) as http, open_client(baseline_api_key, timeout_s) as baseline_http:
        served = identify(http, url, kind)
        baseline = identify(baseline_http, baseline_url, kind or served.kind)
        if baseline.kind != served.kind:
            raise ServerReadError(f"the baseline server is {baseline.kind}, the speculative one {served.kind}: "
                                  "compare the same engine with and without the drafter")
        prompts = probe_prompts(prompt_set)
        recorded_thinking, thinking_note = None, None
        if thinking is not None:
            switch, thinking_note = thinking_switch(http, url, served, prompts[0])
            recorded_thinking = thinking if switch else None
        points = []
        for number, level in enumerate(levels, start=1):
            requests = requests_per_level or max(8, 2 * level)
            common = {"prompts": prompts, "concurrency": level, "requests": requests,
                      "max_new_tokens": max_new_tokens, "timeout_s": timeout_s, "thinking": thinking}
            base = closed_loop(baseline_url, baseline, api_key=baseline_api_key, **common)
            before = read_counters(http, url, served)
            spec = closed_loop(url, served, api_key=api_key, **common)
            counted = measured(spec.completions, before, read_counters(http, url, served), spec.seconds)
            point = CurvePoint(
                concurrency=level, requests=requests, output_tokens=counted.output_tokens, seconds=spec.seconds,
                tokens_per_s=spec.tokens_per_s, baseline_tokens_per_s=base.tokens_per_s,
                latency_per_token_s=spec.latency_per_token_s, baseline_latency_per_token_s=base.latency_per_token_s,
                tau=counted.tau, drafts=counted.drafts, **_per_request(spec.completions))
            points.append(point)
            if on_level is not None:
                on_level(number, len(levels), point)
        if served.kind == "llamacpp":  # the sweep's own tasks now show the slot's speculative types
            served = replace(served, method=llamacpp_method(http, url) or served.method)
    # A served file whose bytes a registry run measured names the pair, and says whether it is one of the tiny test
    # models: such a curve never speaks for a real checkpoint, whatever --target and --hardware say.
    matched = served_run(store, served)
    by_bytes_target, by_bytes_drafter = (matched.target, matched.drafter) if matched is not None else (None, None)
    by_bytes = {} if matched is None else {"matched_run": matched.run_id,
                                           "test_model": (matched.provenance or {}).get("test_model")}
    conditions = SweepConditions(
        max_new_tokens=max_new_tokens, temperature=0.0,
        prompt_set=prompt_set.name if prompt_set is not None else PROBE_SET,
        prompt_digest=prompt_set.digest if prompt_set is not None else PROBE_SET,
        requests_per_level=requests_per_level or 0, url=public_url(url), baseline_url=public_url(baseline_url),
        prompt_format="raw" if thinking is None else "chat", thinking=recorded_thinking, thinking_note=thinking_note)
    return SpeedupCurve(
        target=target or by_bytes_target or served.model or public_url(url), drafter=drafter or by_bytes_drafter,
        engine=SERVER_ENGINE_NAMES[served.kind], engine_version=engine_version or served.engine_version,
        hardware=hardware, conditions=conditions, points=tuple(points), job_id=job_id,
        provenance={"source": "sweep", "method": served.method, "model_sha256": served.model_sha256,
                    "baseline_engine_version": baseline.engine_version, **by_bytes, **(provenance or {})})
