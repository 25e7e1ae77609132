"""The tiny demo pairs `drafters up` measures on a fresh machine: real models the project builds itself.

A tiny Qwen3 target with a draft LM, a DFlash drafter in z-lab's layout and an EAGLE-3 head in yuhuili's, and a tiny Gemma-4 target with its
assistant drafter — the seed article's DFlash-versus-assistant question in miniature. Each build is cached (a
rerun rebuilds nothing) and each job has a dedupe key, so a restarted service queues nothing twice.
"""

from __future__ import annotations

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
    say(f"building the tiny demo models in {cache_root} (a few minutes on a CPU, once)")
    qwen3 = cached_target(cache_root)
    gemma4 = cached_gemma4_target(cache_root)
    return DemoModels(
        qwen3_target=qwen3,
        qwen3_draft_lm=cached_draft_lm(cache_root, qwen3, trained=True),
        qwen3_dflash=cached_dflash_drafter(cache_root, qwen3, trained=True),
        qwen3_eagle3=cached_eagle3_head(cache_root, qwen3, trained=True),
        gemma4_target=gemma4,
        gemma4_assistant=cached_gemma4_assistant(cache_root, gemma4, trained=True),
        gemma4_dflash=cached_dflash_drafter(cache_root, gemma4, trained=True),
    )


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
