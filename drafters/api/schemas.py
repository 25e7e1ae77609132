"""The shapes of the API's bodies as pydantic models: the OpenAPI document's response schemas are generated from
them, and tests/test_api.py validates every served body against those schemas.

The routes still send bytes they built themselves (drafters/api/bodies.py, cached as bytes), so a model here is
the contract, not the encoder: a body that drifts from its model fails the test. Models of this module forbid
undeclared keys; the rows that other modules own (`drafters lag` rows, events, launch entries, plan rows) are
their own dataclasses, or allow keys those modules add.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from registry.domain.records import EventRecord
from registry.reports import LagRow, UpgradeRow


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(description="the shape's version (docs/api.md); refuse one you do not know")


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """A row another module writes: its known keys are required, more may come."""

    model_config = ConfigDict(extra="allow")


class ParameterError(_Part):
    parameter: str
    reason: str


class Problem(_Body):
    """RFC 9457 problem details; `type` about:blank, `title` the status phrase, `detail` what went wrong."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[ParameterError] | None = None


class Link(_Part):
    href: str
    description: str


class Index(_Body):
    name: str
    openapi: str
    links: list[Link]


class Health(_Body):
    status: str


class Measured(_Part):
    engine: str
    engine_version: str | None
    hardware: str | None
    runs: int
    newest_run_id: str
    tau: float | None
    speedup: float | None
    tokens_per_s: float | None
    draft_length: int | None


class Launch(_Open):
    engine: str
    target: str
    drafter: str | None
    method: str | None
    supported: bool
    reason: str | None
    steps: list[list[str]]
    argv: list[str]
    shell: str | None
    draft_length: int | None
    draft_length_source: str | None
    notes: list[str]


class TargetLag(_Part):
    days: int | None
    open: bool
    first_drafter: str | None
    first_drafter_released: date | None


class CurveFact(_Part):
    curve_id: int | None
    engine: str
    engine_version: str | None
    hardware: str | None
    gpu_class: str | None = Field(description="the catalog GPU class its hardware names; null: a CPU or unnamed")
    max_new_tokens: int
    prompt_set: str
    temperature: float
    concurrency_measured: list[int] = Field(description="[lowest, highest] concurrency the sweep measured")
    pays_up_to: int | None
    crossover: int | None
    stand_in: str | None = Field(description="why it says nothing about serving on a GPU (tiny test models, a "
                                             "CPU); null: it may")
    text: str


class Concurrency(_Part):
    """What the pair's measured speedup curves say at concurrency > 1 (registry/calibration/concurrency.py)."""

    text: str = Field(description='"pays up to c≈N on HW (engine, length, prompts, T)", or "not measured at '
                                  'concurrency > 1 on GPU"')
    measured: bool = Field(description="a curve of real models on the GPU class asked exists")
    curves: list[CurveFact]


class TargetDrafter(_Part):
    drafter: str
    method: str | None
    publisher: str | None
    verdict: str
    reasons: list[str]
    drafter_sha: str | None
    checkpoint_sha: str | None
    released: date | None
    gone: str | None
    measured: list[Measured]
    launch: dict[str, Launch] | None
    rank: dict[str, Any] | None = None  # position and why, for the pairs a user can rely on
    concurrency: Concurrency


class TargetDrafters(_Body):
    target: str
    head_sha: str | None
    status: str | None
    released: date | None
    built_in: list[dict[str, Any]]  # each drafter the checkpoint ships inside: method, rank, launch per engine
    lag: TargetLag
    draft_length_priced_on: str
    drafters: list[TargetDrafter]
    baseline_runs: list[Measured]


class Recommendation(_Body):
    target: str
    engine: str
    gpu: str
    recommendation: dict[str, Any] | None  # the drafter, why, its caveats and its launch command; None: none runs
    why: str
    considered: list[dict[str, Any]]


class DeclaredTarget(_Part):
    target: str
    declared_by: str | None


class HeadRevision(_Part):
    sha: str
    block_size: int | None
    hidden_size: int | None
    vocab_size: int | None
    weight_bytes: int | None
    config_problem: str | None


class DrafterVerdict(_Part):
    target: str
    verdict: str
    reasons: list[str]
    checkpoint_sha: str | None


class DrafterBody(_Body):
    drafter: str
    method: str | None
    publisher: str | None
    family: str | None
    released: date | None
    block_size: int | None
    gated: Any
    status: str | None
    head_sha: str | None
    source: Any
    targets: list[DeclaredTarget]
    head_revision: HeadRevision | None
    verdicts: list[DrafterVerdict]
    measured: list[Measured]


class LagPage(_Body):
    lag: list[LagRow] = Field(description="rows of `drafters lag --json`, worst first")
    total: int
    limit: int
    next_cursor: str | None


class Upgrades(_Body):
    upgrades: list[UpgradeRow] = Field(description="rows of `drafters lag --upgrades --json`")


class TargetRow(_Part):
    target: str
    head_sha: str | None
    status: str | None
    family: str | None
    built_in: list[str]
    released: date | None


class TargetsPage(_Body):
    targets: list[TargetRow]
    total: int
    limit: int
    next_cursor: str | None


class DrafterRow(_Part):
    drafter: str
    method: str | None
    publisher: str | None
    head_sha: str | None
    status: str | None
    released: date | None
    targets: list[str]


class DraftersPage(_Body):
    drafters: list[DrafterRow]
    total: int
    limit: int
    next_cursor: str | None


class Revision(_Body):
    sha: str
    targets: list[str]
    drafters: list[str]


class RunsPage(_Body):
    runs: list[dict[str, Any]] = Field(description="each run as `drafters runs --json` prints it (docs/api.md)")
    limit: int
    next_cursor: str | None


class EventsPage(_Body):
    events: list[EventRecord]
    next_after: int


class PlanWorker(_Part):
    worker_id: str
    device: str | None
    memory_bytes: int | None
    engines: dict[str, Any]
    disk_budget_bytes: int | None


class PlanRow(_Open):
    drafter: str
    target: str
    method: str | None
    state: str
    reason: str | None


class Plan(_Body):
    worker: PlanWorker | None
    workers: int
    reason: str | None
    counts: dict[str, int]
    total: int
    pairs: list[PlanRow]
