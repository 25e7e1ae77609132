"""What a running inference server says about itself and does for a probe: the engine behind a URL (llama.cpp
`/props` and `/slots`, SGLang `/get_server_info`, vLLM `/version` and `/v1/models`), the model it serves (for
llama.cpp also the sha256 of the served GGUF, when it is on this machine), and a probe's own speculative counts:
the server's counters read before and after the probe's prompts (llama.cpp and vLLM `/metrics`), or per request
(SGLang's `meta_info.completion_tokens` / `spec_verify_ct`, python/sglang/srt/managers/tokenizer_manager.py in
sgl-project/sglang), so other clients' traffic does not count.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from registry.domain.engines import SERVER_KINDS
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

# Two kinds of prompt, since τ depends on the kind (code drafts well, chat less): the first prompts of each.
DEFAULT_PROBE_SETS = ("code", "chat")
DEFAULT_PROBE_PROMPTS = 3
# Hashing a served GGUF identifies it by its bytes; beyond this size it costs more than a probe and is skipped.
HASH_LIMIT_BYTES = 8 * 2**30


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


def open_client(api_key: str | None, timeout_s: float) -> httpx.Client:
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
                  method=llamacpp_method(client, url), notes=tuple(notes))


def llamacpp_method(client: httpx.Client, url: str) -> str | None:
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


@dataclass(frozen=True)
class Completion:
    output_tokens: int
    verify_steps: int  # SGLang's per-request count of verify steps; 0 elsewhere (their counters are in /metrics)
    seconds: float
    # llama.cpp: this request's own draft counts from the slot that served it (`timings.draft_n` /
    # `draft_n_accepted`); None where the engine reports none per request.
    drafted: int | None = None
    accepted: int | None = None


def _slot_counts(answer: Any) -> tuple[int | None, int | None]:
    timings = answer.get("timings") if isinstance(answer, dict) else None
    if not isinstance(timings, dict):
        return None, None
    drafted, accepted = timings.get("draft_n"), timings.get("draft_n_accepted")
    if isinstance(drafted, int) and isinstance(accepted, int) and not isinstance(drafted, bool):
        return drafted, accepted
    return None, None


def complete(client: httpx.Client, url: str, served: Served, text: str, max_new_tokens: int) -> Completion:
    """One request at temperature 0, through the engine's own completion route (no chat template of ours)."""
    started = time.perf_counter()
    if served.kind == "llamacpp":
        answer = _post_json(client, url, "/completion", {
            "prompt": text, "n_predict": max_new_tokens, "temperature": 0.0, "cache_prompt": False, "stream": False})
        return Completion(int((answer.get("timings") or {}).get("predicted_n") or 0), 0, time.perf_counter() - started,
                          *_slot_counts(answer))
    if served.kind == "vllm":
        answer = _post_json(client, url, "/v1/completions", {
            "model": served.model, "prompt": text, "max_tokens": max_new_tokens, "temperature": 0.0})
        return Completion(int((answer.get("usage") or {}).get("completion_tokens") or 0), 0,
                          time.perf_counter() - started)
    answer = _post_json(client, url, "/generate", {
        "text": text, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0}})
    meta = answer.get("meta_info") or {}
    return Completion(int(meta.get("completion_tokens") or 0), int(meta.get("spec_verify_ct") or 0),
                      time.perf_counter() - started)


def chat_messages(prompt: Prompt) -> list[dict[str, str]]:
    """The prompt as a conversation: its messages, or a raw `prompt` line as one user message."""
    if prompt.messages is not None:
        return [{"role": m.role, "content": m.content} for m in prompt.messages]
    return [{"role": "user", "content": prompt.text or ""}]


def _chat(client: httpx.Client, url: str, served: Served, prompt: Prompt, max_new_tokens: int,
          thinking: bool) -> dict[str, Any]:
    """One chat request at temperature 0 through the OpenAI-compatible chat route; the switch reaches the served
    template as `chat_template_kwargs.enable_thinking`, which llama-server (`--chat-template-kwargs`, per request
    in ggml-org/llama.cpp tools/server/README.md), vLLM and SGLang all pass to the template."""
    body: dict[str, Any] = {"messages": chat_messages(prompt), "max_tokens": max_new_tokens, "temperature": 0.0,
                            "stream": False, "chat_template_kwargs": {"enable_thinking": thinking}}
    if served.model is not None and served.kind != "llamacpp":
        body["model"] = served.model
    if served.kind == "llamacpp":
        body["cache_prompt"] = False  # every request prefills its whole prompt, as on the raw route
    answer = _post_json(client, url, "/v1/chat/completions", body)
    if not isinstance(answer, dict) or not isinstance(answer.get("usage"), dict):
        raise ServerReadError(f"{public_url(url)}/v1/chat/completions answered no usage: its tokens cannot be counted")
    return answer


def chat_complete(client: httpx.Client, url: str, served: Served, prompt: Prompt, max_new_tokens: int,
                  thinking: bool) -> Completion:
    """One chat request; its output tokens from `usage.completion_tokens` (the chat route reports no SGLang verify
    steps, so an SGLang chat sweep has no τ)."""
    started = time.perf_counter()
    answer = _chat(client, url, served, prompt, max_new_tokens, thinking)
    return Completion(int(answer["usage"].get("completion_tokens") or 0), 0, time.perf_counter() - started,
                      *_slot_counts(answer))


def thinking_switch(client: httpx.Client, url: str, served: Served, prompt: Prompt) -> tuple[bool, str]:
    """Whether the served chat template reads `enable_thinking`: the same prompt sent with it on and off (one
    token each) must render to different prompt token counts. (True, how it was seen) or (False, why unknown)."""
    counts = []
    for thinking in (True, False):
        usage = _chat(client, url, served, prompt, 1, thinking)["usage"]
        counts.append(usage.get("prompt_tokens"))
    if not all(isinstance(c, int) for c in counts):
        return False, "thinking unknown: the server reports no usage.prompt_tokens to see the switch by"
    if counts[0] == counts[1]:
        return False, (f"thinking unknown: the served chat template ignores enable_thinking (the same {counts[0]} "
                       "prompt tokens with it on and off)")
    return True, f"enable_thinking read by the served template ({counts[0]} prompt tokens on, {counts[1]} off)"


def read_counters(client: httpx.Client, url: str, served: Served) -> SpecCounters | None:
    """The speculative counters since boot (none exported: nothing drafted); None where the engine counts per
    request instead (SGLang)."""
    prefix = {"llamacpp": LLAMACPP_PREFIX, "vllm": VLLM_PREFIX}.get(served.kind)
    if prefix is None:
        return None
    return _metrics(client, url, prefix) or NO_COUNTS


def measured(completions: Sequence[Completion], before: SpecCounters | None, after: SpecCounters | None,
             seconds: float) -> Probe:
    """What speculation did for these completions alone: the counters' difference, or SGLang's per-request steps."""
    output = sum(c.output_tokens for c in completions)
    if before is not None and after is not None:
        delta = after.minus(before)
        acceptance = counter_acceptance(delta)
        return Probe(len(completions), output, seconds, delta, acceptance, acceptance.tau if acceptance else None,
                     delta.drafts)
    # SGLang: every verify step emits its accepted drafts and one token of its own (its accept length).
    steps = sum(c.verify_steps for c in completions)
    return Probe(len(completions), output, seconds, None, None, output / steps if steps else None, steps)


def probe(client: httpx.Client, url: str, served: Served, prompts: Sequence[Prompt], *,
          max_new_tokens: int, on_prompt: Callable[[int, int], None] | None = None) -> Probe:
    """Send `prompts` one after another at temperature 0 and measure what speculation did for them alone."""
    started = time.perf_counter()
    before = read_counters(client, url, served)
    completions = []
    for index, prompt in enumerate(prompts):
        completions.append(complete(client, url, served, prompt_text(prompt), max_new_tokens))
        if on_prompt is not None:
            on_prompt(index + 1, len(prompts))
    seconds = time.perf_counter() - started
    return measured(completions, before, read_counters(client, url, served), seconds)
