"""The harness's `Run` as the registry names it: the pair by the ids it was asked under (the harness knows only
the folders it ran), the job and the run id; and a run that did not finish, with its reason.

The request comes in through `RunRequest`, the few fields of a verification request the record needs, so the
harness never imports the runner (`verifier.jobs.VerifyRequest` fits it as is).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from registry.domain.engines import VERIFIER_ENGINES
from registry.domain.measurement import RunSettings
from registry.domain.run import Run


class RunRequest(Protocol):
    """What was asked for: the pair, its revisions, the engine and the settings."""

    @property
    def target(self) -> str: ...

    @property
    def drafter(self) -> str | None: ...

    @property
    def target_revision(self) -> str | None: ...

    @property
    def drafter_revision(self) -> str | None: ...

    @property
    def engine(self) -> str: ...

    @property
    def settings(self) -> RunSettings: ...

    def to_payload(self) -> dict[str, Any]: ...


def named_run(request: RunRequest, run: Run, *, job_id: int | None, run_id: str | None = None) -> Run:
    """The measured run under the request's names; a revision the request did not pin is the one the harness
    read from the folder (a Hub snapshot's sha, else the digest of its files)."""
    return replace(
        run,
        target=request.target,
        drafter=request.drafter,
        target_revision=request.target_revision or run.target_revision,
        drafter_revision=request.drafter_revision or run.drafter_revision,
        job_id=job_id,
        run_id=run_id,
    )


def failed_run(request: RunRequest, reason: str, *, job_id: int | None, run_id: str | None) -> Run:
    """A run that did not finish, with its one-line reason and the request that asked for it."""
    return Run(
        target=request.target,
        drafter=request.drafter,
        status="failed",
        failure_reason=reason,
        engine=VERIFIER_ENGINES[request.engine],
        settings=request.settings,
        target_revision=request.target_revision,
        drafter_revision=request.drafter_revision,
        job_id=job_id,
        run_id=run_id,
        provenance={"request": request.to_payload()},
    )
