"""What `drafters doctor` concludes about a running server (pure): the known ways speculative decoding fails
silently, each with the public reports it was seen in, and the rules that match one probe against them.

A probe is what a server did for a few prompts sent by the doctor alone: its speculative counters read before and
after, so nothing another client sent counts. The expectation is what the registry knows of the same pair: its
verdict, the trained draft length, the τ band of measured runs under the same engine (else a published τ, labelled
as such), and the engine's minimum version for the method. Each finding says what is wrong in plain words and what
to do; where the registry does not know, the finding says so instead of guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from registry.domain.json_shapes import versioned

# τ at or below this over a probe that drafted is "almost nothing accepted": a drafter that helps gives well above
# it (published DFlash/EAGLE-3 pairs report τ 3-8), and τ 1.0 is plain decoding with extra work.
COLLAPSED_TAU = 1.1
# A probe's τ below the band's floor by more than this fraction is a regression (the registry's own rule for
# runs, registry.domain.regression.REGRESSION_FRACTION, applied to the band of measured runs).
BAND_MARGIN = 0.10
NOT_ENGAGED = "speculation_not_engaged"
ACCEPTANCE_REGRESSED = "acceptance_regressed"


@dataclass(frozen=True)
class Signature:
    """A known way speculation fails without an error, with the public reports it was seen in."""

    code: str
    title: str
    likely_causes: tuple[str, ...]
    fix: str
    sources: tuple[str, ...]


SIGNATURES: dict[str, Signature] = {s.code: s for s in (
    Signature(
        "not_engaged", "speculation is not engaged: the server verified no drafts during the probe",
        ("no drafter loaded (started without -md / --speculative-config)",
         "the drafter was not recognised and the server fell back to plain decoding",
         "the method is not supported by this engine build"),
        "start the server with the drafter and its method (`drafters launch TARGET --engine ENGINE` prints the "
        "command) and read its start-up log for a drafter that failed to load",
        ("https://github.com/ollama/ollama/issues/17683", "https://github.com/jundot/omlx/issues/3019",
         "https://github.com/ddalcu/mlx-serve/issues/224")),
    Signature(
        "acceptance_collapsed", "the drafter drafts, but almost nothing is accepted (τ ≈ 1)",
        ("the drafter reads the wrong target layers (tap layers guessed instead of read from its config)",
         "a quantized drafter (DFlash 2 drafts quantized to low bits accept ~0%)",
         "the drafter was trained for another target or revision",
         "the same repo id now serves different bytes"),
        "serve the drafter revision the registry lists for this target, unquantized, with the target layers its "
        "config names; check `drafters check DRAFTER TARGET`",
        ("https://github.com/sgl-project/sglang/issues/37475", "https://github.com/InternLM/lmdeploy/issues/4991",
         "https://github.com/sgl-project/sglang/issues/39087", "https://github.com/z-lab/dflash/issues/152")),
    Signature(
        "below_band", "acceptance is below what this pair gives under the same conditions",
        ("an engine upgrade or a changed default lowered acceptance",
         "thinking mode, chat template or language differ from the measured prompts",
         "a different drafter or target revision"),
        "compare the engine version and its speculative defaults with the measured run's, and probe with the "
        "prompts you serve (`--prompts FILE`)",
        ("https://github.com/ggml-org/llama.cpp/issues/26750", "https://github.com/ggml-org/llama.cpp/issues/25792",
         "https://github.com/z-lab/dflash/issues/60", "https://github.com/z-lab/dflash/issues/133",
         "https://github.com/z-lab/dflash/issues/7")),
    Signature(
        "draft_length_mismatch", "the server's draft length differs from what the drafter was trained for",
        ("the engine's default draft length was left in place (llama.cpp drafts at most 3 by default)",
         "a draft length set for another drafter"),
        "set the draft length to the drafter's trained length (llama.cpp --spec-draft-n-max, vLLM "
        "num_speculative_tokens, SGLang --speculative-num-draft-tokens)",
        ("https://github.com/ggml-org/llama.cpp/blob/master/common/common.h",
         "https://github.com/vllm-project/vllm/blob/main/vllm/config/speculative.py")),
    Signature(
        "target_revision_mismatch", "the served target is not the revision the drafter was declared for",
        ("the base model was updated in place and the drafter was not",),
        "serve the target revision the drafter was trained for, or a drafter for the served revision "
        "(`drafters find TARGET`)",
        ("https://github.com/z-lab/dflash/issues/152",)),
    Signature(
        "engine_below_minimum", "the engine is older than the first release that runs this method",
        ("the method's support arrived in a later release",),
        "upgrade the engine to at least the version named",
        ()),
    Signature(
        "pair_not_compatible", "the registry's verdict for the served pair is not a pair that works",
        ("the drafter was made for another target", "the pair's configs disagree on a decisive field"),
        "serve a drafter the registry lists as exact for this target (`drafters find TARGET`)",
        ()),
)}


@dataclass(frozen=True)
class ProbeFacts:
    """What one probe of a server measured, and what the server said about itself."""

    engine: str  # "llama.cpp", "vllm", "sglang"
    engine_version: str | None
    drafts: int | None  # verification steps that drafted, during the probe; None: the server cannot tell
    tau: float | None  # mean accepted length, bonus included, over the probe's drafting steps
    draft_length: int | None  # the server's configured draft length, where it exposes it
    thinking: bool | None  # whether the probe's prompts ran with thinking on (None: not set by the probe)


@dataclass(frozen=True)
class Expectation:
    """What the registry knows of the served pair, each part None where it does not know (with why, in notes)."""

    target: str | None
    drafter: str | None
    verdict: str | None = None  # the stored or computed verdict level
    method: str | None = None
    trained_draft_length: int | None = None
    tau_band: tuple[float, float] | None = None  # (low, high) of comparable measured runs, or a published τ
    tau_band_source: str | None = None
    measured_thinking: bool | None = None
    minimum_version: str | None = None
    minimum_version_source: str | None = None
    declared_target_revision: str | None = None
    served_target_revision: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finding:
    code: str  # a SIGNATURES key, or "info"
    problem: bool  # True: something is wrong; False: worth knowing
    message: str
    fix: str | None = None
    sources: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "problem": self.problem, "message": self.message, "fix": self.fix,
                "sources": list(self.sources)}


@dataclass(frozen=True)
class Diagnosis:
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def healthy(self) -> bool:
        return not any(f.problem for f in self.findings)

    @property
    def event_types(self) -> tuple[str, ...]:
        """The events this diagnosis raises: nothing drafted, or acceptance below the pair's band."""
        codes = {f.code for f in self.findings if f.problem}
        kinds = []
        if "not_engaged" in codes:
            kinds.append(NOT_ENGAGED)
        if codes & {"acceptance_collapsed", "below_band"}:
            kinds.append(ACCEPTANCE_REGRESSED)
        return tuple(kinds)


def _finding(code: str, message: str) -> Finding:
    signature = SIGNATURES[code]
    causes = "; ".join(signature.likely_causes)
    return Finding(code, True, f"{message} (likely: {causes})", signature.fix, signature.sources)


def _version_tuple(text: str) -> tuple[int, ...] | None:
    """'0.21.1' → (0, 21, 1); llama.cpp's 'b11434' or '11434 (abc)' → (11434,); None when it is no version."""
    match = re.match(r"^\s*v?b?(\d+(?:\.\d+)*)", text)
    if match is None or "unknown" in text:
        return None
    version = tuple(int(p) for p in match.group(1).split("."))
    # A build that does not know its own number (llama.cpp built outside git says "b0-unknown") is not version 0.
    return version if any(version) else None


def below_minimum(version: str | None, minimum: str | None) -> bool | None:
    """Whether `version` is older than `minimum`; None when either is unknown or not a plain version."""
    if version is None or minimum is None:
        return None
    mine, floor = _version_tuple(version), _version_tuple(minimum)
    if mine is None or floor is None:
        return None
    width = max(len(mine), len(floor))
    return mine + (0,) * (width - len(mine)) < floor + (0,) * (width - len(floor))


WORKING_VERDICTS = ("exact", "declared", "structural")


def diagnose(probe: ProbeFacts, expected: Expectation) -> Diagnosis:
    """Every finding of one probe against what the registry expects, problems first."""
    problems: list[Finding] = []
    notes: list[Finding] = []
    if probe.drafts is None:
        notes.append(Finding("info", False, f"{probe.engine} reported no per-request draft counts: whether "
                                            "speculation is engaged is unknown"))
    elif probe.drafts == 0:
        problems.append(_finding("not_engaged", "the server verified no drafted tokens for any probe prompt"))
    elif probe.tau is not None and probe.tau <= COLLAPSED_TAU:
        problems.append(_finding("acceptance_collapsed",
                                 f"τ {probe.tau:.2f} over {probe.drafts} drafting steps (τ 1.0 is plain decoding)"))
    elif probe.tau is not None and expected.tau_band is not None:
        low, high = expected.tau_band
        if probe.tau < low * (1 - BAND_MARGIN):
            problems.append(_finding(
                "below_band", f"τ {probe.tau:.2f} is below this pair's band {low:.2f}–{high:.2f} "
                              f"({expected.tau_band_source})"))
        else:
            notes.append(Finding("info", False, f"τ {probe.tau:.2f} is within this pair's band {low:.2f}–{high:.2f} "
                                                f"({expected.tau_band_source})"))
    elif probe.tau is not None:
        notes.append(Finding("info", False, f"τ {probe.tau:.2f}; no band to compare it with: the registry has no "
                                            "measured run of this pair on this engine and no published τ"))
    trained = expected.trained_draft_length
    if probe.draft_length is not None and trained is not None and probe.draft_length != trained:
        problems.append(_finding(
            "draft_length_mismatch", f"the server drafts up to {probe.draft_length} tokens; {expected.drafter} "
                                     f"was trained to draft {trained}"))
    elif probe.draft_length is None and trained is not None and probe.drafts:
        notes.append(Finding("info", False, f"{probe.engine} does not expose its draft length; the drafter was "
                                            f"trained to draft {trained}"))
    declared, served = expected.declared_target_revision, expected.served_target_revision
    if declared and served and declared != served:
        problems.append(_finding("target_revision_mismatch", f"the server runs {expected.target} at {served[:12]}; "
                                                             f"the drafter was declared for {declared[:12]}"))
    if below_minimum(probe.engine_version, expected.minimum_version):
        signature = SIGNATURES["engine_below_minimum"]
        problems.append(Finding("engine_below_minimum", True,
                                f"{probe.engine} {probe.engine_version} is older than {expected.minimum_version}, the "
                                f"first that runs {expected.method}", signature.fix,
                                (expected.minimum_version_source,) if expected.minimum_version_source else ()))
    if expected.verdict is not None and expected.verdict not in WORKING_VERDICTS:
        problems.append(_finding("pair_not_compatible", f"the registry's verdict for {expected.drafter} on "
                                                        f"{expected.target} is {expected.verdict}"))
    if (probe.thinking is not None and expected.measured_thinking is not None
            and probe.thinking != expected.measured_thinking):
        notes.append(Finding("info", False, f"the probe ran with thinking {'on' if probe.thinking else 'off'}; the "
                                            f"band was measured with it {'on' if expected.measured_thinking else 'off'}"
                                            ": τ can differ by 2× between the two"))
    notes.extend(Finding("info", False, note) for note in expected.notes)
    return Diagnosis(tuple(problems + notes))


def diagnosis_json(probe: ProbeFacts, expected: Expectation, diagnosis: Diagnosis) -> dict[str, object]:
    return versioned({
        "healthy": diagnosis.healthy,
        "engine": probe.engine,
        "engine_version": probe.engine_version,
        "target": expected.target,
        "drafter": expected.drafter,
        "verdict": expected.verdict,
        "probe": {"drafts": probe.drafts, "tau": probe.tau, "draft_length": probe.draft_length,
                  "thinking": probe.thinking},
        "expected": {"tau_band": list(expected.tau_band) if expected.tau_band else None,
                     "tau_band_source": expected.tau_band_source,
                     "trained_draft_length": expected.trained_draft_length,
                     "minimum_version": expected.minimum_version},
        "findings": [f.to_json() for f in diagnosis.findings],
        "events": list(diagnosis.event_types),
    })
