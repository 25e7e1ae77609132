"""What the watcher makes of a listed model: drafter or checkpoint, its kind, its specs, and which repos matter.

Functions of the Hub listing and of what the store already holds: `drafted_index` reads the recorded drafters and
their targets, `declared_targets` the checkpoints a drafter's name implies. The only Hub reads are
`revision_spec`'s, through the Hub client, of one pinned revision.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from registry import hub
from registry.domain import configs, names, upgrades
from registry.domain.drafter_facts import built_in_methods, drafter_facts
from registry.domain.pair import TOKENIZER_FILES
from registry.domain.records import CheckpointSpec, RevisionSpec
from registry.domain.tokenizers import tokenizer_digest
from registry.hub import HubClient, HubModel
from registry.store import Store

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
# Listed once per poll, so drafters of publishers nobody watches are found too: by tag or library name, and by a
# word of the repo name (`search:<word>`). The Hub's tag filter matches a tag exactly and tags keep the case their
# author gave them (nvidia/Kimi-K2.7-Code-DFlash is tagged `DFlash`, not `dflash`), while its search matches repo
# ids whatever their case: a drafter tagged in any spelling but named for its method is found by the name.
DRAFTER_QUERIES = ("dflash", "eagle3", "speculators", "speculative-decoding",
                   *(f"{hub.SEARCH_PREFIX}{word}" for word in ("dflash", "dspark", "eagle3", "speculator")))
QUERY_PREFIX = "tag:"  # cursor rows of drafter queries are named tag:<tag>, or search:<word> for a name search


def query_unit(query: str) -> str:
    """The cursor row of a drafter query: tag:<tag>, or the search query itself (search:<word>)."""
    return query if query.startswith(hub.SEARCH_PREFIX) else f"{QUERY_PREFIX}{query}"


def unit_query(unit: str) -> str | None:
    """The drafter query a poll unit names (None for an org)."""
    if unit.startswith(QUERY_PREFIX):
        return unit[len(QUERY_PREFIX):]
    return unit if unit.startswith(hub.SEARCH_PREFIX) else None


def drafter_queries_text(queries: tuple[str, ...] = DRAFTER_QUERIES) -> str:
    tags = [q for q in queries if not q.startswith(hub.SEARCH_PREFIX)]
    words = [q[len(hub.SEARCH_PREFIX):] for q in queries if q.startswith(hub.SEARCH_PREFIX)]
    return f"tagged {', '.join(tags)}" + (f", or named for {', '.join(words)} in any case" if words else "")


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


def revision_spec(client: HubClient, repo_id: str, sha: str, last_modified: datetime | None, *,
                  with_tokenizer: bool) -> RevisionSpec:
    """Read a repo at a pinned sha. A gated or missing repo becomes a revision with its problem recorded."""
    try:
        revision = client.revision(repo_id, sha)
        listed = {f.path: f for f in revision.files}
        # Listed sizes first: nothing big or stored in LFS is downloaded, and an absent file costs no request.
        config_file = listed.get("config.json")
        config_raw = (client.download(repo_id, "config.json", sha)
                      if config_file is not None and client.fits_download(config_file) else None)
    except hub.GatedRepo as exc:
        return RevisionSpec(sha=sha, last_modified=last_modified, config_problem=f"gated: {exc}")
    except hub.RepoNotFound as exc:
        return RevisionSpec(sha=sha, last_modified=last_modified, config_problem=f"missing: {exc}")
    # RevisionNotFound goes up: a listed sha the Hub no longer has is re-read, never stored as missing.
    tokenizer = None
    if with_tokenizer:
        files = {name: client.download(repo_id, name, sha) for name in TOKENIZER_FILES
                 if name in listed and client.fits_download(listed[name])}
        try:
            tokenizer = tokenizer_digest({k: v for k, v in files.items() if v is not None}) or None
        except configs.ConfigError:
            tokenizer = None
    return RevisionSpec(
        sha=sha,
        config_raw=config_raw,
        config_problem=None if config_raw is not None else (
            "no config.json in the repo" if config_file is None else "config.json too large to read"),
        last_modified=last_modified or revision.last_modified,
        tokenizer_digest=tokenizer,
        weight_bytes=sum(f.size or 0 for f in revision.files if hub.is_weight_file(f.path)) or None,
        weight_digest=hub.weight_digest(revision.files),
        parameter_count=revision.parameters,
        license=next((tag.split(":", 1)[1] for tag in revision.tags if tag.startswith("license:")), None),
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


def drafted_index(store: Store) -> DraftedIndex:
    drafted: dict[str, list[str]] = {}
    stems: list[tuple[str, str, bool]] = []
    drafters = store.watch.drafters_with_targets()
    for drafter, targets in drafters:
        for target in targets:
            # A target recorded before local paths were refused is no repo: it succeeds and precedes nothing.
            if names.is_repo_id(target):
                drafted.setdefault(target, []).append(drafter.repo_id)
        stem = names.drafter_target_stem(drafter.repo_id)
        if stem is not None:
            stems.append((drafter.repo_id, names.name_key(stem), bool(drafter.targets)))
    return DraftedIndex(drafted, stems, frozenset(d.repo_id for d, _ in drafters))


def name_matched_drafters(index: DraftedIndex, repo_id: str, *, without_targets_only: bool = False) -> list[str]:
    key = names.name_key(repo_id.split("/", 1)[1])
    return [d for d, stem_key, has_targets in index.stems
            if stem_key == key and not (without_targets_only and has_targets)]


def predecessors(index: DraftedIndex, model: HubModel) -> list[tuple[str, tuple[str, ...]]]:
    """Drafted checkpoints this one upgrades (upgrades.upgraded_releases: the rule `lag --upgrades` pairs by too)."""
    new = names.parse_repo_id(model.repo_id)
    drafted = {names.parse_repo_id(target): target for target in index.drafted if target != model.repo_id}
    post_trained = upgrades.is_post_trained(model.repo_id, checkpoint_spec(model).bases)
    upgraded = upgrades.upgraded_releases(new, list(drafted), post_trained=post_trained)
    return sorted((drafted[old], tuple(sorted(index.drafted[drafted[old]]))) for old in upgraded)


def interesting(index: DraftedIndex, model: HubModel) -> bool:
    """Checkpoints worth a config read: declared targets, their derivatives, successors of drafted ones."""
    if model.repo_id in index.drafted or set(model.base_models) & set(index.drafted):
        return True
    if name_matched_drafters(index, model.repo_id):
        return True
    return bool(predecessors(index, model))


def declared_targets(store: Store, model: HubModel, config: dict | None) -> tuple[tuple[str, str], ...]:
    targets: list[tuple[str, str]] = []
    if config is not None:
        facts = drafter_facts(config)
        # A local path (`/home/user/models/Qwen3-8B`, as real checkpoints carry) names no Hub repo: target unknown.
        if names.is_repo_id(facts.verifier_name):
            targets.append((facts.verifier_name, "speculators_verifier"))
    for base in model.base_models:
        if names.is_repo_id(base):
            targets.append((base, "card_base_model"))
    if not targets:
        stem = names.drafter_target_stem(model.repo_id)
        if stem is not None:
            key = names.name_key(stem)
            for checkpoint in store.reads.checkpoints_named(key):
                targets.append((checkpoint.repo_id, "name_convention"))
    return tuple(dict.fromkeys(targets))
