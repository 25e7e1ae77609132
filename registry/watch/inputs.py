"""What the watcher reads before registry/watch/classify.py decides: one pinned revision from the Hub, the
recorded drafters (as the classifier's `DraftedIndex`) and the checkpoints a drafter's name implies from the store.

Reads only; the decisions are classify's, the writes units.py's.
"""

from __future__ import annotations

from datetime import datetime

from registry import hub
from registry.domain import configs
from registry.domain.pair import TOKENIZER_FILES
from registry.domain.records import RevisionSpec
from registry.domain.tokenizers import tokenizer_digest
from registry.hub import HubClient, HubModel
from registry.store import Store
from registry.watch import classify
from registry.watch.classify import DraftedIndex


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


def drafted_index(store: Store) -> DraftedIndex:
    """The recorded drafters and their targets, read in one query, as the classifier's index."""
    drafters = store.watch.drafters_with_targets()
    return classify.drafted_index((drafter.repo_id, targets) for drafter, targets in drafters)


def declared_targets(store: Store, model: HubModel, config: dict | None) -> tuple[tuple[str, str], ...]:
    """A drafter's targets (classify.declared_targets); the store is read for the checkpoints its name implies only
    when it declares none itself."""
    named: list[str] = []
    key = classify.implied_target_key(model)
    if key is not None and not classify.explicit_targets(model, config):
        named = [checkpoint.repo_id for checkpoint in store.reads.checkpoints_named(key)]
    return classify.declared_targets(model, config, named)
