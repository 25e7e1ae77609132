"""The public lists of drafters (registry/data/public_lists.json) and how much of each the catalog holds.

Each list is a page someone keeps by hand (a README table, a docs page), pinned to the commit it was read at, with
the Hugging Face repo ids it names. The catalog's coverage of a list is which of those ids it holds as drafters; an
id it lacks is either left out on purpose (a `not_listed` entry says why) or simply missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from registry.domain.catalog import Catalog
from registry.domain.names import RepoNameError, split_repo_id

SCHEMA_VERSION = 1


class PublicListsError(ValueError):
    """The packaged public lists file is malformed."""


@dataclass(frozen=True)
class PublicList:
    name: str
    url: str  # the page, pinned to the commit it was read at
    sources: tuple[str, ...]  # every page the ids were read from (the first is `url`)
    ids: tuple[str, ...]
    left_out: tuple[str, ...]  # what the page names that is no Hugging Face repo, and why


@dataclass(frozen=True)
class Missing:
    repo_id: str
    reason: str | None  # the catalog's `not_listed` reason when it leaves the id out on purpose


@dataclass(frozen=True)
class ListCoverage:
    name: str
    url: str
    sources: tuple[str, ...]
    total: int
    held: int
    missing: tuple[Missing, ...]


def load_public_lists() -> tuple[PublicList, ...]:
    text = resources.files("registry").joinpath("data", "public_lists.json").read_text(encoding="utf-8")
    return parse_public_lists(json.loads(text))


def parse_public_lists(document: Any) -> tuple[PublicList, ...]:
    if not isinstance(document, dict) or document.get("schema_version") != SCHEMA_VERSION:
        raise PublicListsError(f"public lists: schema_version must be {SCHEMA_VERSION}")
    raw_lists = document.get("lists")
    if not isinstance(raw_lists, list) or not raw_lists:
        raise PublicListsError("public lists: 'lists' must be a non-empty list")
    return tuple(_one(i, raw) for i, raw in enumerate(raw_lists))


def _one(index: int, raw: Any) -> PublicList:
    where = f"public lists[{index}]"
    if not isinstance(raw, dict):
        raise PublicListsError(f"{where}: must be an object")
    name, url = raw.get("name"), raw.get("url")
    if not isinstance(name, str) or not name.strip():
        raise PublicListsError(f"{where}: 'name' must be a non-empty string")
    if not isinstance(url, str) or not url.startswith("https://"):
        raise PublicListsError(f"{where} ({name}): 'url' must be an https URL")
    sources = tuple(raw.get("sources") or (url,))
    if sources[0] != url or not all(isinstance(s, str) and s.startswith("https://") for s in sources):
        raise PublicListsError(f"{where} ({name}): 'sources' must be https URLs starting with 'url'")
    ids = raw.get("ids")
    if not isinstance(ids, list) or not ids:
        raise PublicListsError(f"{where} ({name}): 'ids' must be a non-empty list")
    for repo_id in ids:
        try:
            split_repo_id(repo_id)
        except RepoNameError as exc:
            raise PublicListsError(f"{where} ({name}): {repo_id!r} is not a repo id ({exc})") from exc
    if len(set(ids)) != len(ids):
        raise PublicListsError(f"{where} ({name}): an id is listed twice")
    left_out = raw.get("left_out", [])
    if not isinstance(left_out, list) or not all(isinstance(x, str) for x in left_out):
        raise PublicListsError(f"{where} ({name}): 'left_out' must be a list of strings")
    return PublicList(name=name, url=url, sources=sources, ids=tuple(ids), left_out=tuple(left_out))


def coverage(catalog: Catalog, lists: tuple[PublicList, ...]) -> tuple[ListCoverage, ...]:
    """Per list: how many of its ids the catalog holds as drafters, and the missing ones (with the catalog's reason
    where it leaves one out on purpose). Hub ids are case-insensitive, so case never hides a held drafter."""
    held_ids = {d.repo_id.lower() for d in catalog.drafters}
    reasons = {item.what.lower(): item.reason for item in catalog.not_listed}
    result = []
    for public in lists:
        missing = tuple(Missing(i, reasons.get(i.lower())) for i in public.ids if i.lower() not in held_ids)
        result.append(ListCoverage(name=public.name, url=public.url, sources=public.sources, total=len(public.ids),
                                   held=len(public.ids) - len(missing), missing=missing))
    return tuple(result)
