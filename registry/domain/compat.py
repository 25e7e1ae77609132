"""The compatibility verdict for one (drafter, target) pair, from their configs alone (pure, no I/O).

Verdicts, each saying what was checked:
- "exact": declared for this very checkpoint by the drafter's own metadata (its speculators `verifier`, its card's
  `base_model`, or a catalog entry), and every decisive check passed on the configs recorded at both heads;
- "declared": declared so, but the decisive checks did not run (a config is unread, or lacks the values); the
  reasons say which;
- "structural": not declared, but every structural check passes: it will run, acceptance unmeasured;
- "incompatible": a check fails; the reason names both values, target first;
- "unknown": a config is missing or malformed, or nothing decisive could be checked.
A repo *name* is never a declaration: the caller passes only targets the drafter's metadata declares.
Slightly over 400 lines: the verdict and the per-method checks it runs are one rule set, read together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from registry.domain.configs import ModelFacts, model_facts
from registry.domain.drafter_facts import DFLASH_FAMILY, DrafterFacts, detect_method, drafter_facts

Verdict = Literal["exact", "declared", "structural", "incompatible", "unknown"]
VERDICTS: tuple[Verdict, ...] = ("exact", "declared", "structural", "unknown", "incompatible")
# Best first: how reports and the dashboard rank the verdicts of one checkpoint.
VERDICT_ORDER = {verdict: rank for rank, verdict in enumerate(VERDICTS)}

# Decoder-only families a hidden-state drafter (DFlash, EAGLE-3) or a draft LM can sit on.
SUPPORTED_TARGET_MODEL_TYPES = frozenset(
    {
        "llama", "mistral", "mistral3", "mixtral", "ministral",
        "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe",
        "gemma", "gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text", "gemma4_unified",
        "gpt_oss", "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "minimax_m2",
        "glm4", "glm4_moe", "phi3", "minicpm", "nemotron_h",
    }
)  # fmt: skip
# Encoder-decoder and encoder-only families: no causal LM head to verify drafts with.
REFUSED_TARGET_MODEL_TYPES = frozenset(
    {
        "t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "whisper", "encoder-decoder",
        "bert", "roberta", "xlm-roberta", "deberta", "deberta-v2", "distilbert", "electra",
    }
)  # fmt: skip
GEMMA4_TARGET_MODEL_TYPES = frozenset({"gemma4", "gemma4_text", "gemma4_unified"})
# llama.cpp SPEC_VOCAB_MAX_SIZE_DIFFERENCE.
LLAMA_CPP_MAX_VOCAB_DIFFERENCE = 128


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: the data to check it is missing
    detail: str


@dataclass(frozen=True)
class CompatResult:
    verdict: Verdict
    reasons: tuple[str, ...]
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class _Pair:
    drafter: DrafterFacts
    target: ModelFacts
    target_repo_id: str | None
    drafter_tokenizer_digest: str | None
    target_tokenizer_digest: str | None


def check_pair(
    drafter_config: dict | None,
    target_config: dict | None,
    *,
    drafter_method: str | None,
    target_repo_id: str | None,
    declared_targets: tuple[str, ...],
    drafter_tokenizer_digest: str | None = None,
    target_tokenizer_digest: str | None = None,
    target_problem: str | None = None,
) -> CompatResult:
    """The verdict for one drafter on one target, with every check that ran or could not run."""
    missing = _unusable_inputs(drafter_config, target_config, target_problem)
    if missing:
        # The publisher's word stands while the configs are merely unread; a broken config never passes.
        merely_unread = target_problem is None and all(c is None or isinstance(c, dict) for c in (drafter_config, target_config))
        if merely_unread and _declares(target_repo_id, declared_targets):
            return CompatResult(
                "declared",
                (f"declared for {target_repo_id}; configs not read, nothing checked",
                 *(f"unchecked: {m}" for m in missing)),
                (),
            )
        return CompatResult("unknown", tuple(missing), ())
    assert isinstance(drafter_config, dict) and isinstance(target_config, dict)
    method = drafter_method or detect_method(drafter_config)
    if not isinstance(method, str):
        return CompatResult(
            "unknown", ("the drafter config names no drafting method (pass 'draft-lm' for a plain draft model)",), ()
        )
    rules = _RULES.get(method)
    if rules is None:
        return CompatResult("unknown", (f"no compatibility rules for method {method!r}",), ())
    pair = _Pair(
        drafter=drafter_facts(drafter_config, method),
        target=model_facts(target_config),
        target_repo_id=target_repo_id if isinstance(target_repo_id, str) else None,
        drafter_tokenizer_digest=drafter_tokenizer_digest,
        target_tokenizer_digest=target_tokenizer_digest,
    )
    checks = (*_speculators_checks(pair), *rules.checks(pair))
    return _verdict(pair, checks, rules.decisive, declared_targets or ())


def explain(result: CompatResult) -> str:
    """One line for the CLI: the verdict and its reasons."""
    line = f"{result.verdict}: {'; '.join(result.reasons)}" if result.reasons else result.verdict
    return " ".join(line.split())


def _unusable_inputs(drafter_config: Any, target_config: Any, target_problem: str | None) -> list[str]:
    reasons = []
    if target_problem:
        reasons.append(f"target config unusable: {target_problem}")
    elif target_config is None:
        reasons.append("target config missing")
    elif not isinstance(target_config, dict):
        reasons.append(f"target config is a {type(target_config).__name__}, not a JSON object")
    if drafter_config is None:
        reasons.append("drafter config missing")
    elif not isinstance(drafter_config, dict):
        reasons.append(f"drafter config is a {type(drafter_config).__name__}, not a JSON object")
    return reasons


def _verdict(
    pair: _Pair, checks: tuple[Check, ...], decisive: frozenset[str], declared_targets: Iterable[str]
) -> CompatResult:
    failed = [c.detail for c in checks if c.ok is False]
    unchecked = [f"unchecked: {c.name} ({c.detail})" for c in checks if c.ok is None]
    problems = [f"drafter config: {p}" for p in pair.drafter.problems]
    problems += [f"target config: {p}" for p in pair.target.problems]
    # A definite mismatch stands even when some other value is malformed.
    if failed:
        return CompatResult("incompatible", (*failed, *problems), checks)
    if problems:
        return CompatResult("unknown", (*problems, *unchecked), checks)
    passed = {c.name for c in checks if c.ok}
    if _is_declared(pair, declared_targets):
        if decisive <= passed:
            return CompatResult("exact", (f"declared for {pair.target_repo_id}", *unchecked), checks)
        # The publisher's word without the configs to back it: usable, but never called exact.
        lacking = " / ".join(sorted(decisive - passed))
        return CompatResult(
            "declared", (f"declared for {pair.target_repo_id}; not checked: {lacking}", *unchecked), checks
        )
    if not passed & decisive:
        lacking = " / ".join(sorted(decisive))
        return CompatResult("unknown", (f"nothing decisive could be checked ({lacking})", *unchecked), checks)
    subject = pair.target_repo_id or "this target"
    return CompatResult(
        "structural",
        (
            f"not declared for {subject}; every structural check passes: it will run, acceptance unmeasured",
            *unchecked,
        ),
        checks,
    )


def _declares(target_repo_id: str | None, declared_targets: Iterable[str]) -> bool:
    if not isinstance(target_repo_id, str):
        return False
    wanted = target_repo_id.casefold()
    return any(isinstance(t, str) and t.casefold() == wanted for t in declared_targets)


def _is_declared(pair: _Pair, declared_targets: Iterable[str]) -> bool:
    declared = list(declared_targets)
    # The speculators format names its verifier: that is a declaration too.
    if pair.drafter.verifier_name is not None:
        declared.append(pair.drafter.verifier_name)
    return _declares(pair.target_repo_id, declared)


# ---- checks -----------------------------------------------------------------------------------


def _values_check(
    name: str,
    target_value: Any,
    drafter_value: Any,
    pair: _Pair,
    *,
    target_field: str | None = None,
    drafter_field: str | None = None,
) -> Check:
    """Equality of one value on both sides; the reason shows the target's value first."""
    target_field, drafter_field = target_field or name, drafter_field or name
    if target_value is None or drafter_value is None:
        return Check(
            name, None, _missing(pair, target_field, target_value is None, drafter_field, drafter_value is None)
        )
    suffix = "" if drafter_field == target_field else f" {drafter_field}"
    if target_value == drafter_value:
        return Check(name, True, f"{target_field} {target_value} == {drafter_value} (target vs drafter{suffix})")
    return Check(name, False, f"{target_field} {target_value} != {drafter_value} (target vs drafter{suffix})")


def _missing(pair: _Pair, target_field: str, target_lacks: bool, drafter_field: str, drafter_lacks: bool) -> str:
    where = " (in text_config or at top level)" if pair.target.nested else ""
    parts = []
    if target_lacks:
        parts.append(f"target config gives no usable {target_field}{where}")
    if drafter_lacks:
        parts.append(f"drafter config gives no usable {drafter_field}")
    return "; ".join(parts)


def _hidden_size(pair: _Pair) -> Check:
    return _values_check("hidden_size", pair.target.hidden_size, pair.drafter.target_width, pair)


def _vocab_size(pair: _Pair) -> Check:
    return _values_check("vocab_size", pair.target.vocab_size, pair.drafter.vocab_size, pair)


def _tokenizer(pair: _Pair) -> Check:
    target, drafter = pair.target_tokenizer_digest, pair.drafter_tokenizer_digest
    if target is None or drafter is None:
        lacking = [side for side, digest in (("target", target), ("drafter", drafter)) if digest is None]
        return Check("tokenizer", None, f"no tokenizer digest for the {' and the '.join(lacking)}")
    if target == drafter:
        return Check("tokenizer", True, f"tokenizer digest {target[:12]} on both sides")
    return Check("tokenizer", False, f"tokenizer digest {target[:12]} != {drafter[:12]} (target vs drafter)")


def _target_family(pair: _Pair) -> Check:
    model_type = pair.target.model_type
    if pair.target.is_encoder_decoder or model_type in REFUSED_TARGET_MODEL_TYPES:
        return Check(
            "target architecture",
            False,
            f"target model_type {model_type!r} is not a decoder-only LM (encoder-decoder and encoder-only are refused)",
        )
    if model_type is None:
        return Check("target architecture", None, "target config gives no model_type")
    if model_type in SUPPORTED_TARGET_MODEL_TYPES:
        return Check("target architecture", True, f"target model_type {model_type!r} is a supported decoder-only LM")
    return Check("target architecture", None, f"target model_type {model_type!r} is not a family known here")


def _layer_ids(name: str, ids: tuple[int, ...] | None, num_layers: int | None, pair: _Pair, note: str) -> Check:
    """Every fused/aux layer id must name one of the target's decoder layers."""
    if ids is None or num_layers is None:
        return Check(name, None, _missing(pair, "num_hidden_layers", num_layers is None, name, ids is None))
    outside = [i for i in ids if not 0 <= i < num_layers]
    shown = f"{name} {list(ids)}{note}"
    if outside:
        return Check(name, False, f"{shown} outside the target's {num_layers} layers [0, {num_layers}): {outside}")
    return Check(name, True, f"{shown} within the target's {num_layers} layers")


def _speculators_checks(pair: _Pair) -> list[Check]:
    """The speculators format names its verifier; the target must be that very repo and architecture."""
    drafter, checks = pair.drafter, []
    if drafter.verifier_name is not None:
        if pair.target_repo_id is None:
            checks.append(Check("verifier", None, f"target repo id unknown; verifier is {drafter.verifier_name}"))
        elif pair.target_repo_id.casefold() == drafter.verifier_name.casefold():
            checks.append(Check("verifier", True, f"verifier.name_or_path {drafter.verifier_name} is the target"))
        else:
            checks.append(
                Check(
                    "verifier",
                    False,
                    f"target repo {pair.target_repo_id} != verifier.name_or_path {drafter.verifier_name}",
                )
            )
    if drafter.verifier_architectures:
        target_architectures = pair.target.architectures
        if not target_architectures:
            checks.append(Check("verifier architectures", None, "target config gives no architectures"))
        elif set(target_architectures) & set(drafter.verifier_architectures):
            checks.append(Check("verifier architectures", True, f"target architectures {list(target_architectures)}"))
        else:
            checks.append(
                Check(
                    "verifier architectures",
                    False,
                    f"target architectures {list(target_architectures)} != verifier.architectures "
                    f"{list(drafter.verifier_architectures)}",
                )
            )
    return checks


def _dflash_checks(pair: _Pair) -> list[Check]:
    drafter, target = pair.drafter, pair.target
    return [
        _hidden_size(pair),
        _vocab_size(pair),
        _values_check(
            "num_target_layers", target.num_hidden_layers, drafter.num_target_layers, pair,
            target_field="num_hidden_layers",
        ),
        _layer_ids(
            "target_layer_ids",
            drafter.target_layer_ids,
            target.num_hidden_layers,
            pair,
            " (defaulted from num_target_layers)" if drafter.target_layer_ids_defaulted else "",
        ),
        _mask_token(pair),
        _tokenizer(pair),
        _target_family(pair),
    ]  # fmt: skip


def _mask_token(pair: _Pair) -> Check:
    mask, vocab = pair.drafter.mask_token_id, pair.target.vocab_size
    if mask is None or vocab is None:
        return Check("mask_token_id", None, _missing(pair, "vocab_size", vocab is None, "mask_token_id", mask is None))
    if 0 <= mask < vocab:
        return Check("mask_token_id", True, f"mask_token_id {mask} within target vocab_size {vocab}")
    return Check("mask_token_id", False, f"mask_token_id {mask} outside target vocab_size {vocab} [0, {vocab})")


def _gemma4_assistant_checks(pair: _Pair) -> list[Check]:
    drafter, target = pair.drafter, pair.target
    if target.model_type is None:
        family = Check("target architecture", None, "target config gives no model_type")
    elif target.model_type in GEMMA4_TARGET_MODEL_TYPES:
        family = Check("target architecture", True, f"target model_type {target.model_type!r} is Gemma 4")
    else:
        family = Check(
            "target architecture",
            False,
            f"target model_type {target.model_type!r} != 'gemma4' (a Gemma 4 assistant reads a Gemma 4 target's cache)",
        )
    backbone_field = "backbone_hidden_size" if drafter.backbone_hidden_size is not None else "hidden_size"
    return [
        family,
        _values_check("hidden_size", target.hidden_size, drafter.target_width, pair, drafter_field=backbone_field),
        _vocab_size(pair),
        _tokenizer(pair),
    ]  # fmt: skip


def _eagle3_checks(pair: _Pair) -> list[Check]:
    drafter, target = pair.drafter, pair.target
    num_layers = target.num_hidden_layers
    aux_ids, note = drafter.aux_layer_ids, ""
    if aux_ids is not None and drafter.aux_ids_from_hidden_state_indices:
        note = f" (speculators hidden-state indices {[i + 1 for i in aux_ids]} minus 1)"
    if aux_ids is None and num_layers is not None:
        # EAGLE-3's default features: outputs of layers 1, N/2-1 and N-4.
        aux_ids, note = (1, num_layers // 2 - 1, num_layers - 4), " (EAGLE-3 default)"
    hidden_field = "target_hidden_size" if drafter.target_hidden_size is not None else "hidden_size"
    return [
        _layer_ids("aux_layer_ids", aux_ids, num_layers, pair, note),
        _values_check("hidden_size", target.hidden_size, drafter.target_width, pair, drafter_field=hidden_field),
        _vocab_size(pair),
        _draft_vocab(pair),
        _tokenizer(pair),
        _target_family(pair),
    ]  # fmt: skip


def _draft_vocab(pair: _Pair) -> Check:
    draft_vocab, vocab = pair.drafter.draft_vocab_size, pair.target.vocab_size
    if draft_vocab is None or vocab is None:
        return Check(
            "draft_vocab_size",
            None,
            _missing(pair, "vocab_size", vocab is None, "draft_vocab_size", draft_vocab is None),
        )
    if draft_vocab <= vocab:
        return Check("draft_vocab_size", True, f"draft_vocab_size {draft_vocab} <= target vocab_size {vocab}")
    return Check("draft_vocab_size", False, f"target vocab_size {vocab} < draft_vocab_size {draft_vocab}")


def _draft_lm_checks(pair: _Pair) -> list[Check]:
    return [_vocab_size(pair), _tokenizer(pair), _llama_cpp_vocab_rule(pair), _target_family(pair)]


def _llama_cpp_vocab_rule(pair: _Pair) -> Check:
    """llama.cpp pairs a draft model when vocab sizes differ by <= 128 and BOS/EOS ids are identical."""
    name, target, drafter = "llama.cpp vocab rule", pair.target, pair.drafter.model
    if target.vocab_size is None or drafter.vocab_size is None:
        return Check(
            name,
            None,
            _missing(pair, "vocab_size", target.vocab_size is None, "vocab_size", drafter.vocab_size is None),
        )
    difference = abs(target.vocab_size - drafter.vocab_size)
    failures = []
    if difference > LLAMA_CPP_MAX_VOCAB_DIFFERENCE:
        failures.append(
            f"vocab_size {target.vocab_size} vs {drafter.vocab_size} differ by {difference} "
            f"> {LLAMA_CPP_MAX_VOCAB_DIFFERENCE}"
        )
    if target.bos_token_id != drafter.bos_token_id:
        failures.append(f"bos_token_id {target.bos_token_id} != {drafter.bos_token_id}")
    target_eos, drafter_eos = sorted(set(target.eos_token_ids)), sorted(set(drafter.eos_token_ids))
    if target_eos != drafter_eos:
        failures.append(f"eos_token_id {target_eos} != {drafter_eos}")
    if failures:
        return Check(name, False, f"{'; '.join(failures)} (target vs drafter)")
    return Check(
        name,
        True,
        f"vocab_size differs by {difference} <= {LLAMA_CPP_MAX_VOCAB_DIFFERENCE}; "
        f"bos {target.bos_token_id} and eos {target_eos} identical",
    )


@dataclass(frozen=True)
class _Rules:
    checks: Callable[[_Pair], list[Check]]
    # At least one of these must pass, or the verdict stays "unknown"; a declared pair is "exact" only when all do.
    decisive: frozenset[str]


_RULES: Mapping[str, _Rules] = {
    **{method: _Rules(_dflash_checks, frozenset({"hidden_size"})) for method in DFLASH_FAMILY},
    "gemma4-assistant": _Rules(_gemma4_assistant_checks, frozenset({"hidden_size"})),
    "eagle3": _Rules(_eagle3_checks, frozenset({"hidden_size"})),
    "draft-lm": _Rules(_draft_lm_checks, frozenset({"vocab_size", "tokenizer"})),
}
