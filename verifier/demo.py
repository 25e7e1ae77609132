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

from registry.store import Store
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


def build_demo_models(cache_root: Path, say: Callable[[str], None] = lambda _line: None) -> DemoModels:
    from verifier.tiny.dflash import cached_dflash_drafter
    from verifier.tiny.eagle3 import cached_eagle3_head
    from verifier.tiny.gemma4 import cached_gemma4_assistant, cached_gemma4_target
    from verifier.tiny.qwen3 import cached_draft_lm, cached_target

    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the service's output is one line per fact
    say(f"building the tiny demo models in {cache_root} (once: a few minutes each on a CPU, then reused)")
    built: dict[str, Path] = {}
    steps: list[tuple[str, str, Callable[[], Path]]] = [
        ("qwen3_target", "Qwen3 target", lambda: cached_target(cache_root)),
        ("qwen3_draft_lm", "Qwen3 draft LM", lambda: cached_draft_lm(cache_root, built["qwen3_target"], trained=True)),
        ("qwen3_dflash", "Qwen3 DFlash drafter",
         lambda: cached_dflash_drafter(cache_root, built["qwen3_target"], trained=True)),
        ("qwen3_eagle3", "Qwen3 EAGLE-3 head",
         lambda: cached_eagle3_head(cache_root, built["qwen3_target"], trained=True)),
        ("gemma4_target", "Gemma-4 target", lambda: cached_gemma4_target(cache_root)),
        ("gemma4_assistant", "Gemma-4 assistant drafter",
         lambda: cached_gemma4_assistant(cache_root, built["gemma4_target"], trained=True)),
        ("gemma4_dflash", "Gemma-4 DFlash drafter",
         lambda: cached_dflash_drafter(cache_root, built["gemma4_target"], trained=True)),
    ]
    for number, (field, label, build) in enumerate(steps, start=1):
        started = time.monotonic()
        built[field] = build()
        seconds = time.monotonic() - started
        # A cached model is found in well under a second; a build trains for minutes.
        say(f"demo model {number} of {len(steps)}, {label}: " + (f"built in {seconds:.0f} s" if seconds >= 1 else "cached"))
    return DemoModels(**built)


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
                          settings={"max_new_tokens": max_new_tokens, "repeats": repeats, "warmup": 1}),
        )
        for method, target, drafter in pairs
    ]


def enqueue_demo(store: Store, cache_root: Path, say: Callable[[str], None] = lambda _line: None, *,
                 max_new_tokens: int = 48, repeats: int = 3) -> int:
    """Build the demo models and queue one verification job per pair; returns how many were new."""
    models = build_demo_models(cache_root, say)
    requests = demo_requests(models, max_new_tokens=max_new_tokens, repeats=repeats)
    return sum(enqueue(store, request, dedupe_key=key) is not None for key, request in requests)
