"""A checkpoint id as a user types it: any case, a Hub URL, a bare name ("did you mean"), or a repo the registry
does not hold, followed on the Hub through its cards' base_model chain (quantized, finetune, merge, adapter) to a
checkpoint it does, with what that relation means for the base's drafters."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

from registry.domain import names
from registry.domain.records import CheckpointRecord
from registry.errors import Failed, UserError
from registry.hub import GatedRepo, HubClient, HubError, RepoNotFound
from registry.store import NotFound, Store

# A Hub page of a model, as copied from the browser: https://huggingface.co/Qwen/Qwen3-8B, …/tree/main, hf.co/….
_HUB_URL_RE = re.compile(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/(?P<path>[^?#]*)", re.IGNORECASE)
MAX_BASE_HOPS = 3  # Hub reads while following a base_model chain to a checkpoint the registry holds
# What a derivative's relation to its base means for the base's drafters (their verdicts are the base's).
_DERIVATIVE_NOTES = {
    "quantized": "a quantized derivative: acceptance usually drops, measure it",
    "finetune": "a finetune: its outputs differ from the base's, so acceptance may drop; measure it",
    "merge": "a merge of several models: acceptance may drop; measure it",
    "adapter": "an adapter on the base (serve the base with it): acceptance may drop; measure it",
}


@dataclass(frozen=True)
class Derivation:
    """How a repo the registry does not hold reaches a checkpoint it does: its cards' base_model chain on the Hub."""

    repo_id: str  # the asked repo, as the Hub spells it
    relation: str  # what it is to its base: quantized, finetune, merge, adapter, or unknown
    chain: tuple[tuple[str, str], ...]  # (repo, its relation to the next) from the asked repo to the base
    base: str  # the checkpoint of the registry whose drafters answer
    note: str


@dataclass(frozen=True)
class Resolved:
    """The checkpoint an id as typed names: `how` says what was read into it (None: typed exactly)."""

    checkpoint_repo_id: str
    how: str | None = None  # "url", "case", "name" or "base_model"
    derivation: Derivation | None = None


def typed_repo_id(value: str) -> str:
    """The repo id in what a user typed: a Hub URL of a model becomes its `org/name`; anything else is kept."""
    value = value.strip()
    match = _HUB_URL_RE.match(value)
    if match is None:
        return value
    parts = [part for part in match.group("path").split("/") if part]
    if parts and parts[0] in ("datasets", "spaces", "collections", "papers"):
        raise UserError(f"{value} is not a model's page on the Hub ({parts[0]})")
    if len(parts) < 2:
        raise UserError(f"{value} names no model: a model's page is https://huggingface.co/ORG/NAME")
    return f"{parts[0]}/{parts[1]}"


def not_in_registry(checkpoints: list[CheckpointRecord], repo_id: str, why: str = "") -> str:
    """"X is not in the registry", with the ids it may have meant, and how to fill an empty registry."""
    message = f"{repo_id} is not in the registry{why}"
    known = {c.repo_id.lower(): c.repo_id for c in checkpoints}
    by_name = {c.repo_id.split("/", 1)[1].lower(): c.repo_id for c in checkpoints}
    typed = repo_id.lower()
    close = [known[c] for c in difflib.get_close_matches(typed, known, n=3, cutoff=0.75)] if "/" in typed else []
    close += [by_name[n] for n in difflib.get_close_matches(typed.rsplit("/", 1)[-1], by_name, n=3, cutoff=0.75)]
    suggestions = list(dict.fromkeys(close))[:3]
    if suggestions:
        message += f"; did you mean {' or '.join(suggestions)}?"
    if not any(c.source == "catalog" for c in checkpoints):
        message += " (the catalog is not loaded: run `drafters catalog load`, or `drafters watch --once`)"
    return message


def resolve_checkpoint(store: Store, typed: str, hub: Callable[[], HubClient] | None = None) -> Resolved:
    """The checkpoint of the registry that an id as users type it names: exactly, in another case, as a Hub URL, as
    a bare name one org publishes, or (asking the Hub through `hub`) as a derivative whose base_model chain reaches
    one. A name several orgs publish is refused with the candidates."""
    repo_id = typed_repo_id(typed)
    how = "url" if repo_id != typed.strip() else None
    if names.is_repo_id(repo_id) and (exact := store.reads.get_checkpoint(repo_id)) is not None:
        return Resolved(exact.repo_id, how)
    checkpoints = store.reads.checkpoints()
    known = {c.repo_id.lower(): c.repo_id for c in checkpoints}
    if "/" not in repo_id:
        same_name = sorted(c.repo_id for c in checkpoints if c.repo_id.split("/", 1)[1].lower() == repo_id.lower())
        if len(same_name) == 1:
            return Resolved(same_name[0], "name")
        if same_name:
            raise UserError(f"{repo_id} is published by several orgs: did you mean {' or '.join(same_name)}?")
        raise NotFound(not_in_registry(checkpoints, repo_id))
    if repo_id.lower() in known:
        return Resolved(known[repo_id.lower()], how or "case")
    if not names.is_repo_id(repo_id):
        raise UserError(f"{repo_id!r} is not a repo id (org/name) or a Hub URL of a model")
    if hub is None:
        raise NotFound(not_in_registry(checkpoints, repo_id))
    return _through_base_models(checkpoints, known, repo_id, hub())


def _through_base_models(checkpoints: list[CheckpointRecord], known: dict[str, str], repo_id: str,
                         client: HubClient) -> Resolved:
    chain: list[tuple[str, str]] = []
    current = repo_id
    for _ in range(MAX_BASE_HOPS):
        try:
            revision = client.revision(current)
        except RepoNotFound:
            raise NotFound(not_in_registry(checkpoints, repo_id, f", and the Hub has no model {current}")) from None
        except GatedRepo:
            raise NotFound(not_in_registry(checkpoints, repo_id, f"; {current} is gated on the Hub, its card "
                                                                 "cannot be read without access")) from None
        except HubError as exc:  # unreachable, rate limited, a refused token: the library's errors, mapped
            raise Failed(not_in_registry(checkpoints, repo_id, f", and the Hub cannot be reached to look it up "
                                                               f"({exc})")) from None
        if revision.repo_id.lower() in known and not chain:
            return Resolved(known[revision.repo_id.lower()], "case")  # the Hub's spelling, or its rename
        bases = [base for base in revision.base_models if names.is_repo_id(base)]
        if not bases:
            raise NotFound(not_in_registry(checkpoints, repo_id, f"; the Hub's card of {revision.repo_id} names "
                                                                 "no base model"))
        chain.append((revision.repo_id, revision.base_model_relation or "unknown"))
        held = [known[base.lower()] for base in bases if base.lower() in known]
        if held:
            base = held[0]
            relation = chain[0][1]
            via = "".join(f" via {repo} ({rel})" for repo, rel in chain[1:])
            what = _DERIVATIVE_NOTES.get(relation, "a derivative whose relation its card does not say: measure it")
            note = f"for the base {base}; this repo is {what}{via}"
            return Resolved(base, "base_model", Derivation(chain[0][0], relation, tuple(chain), base, note))
        current = bases[0]
    raise NotFound(not_in_registry(checkpoints, repo_id, f"; its base_model chain ({' -> '.join(r for r, _ in chain)}"
                                                         f") reaches no checkpoint of the registry"))
