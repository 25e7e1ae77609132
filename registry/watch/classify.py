"""What the watcher makes of a listed model: drafter or checkpoint, its kind, its specs, which repos matter, and
whether a new checkpoint is a base upgrade.

Pure: every function here decides from values it is given (a listed `HubModel`, a config, the `DraftedIndex` of
the recorded drafters, the checkpoints a drafter's name implies) and reads neither the Hub nor the store;
registry/watch/inputs.py gathers those inputs, and registry/watch/units.py acts on the decisions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from registry.domain import configs, names, upgrades
from registry.domain.drafter_facts import built_in_methods, drafter_facts
from registry.domain.records import CheckpointSpec, RevisionSpec
from registry.hub import HubModel

DRAFTER_TAGS = frozenset({"dflash", "eagle3", "eagle", "speculators", "speculative-decoding-draft", "dspark", "mtp"})
DRAFTER_ARCHITECTURES = frozenset(
    {
        "DFlashDraftModel",
        "DFlash2DraftModel",
        "Gemma4AssistantForCausalLM",
        "Gemma4UnifiedAssistantForCausalLM",
        "LlamaForCausalLMEagle3",
        "Eagle3Speculator",
        "DFlashSpeculator",
    }
)
# Drafted checkpoints a checkpoint succeeds, each with the drafters that declare it (see predecessors).
Predecessors = list[tuple[str, tuple[str, ...]]]


def looks_like_drafter(model: HubModel) -> bool:
    tags = {t.lower() for t in model.tags}
    if tags & DRAFTER_TAGS:
        return True
    if set(model.architectures) & DRAFTER_ARCHITECTURES:
        return True
    lowered = model.repo_id.lower()
    return any(marker in lowered for marker in ("dflash", "dspark", "eagle3", "speculator", "-assistant"))


def is_official_release(model: HubModel) -> bool:
    """A vendor's own post-trained release: a finetune of its own pretrained sibling (`Qwen/Qwen3-8B` of
    `Qwen/Qwen3-8B-Base`, `meta-llama/Llama-3.1-8B-Instruct` of `meta-llama/Llama-3.1-8B`, `google/gemma-3-12b-it`
    of `google/gemma-3-12b-pt`). Someone else's finetune, or a parent of another line, is not."""
    return model.base_model_relation == "finetune" and any(
        upgrades.is_own_pretrained_parent(model.repo_id, base) for base in model.base_models)


def kind(model: HubModel) -> str:
    if is_official_release(model):
        return "base"
    if model.base_model_relation in ("quantized", "finetune", "adapter", "merge"):
        return model.base_model_relation
    guess = names.derivative_kind(model.repo_id.split("/", 1)[1])
    if guess is not None:
        return guess
    return "base"


def capped(value: datetime, ceiling: datetime | None) -> datetime:
    return value if ceiling is None else min(value, ceiling)


def weights_changed(old: str | None, new: str | None) -> bool:
    return old is not None and new is not None and old != new


def checkpoint_spec(model: HubModel) -> CheckpointSpec:
    return CheckpointSpec(
        repo_id=model.repo_id,
        source="hub",
        kind=kind(model),
        created_at_hub=model.created_at,
        gated=bool(model.gated),
        bases=tuple((base, model.base_model_relation or "unknown") for base in model.base_models),
    )


def built_in(spec: RevisionSpec) -> tuple[str, ...]:
    """The drafting methods a checkpoint's config read at this revision says it ships inside (an MTP head, a
    DSpark module): marked on the checkpoint as the catalog marks its own, so it is never waiting for a drafter."""
    if spec.config_raw is None:
        return ()
    try:
        return built_in_methods(configs.parse_config(spec.config_raw))
    except configs.ConfigError:
        return ()


@dataclass(frozen=True)
class DraftedIndex:
    """What the recorded drafters say, read once and kept until a drafter changes."""

    drafted: dict[str, list[str]]  # target repo id (canonical) -> drafters declaring it
    stems: list[tuple[str, str, bool]]  # (drafter repo id, name key of the target its name implies, has targets)
    drafter_ids: frozenset[str]


def drafted_index(drafters: Iterable[tuple[str, tuple[str, ...]]]) -> DraftedIndex:
    """The index of the recorded drafters, each given as (repo id, the canonical ids of its declared targets)."""
    drafted: dict[str, list[str]] = {}
    stems: list[tuple[str, str, bool]] = []
    drafter_ids = []
    for drafter, targets in drafters:
        drafter_ids.append(drafter)
        for target in targets:
            # A target recorded before local paths were refused is no repo: it succeeds and precedes nothing.
            if names.is_repo_id(target):
                drafted.setdefault(target, []).append(drafter)
        stem = names.drafter_target_stem(drafter)
        if stem is not None:
            stems.append((drafter, names.name_key(stem), bool(targets)))
    return DraftedIndex(drafted, stems, frozenset(drafter_ids))


def name_matched_drafters(index: DraftedIndex, repo_id: str, *, without_targets_only: bool = False) -> list[str]:
    key = names.name_key(repo_id.split("/", 1)[1])
    return [d for d, stem_key, has_targets in index.stems
            if stem_key == key and not (without_targets_only and has_targets)]


def predecessors(index: DraftedIndex, model: HubModel) -> Predecessors:
    """Drafted checkpoints this one upgrades (upgrades.upgraded_releases: the rule `lag --upgrades` pairs by too)."""
    new = names.parse_repo_id(model.repo_id)
    drafted = {names.parse_repo_id(target): target for target in index.drafted if target != model.repo_id}
    post_trained = upgrades.is_post_trained(model.repo_id, checkpoint_spec(model).bases)
    upgraded = upgrades.upgraded_releases(new, list(drafted), post_trained=post_trained)
    return sorted((drafted[old], tuple(sorted(index.drafted[drafted[old]]))) for old in upgraded)


def interesting(index: DraftedIndex, model: HubModel, preceding: Predecessors) -> bool:
    """Checkpoints worth a config read: declared targets, their derivatives, successors of drafted ones (`preceding`:
    its `predecessors`, computed once for the model)."""
    if model.repo_id in index.drafted or set(model.base_models) & set(index.drafted):
        return True
    if name_matched_drafters(index, model.repo_id):
        return True
    return bool(preceding)


def base_upgrade(model: HubModel, preceding: Predecessors) -> Predecessors:
    """The drafted checkpoints a newly released checkpoint upgrades, each with its drafters: the `base_upgrade`
    alert's decision. Only an official release upgrades anything (`kind` "base": a vendor's own release, no
    quantization or finetune of someone else's), and not a pretrained `-Base`/`-pt` parent, which is not what
    drafters are trained for: its instruct release is the upgrade; like pairs with like (upgrades.is_upgrade)."""
    pretrained = upgrades.release_role(names.parse_repo_id(model.repo_id)) == "pretrained"
    return preceding if kind(model) == "base" and not pretrained else []


def explicit_targets(model: HubModel, config: dict | None) -> tuple[tuple[str, str], ...]:
    """The targets a drafter declares itself: its speculators `verifier` and its card's `base_model`."""
    targets: list[tuple[str, str]] = []
    if config is not None:
        facts = drafter_facts(config)
        # A local path (`/home/user/models/Qwen3-8B`, as real checkpoints carry) names no Hub repo: target unknown.
        if names.is_repo_id(facts.verifier_name):
            targets.append((facts.verifier_name, "speculators_verifier"))
    for base in model.base_models:
        if names.is_repo_id(base):
            targets.append((base, "card_base_model"))
    return tuple(dict.fromkeys(targets))


def implied_target_key(model: HubModel) -> str | None:
    """The name key of the checkpoint a drafter's repo name implies (`Qwen3-8B-DFlash` -> Qwen3-8B's), if any."""
    stem = names.drafter_target_stem(model.repo_id)
    return names.name_key(stem) if stem is not None else None


def declared_targets(model: HubModel, config: dict | None, named: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """A drafter's targets: those it declares, else the recorded checkpoints its name implies (`named`: those of
    `implied_target_key`)."""
    return explicit_targets(model, config) or tuple(dict.fromkeys((repo_id, "name_convention") for repo_id in named))
