"""The PyTorch engine: one loaded (target, drafter) pair that generates one prompt at a time for the harness.

Baseline and speculative decoding share one loop (`verifier.decode`) and one token accounting; the harness
(`verifier.harness.run`) owns repeats, prompt sets, seeds, lossless checking, summaries and the common provenance.
`run_pair` is the PyTorch engine driven by the harness.
"""

from __future__ import annotations

import copy
import math
import platform
import resource
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from verifier.decode import (
    DecodeResult,
    accept_greedy,
    accept_sampled,
    decode,
    new_cache,
    synchronize,
    transformers_problem,
)
from verifier.folders import LoadError, files_digest
from verifier.harness import run
from registry.domain.measurement import AUTO_DTYPE, DIVERGED, TIE, Divergence, RunSettings, dtype_for
from registry.domain.run import Run
from verifier.harness.contract import (
    EngineReport,
    Generation,
    IncompatiblePair,
    Progress,
    first_divergence,
)
from verifier.harness.pair_check import CheckedPair
from verifier.harness.provenance import snapshot_sha
from verifier.loading import LoadedTarget, load_target, resolve_device
from registry.domain.measurement import ForwardCosts
from verifier.metrics import StepCounts
from verifier.prompts import PromptSet, encode_prompt
from verifier.methods import build_proposer
from verifier.proposer import NoDraft, Proposer, TargetOutput

# Callers of `run_pair` get the contract names they need alongside it from here.
__all__ = ["IncompatiblePair", "Run", "RunSettings", "TorchEngine", "run_pair"]


class TorchEngine:
    """A target and its drafter (or none) loaded in PyTorch; generates one prompt at a time through the one loop."""

    name = "pytorch"

    def __init__(self, target: LoadedTarget, checked: CheckedPair, method: str | None,
                 proposer: Proposer | None, settings: RunSettings) -> None:
        self.target = target
        self.checked = checked
        self.drafter = checked.drafter if proposer is not None else None
        self.drafter_dir = self.drafter.path if self.drafter is not None else None
        self.method = method
        self.proposer = proposer
        self.settings = settings
        self.device = target.device
        self.eos_ids = _eos_token_ids(target)
        self._float32: Any = None
        self._rss_reset = False  # whether the process's peak resident memory was reset when the run began

    @classmethod
    def load(cls, checked: CheckedPair, settings: RunSettings) -> TorchEngine:
        """The checked pair loaded (the harness judged it: `verifier.harness.pair_check.check_pair`), its drafter's
        config as the pre-check read it; a dtype of "auto" chosen for the device."""
        # Before a weight is loaded: an unusable transformers costs no load.
        problem = transformers_problem()
        if problem is not None:
            raise IncompatiblePair([problem])
        if checked.drafter_path is not None and checked.drafter is None:
            raise LoadError(f"{checked.drafter_path}: the PyTorch engine runs a drafter folder, not a .gguf file")
        if settings.dtype == AUTO_DTYPE:
            settings = replace(settings, dtype=dtype_for(resolve_device(settings.device).type))
        target = load_target(checked.target.path, device=settings.device, dtype=settings.dtype,
                             config=checked.target.usable_config())
        if checked.drafter is None or checked.method is None:  # (method is None only without a drafter)
            return cls(target, checked, None, None, settings)
        proposer = build_proposer(checked.method, checked.drafter.path, target, settings,
                                  checked.drafter.usable_config())
        return cls(target, checked, checked.method, proposer, settings)

    @classmethod
    @contextmanager
    def loading(cls, checked: CheckedPair, settings: RunSettings) -> Iterator[TorchEngine]:
        """`load` as the harness's `EngineLoader` (a loaded PyTorch pair holds nothing to stop)."""
        yield cls.load(checked, settings)

    @property
    def draft_length(self) -> int:
        return self.proposer.draft_length if self.proposer is not None else 0

    def encode(self, prompt: Any) -> list[int]:
        return encode_prompt(prompt, self.target.tokenizer, enable_thinking=self.settings.enable_thinking)

    def generate(self, prompt_ids: Sequence[int], *, speculative: bool, seed: int) -> Generation:
        candidate = self.proposer if speculative and self.proposer is not None else NoDraft()
        decoded = self._decode(candidate, torch.tensor(list(prompt_ids), device=self.device), seed)
        return Generation(tokens=tuple(decoded.tokens), prefill_seconds=decoded.prefill_seconds,
                          total_seconds=decoded.total_seconds, counts=StepCounts.from_rounds(decoded.rounds),
                          rounds=tuple(decoded.rounds))

    def _decode(self, candidate: Proposer, prompt: torch.Tensor, seed: int) -> DecodeResult:
        return decode(
            self.target.model,
            candidate,
            prompt,
            max_new_tokens=self.settings.max_new_tokens,
            temperature=self.settings.temperature,
            generator=torch.Generator(device=self.device).manual_seed(seed),
            eos_token_ids=self.eos_ids,
        )

    @torch.inference_mode()
    def forward_costs(self, context_ids: Sequence[int], repeats: int) -> ForwardCosts | None:
        """T(1), T(γ+1) and one drafting step, timed outside the loop on a real state at this context.

        After a prefill of the context, each repeat (one untimed warm-up first) drafts once at the run's temperature
        (T_draft), verifies the drafts in one target forward (T(γ+1)), accepts and commits as the loop does (so the
        drafter sees a real next state), and runs the target on the pending token alone (T(1)), which is then
        dropped again.
        """
        proposer = self.proposer
        if proposer is None or proposer.draft_length < 1:
            return None
        model, device = self.target.model, self.device
        temperature = self.settings.temperature
        hidden = proposer.needs_hidden_states
        ids = torch.tensor(list(context_ids), device=device)
        generator = torch.Generator(device=device).manual_seed(0)
        cache = new_cache(model, verify_width=proposer.draft_length + 1)
        out = model(input_ids=ids[None], cache=cache, use_cache=True, output_hidden_states=hidden, logits_to_keep=1)
        pending = int(torch.argmax(out.logits[0, -1]))
        proposer.begin(ids, _view(out, cache, 0, ids, pending, ids.shape[0]))
        committed_length = ids.shape[0] + 1  # the pending token is committed, not yet in the cache
        timings: dict[str, list[float]] = {"draft": [], "verify": [], "target": []}
        for attempt in range(1 + repeats):
            synchronize(device)
            started = time.perf_counter()
            # Drafted as the loop drafts at this temperature (sampling costs what it costs: at T>0 a draft LM
            # samples each token from its distribution, greedy drafting would time another computation).
            proposal = proposer.propose(temperature, generator)
            drafts = proposal.tokens.to(device=device, dtype=torch.long)
            synchronize(device)
            drafted_at = time.perf_counter()
            start = committed_length - 1
            verify_ids = torch.cat([torch.tensor([pending], device=device), drafts])
            out = model(input_ids=verify_ids[None], cache=cache, use_cache=True, output_hidden_states=hidden)
            synchronize(device)
            verified_at = time.perf_counter()
            if temperature == 0:
                n_accepted, pending = accept_greedy(out.logits[0], drafts)
            else:
                n_accepted, pending = accept_sampled(out.logits[0], proposal, drafts, temperature, generator)
            cache.crop(-(drafts.shape[0] - n_accepted))
            committed = torch.tensor([*drafts[:n_accepted].tolist(), pending], device=device)
            committed_length += n_accepted + 1
            proposer.observe(n_accepted, committed,
                             _view(out, cache, start, verify_ids[: n_accepted + 1], pending, n_accepted + 1))
            synchronize(device)
            stepped = time.perf_counter()
            model(input_ids=torch.tensor([[pending]], device=device), cache=cache, use_cache=True)
            synchronize(device)
            ended = time.perf_counter()
            cache.crop(-1)
            if attempt > 0:  # the first pass warms up shapes and allocators
                timings["draft"].append(drafted_at - started)
                timings["verify"].append(verified_at - drafted_at)
                timings["target"].append(ended - stepped)
        return ForwardCosts.from_timings(len(context_ids), proposer.draft_length, timings["target"],
                                         timings["verify"], timings["draft"])

    def divergence(self, prompt_ids: Sequence[int], baseline: Sequence[int], speculative: Sequence[int],
                   set_name: str, prompt_index: int, repeat: int) -> Divergence | None:
        found = first_divergence(baseline, speculative, set_name, prompt_index, repeat)
        if found is None:
            return None
        prompt = torch.tensor(list(prompt_ids), device=self.device)
        found = with_target_margin(found, self.target.model, prompt, baseline)
        return judge_divergence(found, self.target.model, self._float32_target(), prompt, baseline)

    def _float32_target(self) -> Any:
        """The target's weights in float32, for re-scoring a divergence (built once, on first need; the model
        itself when it runs in float32)."""
        model = self.target.model
        if next(model.parameters()).dtype == torch.float32:
            return model
        if self._float32 is None:
            try:
                self._float32 = copy.deepcopy(model).to(torch.float32)
            except torch.OutOfMemoryError:  # no room for a float32 copy beside the model: score it on the host
                torch.cuda.empty_cache()
                self._float32 = copy.deepcopy(model.to("cpu")).to(torch.float32)
                model.to(self.device)
        return self._float32

    def reset_peak_memory(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._rss_reset = reset_process_peak_rss()

    def report(self) -> EngineReport:
        peak_bytes, peak_kind = _peak_memory(self.device, self._rss_reset)
        return EngineReport(
            peak_memory_bytes=peak_bytes,
            peak_memory_kind=peak_kind,
            target_weight_bytes=self.checked.target.weight_bytes,
            drafter_weight_bytes=self.drafter.weight_bytes if self.drafter is not None else None,
            provenance=_provenance(self.target, self.drafter_dir, self.proposer),
        )


def _view(out: Any, cache: Any, start: int, input_ids: torch.Tensor, pending: int, rows: int) -> TargetOutput:
    """The proposer contract's view of a target pass (as `verifier.decode` builds it)."""
    hidden = None if out.hidden_states is None else tuple(h[:, :rows] for h in out.hidden_states)
    return TargetOutput(start=start, input_ids=input_ids, pending_token=pending, cache=cache, hidden_states=hidden)


def run_pair(
    target_dir: Path,
    drafter_dir: Path | None,
    prompt_sets: Sequence[PromptSet],
    settings: RunSettings,
    progress: Progress | None = None,
) -> Run:
    """Measure the drafter at `drafter_dir` (None: baseline only) on the target at `target_dir`."""
    return run.measure_pair(TorchEngine.loading, Path(target_dir), drafter_dir, prompt_sets, settings, progress)


def _eos_token_ids(target: LoadedTarget) -> frozenset[int]:
    ids: set[int] = set()
    generation_eos = getattr(getattr(target.model, "generation_config", None), "eos_token_id", None)
    for value in (target.tokenizer.eos_token_id, generation_eos):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return frozenset(ids)


@torch.inference_mode()
def with_target_margin(
    divergence: Divergence, model: Any, prompt_ids: torch.Tensor, baseline: Sequence[int]
) -> Divergence:
    """`divergence` with the target's logit margin at its position, from one uncached forward over
    prompt + the baseline's tokens before it; unchanged when the baseline ended there."""
    if divergence.baseline_token is None:
        return divergence
    prefix = torch.tensor(list(baseline[: divergence.position]), dtype=torch.long, device=prompt_ids.device)
    logits = model(input_ids=torch.cat([prompt_ids, prefix])[None], logits_to_keep=1).logits[0, -1].float()
    top = torch.topk(logits, 2).values
    gap = None
    if divergence.speculative_token is not None:
        gap = float(logits[divergence.baseline_token] - logits[divergence.speculative_token])
    return replace(divergence, target_logit_margin=float(top[0] - top[1]), speculative_token_gap=gap)


def ulp(value: float, dtype: torch.dtype) -> float:
    """One unit in the last place of `dtype` at the magnitude of `value` (the spacing of representable values)."""
    info = torch.finfo(dtype)  # eps: the spacing just above 1.0
    magnitude = max(abs(value), info.tiny)
    return float(2.0 ** math.floor(math.log2(magnitude)) * info.eps)


@torch.inference_mode()
def judge_divergence(divergence: Divergence, model: Any, float32_model: Any, prompt_ids: torch.Tensor,
                     baseline: Sequence[int]) -> Divergence:
    """`divergence` judged a tie or a divergence (`registry.domain.measurement.TIE_RULE`).

    At temperature 0 speculative decoding must pick the target's argmax; with rounding (bf16), the argmax of two
    tokens whose logits the dtype cannot separate is decided by the rounding of whichever pass computes it (a
    single-token step or a verify pass over several), so either token is the target's choice there. It is a tie
    when both the run's own dtype (an uncached forward on the baseline's prefix) and float32 (the same weights,
    unrounded) put the two logits within one ulp of the run's dtype; anything wider is a divergence, however small
    (a float32 run ties only at an exact float32 tie). A divergence where the baseline ended is never a tie.
    """
    if divergence.baseline_token is None or divergence.speculative_token is None:
        return replace(divergence, verdict=DIVERGED)
    dtype = next(model.parameters()).dtype
    prefix = torch.tensor(list(baseline[: divergence.position]), dtype=torch.long, device=prompt_ids.device)
    ids = torch.cat([prompt_ids, prefix])[None]
    own = model(input_ids=ids, logits_to_keep=1).logits[0, -1].float()
    device = next(float32_model.parameters()).device
    exact = float32_model(input_ids=ids.to(device), logits_to_keep=1).logits[0, -1].float()
    base, spec = divergence.baseline_token, divergence.speculative_token
    own_gap = float(own[base] - own[spec])
    exact_gap = float(exact[base] - exact[spec])
    tolerance = ulp(max(abs(float(own[base])), abs(float(own[spec]))), dtype)
    tie = abs(own_gap) <= tolerance and abs(exact_gap) <= tolerance
    return replace(divergence, verdict=TIE if tie else DIVERGED, float32_gap=exact_gap, tie_tolerance=tolerance)


PROC_SELF = Path("/proc/self")


def reset_process_peak_rss() -> bool:
    """Reset this process's peak resident memory (Linux VmHWM) to its current resident memory, so the peak read at
    the end is this run's, weights included; False where the kernel offers no reset (then the lifetime peak)."""
    try:
        (PROC_SELF / "clear_refs").write_text("5")
    except OSError:
        return False
    return _vm_hwm() is not None


def _vm_hwm() -> int | None:
    try:
        status = (PROC_SELF / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # kB
    return None


def _peak_memory(device: torch.device, rss_reset: bool) -> tuple[int, str]:
    """The run's one memory figure and what it is (registry.domain.measurement.MEMORY_KINDS)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_memory_allocated"
    peak = _vm_hwm() if rss_reset else None
    if peak is not None:
        return peak, "process_rss_peak_of_run"
    # Linux reports ru_maxrss in KiB; it is the peak of the whole process so far, not of this run alone.
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_rss_peak"


def _provenance(target: LoadedTarget, drafter_dir: Path | None, proposer: Proposer | None) -> dict[str, Any]:
    """What only the PyTorch engine knows; the harness adds the common part."""
    import transformers

    device = target.device
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})"
    return {
        "engine": "pytorch",
        "engine_version": f"torch {torch.__version__}",
        "target_sha": snapshot_sha(target.path),
        "target_files_digest": target.files_digest,
        "drafter_sha": snapshot_sha(drafter_dir) if drafter_dir else None,
        "drafter_files_digest": files_digest(drafter_dir) if drafter_dir else None,
        "block_size": getattr(proposer, "block_size", None),
        "device": device_name,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "attn_implementation": getattr(target.model.config, "_attn_implementation", None),
        "transformers_version": transformers.__version__,
    }
