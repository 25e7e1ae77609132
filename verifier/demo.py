"""The tiny demo pairs `drafters up` measures on a fresh machine: real models the project builds itself.

Five pairs: a tiny Qwen3 target with a draft LM, a DFlash drafter in z-lab's layout and an EAGLE-3 head in yuhuili's;
a tiny Gemma-4 target with its assistant drafter and with a DFlash drafter — the seed article's
DFlash-versus-assistant question in miniature. Each build is cached (a
rerun rebuilds nothing) and each job has a dedupe key, so a restarted service queues nothing twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from registry.domain.measurement import RunSettings
from registry.store import Store
from verifier.build_cache import training_steps
from verifier.jobs import VerifyRequest, enqueue

@dataclass(frozen=True)
class DemoModels:
    qwen3_target: Path
    qwen3_draft_lm: Path
    qwen3_dflash: Path
    qwen3_eagle3: Path
    gemma4_target: Path
    gemma4_assistant: Path
    gemma4_dflash: Path


# One training step of one demo model's build: (model number, models, label, step, steps).
StepReport = Callable[[int, int, str, int, int], None]


@dataclass(frozen=True)
class BuildStep:
    field: str
    label: str
    training_steps: int  # the optimizer steps its build takes (its builder's default schedule)
    build: Callable[[], Path]


def quarter_lines(say: Callable[[str], None]) -> StepReport:
    """Training progress as plain lines at a rate a log can take: each model at 25, 50, 75 and 100 % of its steps."""
    def report(number: int, models: int, label: str, step: int, steps: int) -> None:
        if steps and step * 4 // steps > (step - 1) * 4 // steps:
            say(f"demo model {number} of {models}, {label}: training step {step} of {steps}")
    return report


def build_each(steps: list[BuildStep], say: Callable[[str], None], on_step: StepReport | None = None,
               built: dict[str, Path] | None = None) -> dict[str, Path]:
    """Each step in order, said as it goes: its training steps (`on_step`, default `quarter_lines(say)`), then
    "built in N s" or "cached". `built` is filled as it goes (a later step's builder reads an earlier result)."""
    built = {} if built is None else built
    report = on_step or quarter_lines(say)
    for number, step in enumerate(steps, start=1):
        started = time.monotonic()
        with training_steps(lambda done: report(number, len(steps), step.label, done, step.training_steps)):
            built[step.field] = step.build()
        seconds = time.monotonic() - started
        # A cached model is found in well under a second; a build trains for minutes.
        say(f"demo model {number} of {len(steps)}, {step.label}: "
            + (f"built in {seconds:.0f} s" if seconds >= 1 else "cached"))
    return built


def build_demo_models(cache_root: Path, say: Callable[[str], None] = lambda _line: None,
                      on_step: StepReport | None = None) -> DemoModels:
    from verifier.tiny.dflash import DrafterTraining, cached_dflash_drafter
    from verifier.tiny.eagle3 import HeadTraining, cached_eagle3_head
    from verifier.tiny.gemma4 import ASSISTANT_TRAINING, TARGET_TRAINING, cached_gemma4_assistant, cached_gemma4_target
    from verifier.tiny.qwen3 import Training, cached_draft_lm, cached_target

    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the service's output is one line per fact
    say(f"building the tiny demo models in {cache_root} (once: a few minutes each on a CPU, then reused)")
    built: dict[str, Path] = {}
    # The training steps are the builders' own default schedules (what the cached builds are keyed by).
    dflash_steps = DrafterTraining().schedule.steps
    steps = [
        BuildStep("qwen3_target", "Qwen3 target", Training().steps, lambda: cached_target(cache_root)),
        BuildStep("qwen3_draft_lm", "Qwen3 draft LM", Training(seed=1).steps,
                  lambda: cached_draft_lm(cache_root, built["qwen3_target"], trained=True)),
        BuildStep("qwen3_dflash", "Qwen3 DFlash drafter", dflash_steps,
                  lambda: cached_dflash_drafter(cache_root, built["qwen3_target"], trained=True)),
        BuildStep("qwen3_eagle3", "Qwen3 EAGLE-3 head", HeadTraining().schedule.steps,
                  lambda: cached_eagle3_head(cache_root, built["qwen3_target"], trained=True)),
        BuildStep("gemma4_target", "Gemma-4 target", TARGET_TRAINING.steps, lambda: cached_gemma4_target(cache_root)),
        BuildStep("gemma4_assistant", "Gemma-4 assistant drafter", ASSISTANT_TRAINING.steps,
                  lambda: cached_gemma4_assistant(cache_root, built["gemma4_target"], trained=True)),
        BuildStep("gemma4_dflash", "Gemma-4 DFlash drafter", dflash_steps,
                  lambda: cached_dflash_drafter(cache_root, built["gemma4_target"], trained=True)),
    ]
    return DemoModels(**build_each(steps, say, on_step, built))


def demo_requests(models: DemoModels, *, max_new_tokens: int = 48, repeats: int = 3) -> list[tuple[str, VerifyRequest]]:
    pairs = [
        ("draft-lm", models.qwen3_target, models.qwen3_draft_lm),
        ("dflash", models.qwen3_target, models.qwen3_dflash),
        ("eagle3", models.qwen3_target, models.qwen3_eagle3),
        # The seed article's question: a DFlash drafter against Gemma's own assistant on one Gemma-4 target.
        ("gemma4-assistant", models.gemma4_target, models.gemma4_assistant),
        ("dflash", models.gemma4_target, models.gemma4_dflash),
    ]
    return [
        (
            f"demo:{method}:{drafter.name}",
            VerifyRequest(target=str(target), drafter=str(drafter),
                          settings=RunSettings(max_new_tokens=max_new_tokens, repeats=repeats, warmup=1)),
        )
        for method, target, drafter in pairs
    ]


def enqueue_demo(store: Store, cache_root: Path, say: Callable[[str], None] = lambda _line: None, *,
                 max_new_tokens: int = 48, repeats: int = 3, on_step: StepReport | None = None) -> int:
    """Build the demo models and queue one verification job per pair; returns how many were new."""
    models = build_demo_models(cache_root, say, on_step)
    requests = demo_requests(models, max_new_tokens=max_new_tokens, repeats=repeats)
    return sum(enqueue(store, request, dedupe_key=key) is not None for key, request in requests)
