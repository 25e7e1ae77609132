"""The conditions a measurement holds for, and which runs may be compared, averaged or priced from.

A speedup or τ is a fact about a pair *under conditions*: the temperature, the dtype, the draft length, how many
tokens were generated, on which prompts, whether the output was exact, and whether the target was one of the tiny
test models the project builds or a real checkpoint. Two runs under different conditions are two series: no
summary averages them, no "latest" replaces one by the other, and regression alerts compare only within a series.
Every such comparison uses `series_key` (or the SQL columns it names, `dashboard`/`registry.store.run_aggregates`).

What may feed pricing and `drafters launch` (`pricing_problem`): a successful run, not lossy (the drafter changed
the output, so its acceptance is not the target's), not measured on an overloaded machine (its speed is the
neighbours'); which of the eligible runs a command then chooses is its own rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from registry.domain.run import Run

TEST_MODEL = "test model"
CHECKPOINT = "checkpoint"
UNKNOWN_MODEL = "model unknown"  # a run stored before the harness recorded it


@dataclass(frozen=True)
class Conditions:
    """What a run's numbers hold for; None where the run does not say (ingested from a server, or stored before
    the field existed): unknown is its own value, never matched to a known one."""

    temperature: float | None
    dtype: str | None
    draft_length: int | None
    max_new_tokens: int | None
    prompt_sets: str | None  # the digest of the prompt sets, in order
    lossless: bool | None
    model: str  # TEST_MODEL, CHECKPOINT or UNKNOWN_MODEL
    metric_version: int

    def key(self) -> tuple[Any, ...]:
        return (self.temperature, self.dtype, self.draft_length, self.max_new_tokens, self.prompt_sets,
                self.lossless, self.model, self.metric_version)

    def label(self) -> str:
        return conditions_label(temperature=self.temperature, dtype=self.dtype, draft_length=self.draft_length,
                                max_new_tokens=self.max_new_tokens, prompt_sets=self.prompt_sets,
                                lossless=self.lossless, model=self.model, metric_version=self.metric_version)


def model_kind(test_model: Any) -> str:
    """The provenance flag `test_model` (set by the harness) as a condition."""
    if test_model is None:
        return UNKNOWN_MODEL
    return TEST_MODEL if test_model else CHECKPOINT


def conditions_of(run: Run) -> Conditions:
    settings = run.settings
    provenance = run.provenance or {}
    digest = provenance.get("prompt_sets_digest") or (run.overall.digest if run.overall is not None else None)
    return Conditions(
        temperature=settings.temperature if settings is not None else provenance.get("temperature"),
        dtype=settings.dtype if settings is not None else provenance.get("dtype"),
        draft_length=run.draft_length,
        max_new_tokens=settings.max_new_tokens if settings is not None else provenance.get("max_new_tokens"),
        prompt_sets=digest,
        lossless=run.lossless,
        model=model_kind(provenance.get("test_model")),
        metric_version=run.metric_version,
    )


def series_key(run: Run) -> tuple[Any, ...]:
    """The series a run belongs to: its pair, method, engine and hardware, and every condition."""
    return (run.target, run.drafter, run.method, run.engine, run.hardware, *conditions_of(run).key())


def comparable(a: Run, b: Run) -> bool:
    """Whether two runs measured the same thing: the same series (`series_key`)."""
    return series_key(a) == series_key(b)


def contended(provenance: dict[str, Any] | None) -> bool:
    """Whether the harness flagged the machine as overloaded while the run was measured."""
    load = (provenance or {}).get("machine_load")
    return bool(isinstance(load, dict) and load.get("contended"))


def pricing_problem(run: Run) -> str | None:
    """Why `run` must not feed pricing or `drafters launch` (calibration, acceptance, draft length); None when it
    may. The one rule every reader of runs for pricing calls (registry.calibration, launch_inputs)."""
    if run.status != "ok":
        return "the run failed"
    if run.lossless is False:
        return "the run was not lossless: its acceptance is not the target's"
    if contended(run.provenance):
        return "measured on an overloaded machine: its speed is unreliable"
    return None


def conditions_label(*, temperature: float | None, dtype: str | None, draft_length: int | None,
                     max_new_tokens: int | None, prompt_sets: str | None, lossless: bool | None, model: str,
                     metric_version: int | None) -> str:
    """One line naming the conditions, e.g. "T=0 · bfloat16 · γ=4 · 512 new tokens · prompts 1a2b3c4d · lossless ·
    checkpoint · metrics v2"; "dtype ?" and so on where the run does not say."""
    exactness = "lossless" if lossless else "lossy" if lossless is False else "exactness unchecked"
    parts = [
        "T ?" if temperature is None else f"T={temperature:g}",
        "dtype ?" if dtype is None else str(dtype),
        "γ ?" if draft_length is None else f"γ={draft_length}",
        "new tokens ?" if max_new_tokens is None else f"{max_new_tokens} new tokens",
        "prompts ?" if prompt_sets is None else f"prompts {str(prompt_sets)[:8]}",
        exactness,
        model,
        "metrics ?" if metric_version is None else f"metrics v{metric_version}",
    ]
    return " · ".join(parts)
