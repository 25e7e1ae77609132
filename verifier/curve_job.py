"""A speedup curve the verifier measures itself: a (target, drafter) pair on llama.cpp at several concurrencies,
generation lengths and thinking modes, as a queued job like any other (`drafters verify ... --concurrency`).

The pair is converted as for `drafters verify --engine llamacpp`, then two llama-servers start side by side, the
target alone and the target with its drafter, each with one parallel slot (`-np`) per client of the highest
concurrency and a context of one slot's worth per slot, so no level queues behind too few slots. The sweep of
`drafters sweep` (`verifier.sweep`) then drives both with the same closed-loop load, reading the speculative
server's `/metrics` draft counters around each level, and each (length, thinking mode) is stored as one curve with
the engine's version and the device. Prompts go as conversations through the servers' chat route, rendered by the
GGUF's own chat template; thinking is recorded only where that template reads `enable_thinking`.

The PyTorch engine decodes one request at a time: it measures batch 1 only, so a curve is a llama.cpp job.

A job that stops part way (its worker died, its lease lapsed) keeps the curves it stored; its retry measures only
the ones missing, so a rerun converges with one curve per (length, thinking mode).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from registry.domain.curve import CurvePoint, SpeedupCurve
from registry.domain.engines import VERIFIER_ENGINES
from registry.domain.measurement import RunSettings
from registry.domain.stored_json import from_json, to_json
from registry.store import Store
from verifier.engines.llamacpp.engine import load_llamacpp_engine
from verifier.harness.pair_check import check_pair
from verifier.harness.provenance import is_test_model
from verifier.prompts import BUNDLED_SET_NAMES, Prompt, PromptSet, bundled_set, load_prompt_file
from verifier.sweep import DEFAULT_MAX_NEW_TOKENS, measure_sweep

CURVE = "curve"
CURVE_ENGINE = "llamacpp"
BATCH_ONE_ONLY = ("the PyTorch engine decodes one request at a time: it measures batch 1 only. A speedup curve "
                  "over concurrency is measured on llama.cpp (--engine llamacpp, parallel slots), or by `drafters "
                  "sweep` against a server that batches (vLLM, SGLang, llama-server -np N)")
DEFAULT_CURVE_CONCURRENCY = (1, 2, 4, 8)
JOB_SERVERS = {"speculative": "llama-server of the curve job (target + drafter)",
               "baseline": "llama-server of the curve job (target alone)"}
# Tokens a chat template may add for a thinking mode (Qwen3's empty think block), beyond the prompt as encoded here.
TEMPLATE_MARGIN_TOKENS = 32


class CurveFailed(RuntimeError):
    """The pair cannot be measured as a curve (a refusal, a server that will not start): said in one line.
    `retry`: whether another attempt could succeed (the cause was transient)."""

    def __init__(self, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass(frozen=True)
class CurveRequest:
    """What to measure: the pair (folders, repo ids in the local Hub cache, or a drafter .gguf), the levels, the
    generation lengths and thinking modes (one curve per length and mode), the prompts, and the run settings the
    pair is loaded under (method, draft_length, device, dtype, seed; the lengths and thinking modes are the
    request's own)."""

    target: str
    drafter: str
    target_revision: str | None = None
    drafter_revision: str | None = None
    concurrency: tuple[int, ...] = DEFAULT_CURVE_CONCURRENCY
    lengths: tuple[int, ...] = (DEFAULT_MAX_NEW_TOKENS,)
    thinking: tuple[bool, ...] = (False,)
    prompt_sets: tuple[str, ...] = BUNDLED_SET_NAMES
    prompt_files: tuple[str, ...] = ()
    requests_per_level: int | None = None
    settings: RunSettings = field(default_factory=RunSettings)
    engine: str = CURVE_ENGINE

    def __post_init__(self) -> None:
        if self.engine != CURVE_ENGINE:
            raise ValueError(BATCH_ONE_ONLY)
        for name, values in (("concurrency", self.concurrency), ("lengths", self.lengths)):
            if not values or min(values) < 1:
                raise ValueError(f"a curve needs positive {name}, got {list(values)}")
        if not self.thinking:
            raise ValueError("a curve needs at least one thinking mode")
        if not self.prompt_sets and not self.prompt_files:
            raise ValueError("a curve needs prompts: a bundled set or a prompt file")

    @property
    def parts(self) -> list[tuple[int, bool]]:
        """(length, thinking) of each curve, in the order they are measured."""
        return [(length, thinking) for thinking in self.thinking for length in sorted(set(self.lengths))]

    def to_payload(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> CurveRequest:
        """The request a payload holds, its settings typed again (the one place stored JSON becomes them)."""
        return from_json(cls, payload)


def curve_prompts(request: CurveRequest) -> PromptSet:
    """The request's prompt sets as one, interleaved (the first prompt of each set, then the second, ...), so even
    a level of few requests mixes the kinds of prompt."""
    sets = [bundled_set(name) for name in request.prompt_sets]
    sets += [load_prompt_file(Path(p)) for p in request.prompt_files]
    mixed: list[Prompt] = []
    for index in range(max(len(s.prompts) for s in sets)):
        mixed += [s.prompts[index] for s in sets if index < len(s.prompts)]
    return PromptSet(name="+".join(s.name for s in sets), prompts=tuple(mixed))


def _part(curve: SpeedupCurve) -> tuple[int, Any]:
    return curve.conditions.max_new_tokens, curve.provenance.get("thinking_asked")


def run_curve(store: Store, request: CurveRequest, target_dir: Path, drafter: Path, *, job_id: int | None = None,
              check: Callable[[], None] = lambda: None, confirm: Callable[[], None] = lambda: None,
              progress: Callable[[int, int, str], None] | None = None) -> list[SpeedupCurve]:
    """Measure and store each curve the job has not stored yet; all its curves, in `request.parts` order.
    `check` runs before each level (a lost lease stops the job), `confirm` right before each curve is stored."""
    stored = {_part(c): c for c in store.curves.curves(job_id=job_id)} if job_id is not None else {}
    todo = [part for part in request.parts if part not in stored]
    if todo:
        stored.update(_measure(store, request, target_dir, drafter, todo, job_id=job_id, check=check,
                               confirm=confirm, progress=progress))
    return [stored[part] for part in request.parts]


def _measure(store: Store, request: CurveRequest, target_dir: Path, drafter: Path, todo: Sequence[tuple[int, bool]],
             *, job_id: int | None, check: Callable[[], None], confirm: Callable[[], None],
             progress: Callable[[int, int, str], None] | None) -> dict[tuple[int, bool], SpeedupCurve]:
    longest_new = max(length for length, _ in todo)
    settings = replace(request.settings, max_new_tokens=longest_new)
    # The harness's pre-check, before llama-server is looked for or a weight converted (a curve runs no harness loop).
    engine = load_llamacpp_engine(check_pair(target_dir, drafter, settings.method), settings)
    if engine.draft is None:
        raise CurveFailed("a curve needs a drafter that llama-server drafts with")
    prompts = curve_prompts(request)
    slots = max(request.concurrency)
    longest = max(len(engine.encode(p)) for p in prompts.prompts) + TEMPLATE_MARGIN_TOKENS
    per_slot = -(-(longest + longest_new + engine.draft_length + 16) // 256) * 256
    # The slots come last among the extra arguments: the last -np wins over the server's own and the user's.
    engine.options = replace(engine.options, extra_args=(*engine.options.extra_args, "-np", str(slots)))
    levels = sorted(set(request.concurrency))
    total, done = len(todo) * len(levels), 0
    measured: dict[tuple[int, bool], SpeedupCurve] = {}
    with tempfile.TemporaryDirectory(prefix="drafters-curve-") as logs, engine.serving(per_slot * slots, Path(logs)):
        base, spec = engine.server(speculative=False), engine.server(speculative=True)
        facts = engine.report().provenance
        for length, thinking in todo:
            def on_level(_number: int, _levels: int, point: CurvePoint, length: int = length) -> None:
                nonlocal done
                done += 1
                if progress is not None:
                    progress(done, total, f"{length} tokens, c={point.concurrency}: {point.speedup:.2f}×")
                check()

            check()
            curve = measure_sweep(
                store, spec.url, base.url, concurrency=levels, prompt_set=prompts, max_new_tokens=length,
                requests_per_level=request.requests_per_level, target=request.target, drafter=request.drafter,
                hardware=engine.device_name, kind="llamacpp", api_key=spec.api_key, baseline_api_key=base.api_key,
                thinking=thinking, engine_version=engine.binary.label, job_id=job_id, on_level=on_level,
                provenance={
                    "source": "curve job", "thinking_asked": thinking, "slots": slots, "ctx_size_per_slot": per_slot,
                    "batch": "llama-server continuous batching over parallel slots",
                    # The server's draft length (what pricing predicts the curve with), and whether the target is
                    # one of the project's tiny builds: such a curve never speaks for serving a real checkpoint.
                    "draft_length": engine.draft_length, "test_model": is_test_model(target_dir),
                    **{key: facts.get(key) for key in ("target_sha", "drafter_sha", "target_files_digest",
                                                       "drafter_files_digest", "gguf", "quantization", "spec_type",
                                                       "draft_parameters", "backend", "threads",
                                                       "llama_cpp_build")}})
            # The servers' loopback ports are gone with them: the conditions say who ran them instead.
            curve = replace(curve, conditions=replace(curve.conditions, url=JOB_SERVERS["speculative"],
                                                      baseline_url=JOB_SERVERS["baseline"]))
            confirm()
            measured[(length, thinking)] = store.curves.record_curve(curve)
    return measured


def curve_engine() -> str:
    """The engine a curve job needs, as the queue names engines (so a worker without llama.cpp never claims it)."""
    return VERIFIER_ENGINES[CURVE_ENGINE]
