"""What a pair's measured speedup curves say where the drafter is chosen (`drafters find`, `drafters launch`, the
API): "pays up to c≈8 on H100 SXM (vLLM 0.11.0, 512 new tokens, prompts coding, T=0)", or "not measured at
concurrency > 1".

A curve speaks for a GPU class only when it was measured on that class (its hardware string names a catalog GPU,
`registry.domain.gpus.find_gpu`) with real models. A curve from the tiny test models or from a CPU (or any device
the catalog does not name) is shown labelled as such and never stands for a launch on a GPU: a CPU run of tiny models
says nothing about serving a real checkpoint. Nothing here guesses: with no curve the answer is "not measured".
Reads only (the read-only API calls it); choosing a drafter or a draft length never reads a curve.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from registry.domain.curve import SpeedupCurve
from registry.domain.gpus import Gpu, find_gpu, load_gpus
from registry.store import Store

NOT_MEASURED = "not measured at concurrency > 1"
TEST_MODELS = "tiny test models"


@cache
def _gpus() -> tuple[Gpu, ...]:
    return load_gpus()


@dataclass(frozen=True)
class CurveFact:
    """One stored curve as find/launch/the API show it."""

    curve_id: int | None
    engine: str
    engine_version: str | None
    hardware: str | None
    gpu_class: str | None  # the catalog GPU class its hardware names; None: a CPU or unnamed hardware
    max_new_tokens: int
    prompt_set: str
    temperature: float
    lowest: int
    highest: int
    pays_up_to: int | None  # the highest level below the crossover; None: not even at the lowest level
    crossover: int | None  # the first level where it stops paying; None: it pays at every measured level
    stand_in: str | None  # why it says nothing about serving on a GPU (tiny test models, a CPU); None: it may
    text: str

    def as_json(self) -> dict[str, object]:
        return {"curve_id": self.curve_id, "engine": self.engine, "engine_version": self.engine_version,
                "hardware": self.hardware, "gpu_class": self.gpu_class, "max_new_tokens": self.max_new_tokens,
                "prompt_set": self.prompt_set, "temperature": self.temperature,
                "concurrency_measured": [self.lowest, self.highest], "pays_up_to": self.pays_up_to,
                "crossover": self.crossover, "stand_in": self.stand_in, "text": self.text}


@dataclass(frozen=True)
class Concurrency:
    """The one line for a pair on the GPU class (and engine) asked, and every curve it was read from."""

    text: str
    measured: bool  # a real-model curve on the GPU class asked (and engine, when one is asked) exists
    curves: tuple[CurveFact, ...]

    def as_json(self) -> dict[str, object]:
        return {"text": self.text, "measured": self.measured, "curves": [c.as_json() for c in self.curves]}


def stand_in(curve: SpeedupCurve) -> str | None:
    """Why `curve` cannot speak for serving on a GPU; None when it can. The harness's `test_model` flag in the
    provenance marks the tiny models; a hardware string that names no catalog GPU class is a CPU or unknown."""
    if curve.provenance.get("test_model"):
        return f"{TEST_MODELS} on {curve.hardware or 'unnamed hardware'}"
    if find_gpu(_gpus(), curve.hardware or "") is None:
        return f"{curve.hardware or 'unnamed hardware'}: a CPU or a device that names no GPU class"
    return None


def curve_fact(curve: SpeedupCurve) -> CurveFact:
    gpu = find_gpu(_gpus(), curve.hardware or "")
    levels = [p.concurrency for p in curve.points]
    conditions = curve.conditions
    engine = f"{curve.engine} {curve.engine_version}" if curve.engine_version else curve.engine
    where = f"{curve.hardware or 'unnamed hardware'} ({engine}, {conditions.max_new_tokens} new tokens, prompts " \
            f"{conditions.prompt_set}, T={conditions.temperature:g})"
    if curve.crossover is None:
        said = f"pays at every measured concurrency up to c={max(levels)} on {where}"
    elif curve.pays_up_to is None:
        said = f"does not pay even at c={min(levels)} on {where}"
    else:
        said = f"pays up to c≈{curve.pays_up_to} on {where}; from c={curve.crossover} it is a slowdown"
    label = stand_in(curve)
    if label is not None:
        said += f" [{label}: says nothing about serving on a GPU]"
    return CurveFact(
        curve_id=curve.curve_id, engine=curve.engine, engine_version=curve.engine_version, hardware=curve.hardware,
        gpu_class=gpu.name if gpu is not None and label is None else None, max_new_tokens=conditions.max_new_tokens,
        prompt_set=conditions.prompt_set, temperature=conditions.temperature, lowest=min(levels),
        highest=max(levels), pays_up_to=curve.pays_up_to, crossover=curve.crossover, stand_in=label, text=said)


def concurrency_for(curves: Sequence[SpeedupCurve], gpu: Gpu | None, engine: str | None = None) -> Concurrency:
    """`curves`: one pair's, newest first. The text is the newest real curve per length on `gpu` (and `engine`,
    the stored engine name, when given); else "not measured at concurrency > 1 on GPU", naming what else exists."""
    facts = [curve_fact(c) for c in curves if c.points]
    speaking = [f for f in facts if f.stand_in is None and (gpu is None or f.gpu_class == gpu.name)
                and (engine is None or f.engine == engine)]
    newest: dict[int, CurveFact] = {}
    for fact in speaking:  # newest first: the first of each length stands
        newest.setdefault(fact.max_new_tokens, fact)
    if newest:
        return Concurrency("; ".join(newest[length].text for length in sorted(newest)), True, tuple(facts))
    where = "".join([f" on {gpu.name}" if gpu is not None else "", f" with {engine}" if engine else ""])
    text = NOT_MEASURED + where
    others = [f for f in facts if f.stand_in is None]
    if others:
        text += "; measured on " + ", ".join(sorted({f"{f.hardware} ({f.engine})" for f in others}))
    elif facts:
        text += "; only curves from " + ", ".join(sorted({f.stand_in or "" for f in facts})) + \
            ", which say nothing about a GPU"
    return Concurrency(text, False, tuple(facts))


def target_curves(store: Store, target: str) -> dict[str | None, list[SpeedupCurve]]:
    """The target's curves by drafter, newest first (one read). A built-in drafter's curve may name no drafter
    or the checkpoint itself: both are under the checkpoint's id."""
    out: dict[str | None, list[SpeedupCurve]] = defaultdict(list)
    for curve in store.curves.curves(target=target):
        out[curve.drafter if curve.drafter is not None else target].append(curve)
    return out
