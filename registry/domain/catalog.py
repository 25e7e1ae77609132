"""The packaged drafter catalog (registry/data/catalog.json): facts from the reference material, read and
validated into plain values. The database loader sits on top of this module; nothing here touches a database.

Release dates carry a precision: "day" (exact), "month" (only the month is known; the date is its first day)
or "approx" (a best single-day estimate such as "≈late Feb 2026" -> 2026-02-25); `released_note` keeps the
wording of the source.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

from registry.domain.names import COMMIT_SHA, RepoNameError, split_repo_id

METHODS = ("dflash", "dflash2", "dspark", "gemma4-assistant", "eagle3", "draft-lm", "mtp")
BUILT_IN_ONLY_METHODS = ("mtp",)  # only ever inside a full checkpoint: such an entry must be built in
RELEASE_PRECISIONS = ("day", "month", "approx")
# Who named a drafter's target; the data file only holds what the catalog itself asserts.
TARGET_DECLARERS = ("catalog",)
SCHEMA_VERSION = 1

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_LICENSE_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,63}$")
_REPLACEMENT_RE = re.compile(r"^(?P<when>\d{4}-\d{2}-\d{2}|undated): \S")


class CatalogError(ValueError):
    """The catalog data file is malformed; `entry` and `field` say where."""

    def __init__(self, entry: str, field_name: str | None, problem: str) -> None:
        self.entry = entry
        self.field = field_name
        self.problem = problem
        where = f"{entry}, field {field_name!r}" if field_name else entry
        super().__init__(f"catalog {where}: {problem}")


@dataclass(frozen=True)
class CatalogTarget:
    repo_id: str
    org: str
    family: str
    released: date | None
    released_precision: str | None
    released_note: str | None
    sha: str | None  # a known commit (the most common one where several circulate)
    other_shas: tuple[str, ...]
    gated: bool | None  # None: the reference does not say
    config: dict[str, Any] | None = field(hash=False)  # config.json facts from the reference only
    source: str


@dataclass(frozen=True)
class CatalogDrafter:
    repo_id: str
    method: str
    publisher: str
    targets: tuple[str, ...]  # empty when the reference does not name the target repo
    target_declared_by: str
    released: date | None
    released_precision: str | None
    released_note: str | None
    family: str
    block_size: int | None
    weight_bytes: int | None
    gated: bool | None
    in_21: bool | None  # z-lab's "21 DFlash checkpoints"; None for methods other than dflash
    replaced_in_place: tuple[str, ...]  # "YYYY-MM-DD: what changed" or "undated: what changed"
    sha: str | None
    config: dict[str, Any] | None = field(hash=False)  # reconstructed config.json, stated values only
    notes: str | None
    source: str
    # Inside a full checkpoint (`repo_id`; an MTP head's is its target) carrying the weights of `targets`: DeepSeek-V4
    # DSpark, MiMo FP4 DFlash, MTP heads. No drafter anyone adds; there from that checkpoint's release, so no lag.
    built_in: bool = False
    # Which revision the stated facts (config, block size, weight bytes) describe, when the repo was replaced.
    facts_revision: str | None = None
    # weight_bytes back-computed from a rounded GiB/GB figure: good to about 1%, not a byte count.
    weight_bytes_approx: bool = False
    # The license the repo states (the Hub's license id, e.g. "cc-by-nc-nd-4.0"); None where no source says.
    license: str | None = None


@dataclass(frozen=True)
class NotListed:
    """A drafter the reference mentions that the catalog leaves out, and why."""

    what: str
    reason: str
    source: str


@dataclass(frozen=True)
class Catalog:
    targets: tuple[CatalogTarget, ...]
    drafters: tuple[CatalogDrafter, ...]
    not_listed: tuple[NotListed, ...]

    def target(self, repo_id: str) -> CatalogTarget:
        for target in self.targets:
            if target.repo_id == repo_id:
                return target
        raise KeyError(repo_id)

    def drafters_for(self, target_repo_id: str) -> tuple[CatalogDrafter, ...]:  # built-in ones are not added
        return tuple(d for d in self.drafters if target_repo_id in d.targets and not d.built_in)

    def built_in_methods(self, repo_id: str) -> tuple[str, ...]:  # drafting methods inside the checkpoint
        return tuple(sorted({d.method for d in self.drafters if d.built_in and d.repo_id == repo_id}))


def load_catalog_data(path: Path | None = None) -> Catalog:
    """Read and validate the catalog file (default: the one packaged with registry)."""
    origin = str(path) if path is not None else "registry/data/catalog.json"
    try:
        if path is None:
            text = resources.files("registry").joinpath("data", "catalog.json").read_text(encoding="utf-8")
        else:
            text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"file {origin}", None, f"cannot be read ({exc.__class__.__name__}: {exc})") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError(
            f"file {origin}", None, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    return parse_catalog(document)


def parse_catalog(document: Any) -> Catalog:
    """Validate an already-decoded catalog document (pure)."""
    top = _Fields("document", document, required={"schema_version", "targets", "drafters", "not_listed"})
    version = top.value("schema_version")
    if version != SCHEMA_VERSION:
        raise CatalogError("document", "schema_version", f"is {version!r}, this code reads {SCHEMA_VERSION}")
    targets = tuple(_target(f"targets[{i}]", raw) for i, raw in enumerate(top.list_of("targets")))
    drafters = tuple(_drafter(f"drafters[{i}]", raw) for i, raw in enumerate(top.list_of("drafters")))
    not_listed = tuple(_not_listed(f"not_listed[{i}]", raw) for i, raw in enumerate(top.list_of("not_listed")))
    _check_cross_references(targets, drafters)
    return Catalog(targets=targets, drafters=drafters, not_listed=not_listed)


def _check_cross_references(targets: tuple[CatalogTarget, ...], drafters: tuple[CatalogDrafter, ...]) -> None:
    target_ids: set[str] = set()
    for i, target in enumerate(targets):
        if target.repo_id in target_ids:
            raise CatalogError(f"targets[{i}] ({target.repo_id})", "repo_id", "duplicate target repo id")
        target_ids.add(target.repo_id)
    drafter_ids: set[str] = set()
    for i, drafter in enumerate(drafters):
        label = f"drafters[{i}] ({drafter.repo_id})"
        if drafter.repo_id in drafter_ids:
            raise CatalogError(label, "repo_id", "duplicate drafter repo id")
        # An MTP head ships inside its target: the one entry that may share the target's repo id.
        if drafter.repo_id in target_ids and not (drafter.built_in and drafter.targets == (drafter.repo_id,)):
            raise CatalogError(label, "repo_id", "is also listed as a target")
        drafter_ids.add(drafter.repo_id)
        for target_id in drafter.targets:
            if target_id not in target_ids:
                raise CatalogError(label, "targets", f"{target_id!r} is not in the catalog's targets")


def _target(label: str, raw: Any) -> CatalogTarget:
    fields = _Fields(
        label,
        raw,
        required={"repo_id", "org", "family", "source"},
        optional={"released", "released_precision", "released_note", "sha", "other_shas", "gated", "config"},
    )
    repo_id = fields.repo_id("repo_id")
    fields.label = f"{label} ({repo_id})"
    org = fields.text("org")
    if org != repo_id.split("/")[0]:
        raise CatalogError(fields.label, "org", f"{org!r} is not the org of {repo_id!r}")
    released, precision, note = fields.release()
    return CatalogTarget(
        repo_id=repo_id,
        org=org,
        family=fields.text("family"),
        released=released,
        released_precision=precision,
        released_note=note,
        sha=fields.optional_sha("sha"),
        other_shas=tuple(fields.sha_list("other_shas")),
        gated=fields.optional_bool("gated"),
        config=fields.optional_object("config"),
        source=fields.text("source"),
    )


def _drafter(label: str, raw: Any) -> CatalogDrafter:
    fields = _Fields(
        label,
        raw,
        required={"repo_id", "method", "publisher", "targets", "family", "source"},
        optional={
            "target_declared_by",
            "released",
            "released_precision",
            "released_note",
            "block_size",
            "weight_bytes",
            "gated",
            "in_21",
            "replaced_in_place",
            "sha",
            "config",
            "notes",
            "built_in",
            "facts_revision",
            "weight_bytes_approx",
            "license",
        },
    )
    repo_id = fields.repo_id("repo_id")
    fields.label = f"{label} ({repo_id})"
    method = fields.choice("method", METHODS)
    in_21 = fields.optional_bool("in_21")
    # The "21" is a count of z-lab DFlash 1 checkpoints: only dflash entries take a side.
    if (method == "dflash") != (in_21 is not None):
        raise CatalogError(fields.label, "in_21", "must be true/false for method 'dflash' and null otherwise")
    targets = fields.repo_id_list("targets")
    if len(set(targets)) != len(targets):
        raise CatalogError(fields.label, "targets", "lists a target twice")
    released, precision, note = fields.release()
    built_in = fields.optional_bool("built_in") is True
    if method in BUILT_IN_ONLY_METHODS and not built_in:  # an MTP head is part of its checkpoint
        raise CatalogError(fields.label, "built_in", f"method {method!r} ships inside a checkpoint: must be true")
    if built_in and repo_id in targets and targets != [repo_id]:
        raise CatalogError(fields.label, "targets", "a drafter built into its own repo has that repo as its one target")
    return CatalogDrafter(
        repo_id=repo_id,
        method=method,
        publisher=fields.text("publisher"),
        targets=tuple(targets),
        target_declared_by=fields.choice("target_declared_by", TARGET_DECLARERS, default="catalog"),
        released=released,
        released_precision=precision,
        released_note=note,
        family=fields.text("family"),
        block_size=fields.optional_positive_int("block_size"),
        weight_bytes=fields.optional_positive_int("weight_bytes"),
        gated=fields.optional_bool("gated"),
        in_21=in_21,
        replaced_in_place=tuple(fields.replacements("replaced_in_place")),
        sha=fields.optional_sha("sha"),
        config=fields.optional_object("config"),
        notes=fields.optional_text("notes"),
        source=fields.text("source"),
        built_in=built_in,
        facts_revision=fields.optional_text("facts_revision"),
        weight_bytes_approx=fields.optional_bool("weight_bytes_approx") is True,
        license=fields.license("license"),
    )


def _not_listed(label: str, raw: Any) -> NotListed:
    fields = _Fields(label, raw, required={"what", "reason", "source"})
    return NotListed(what=fields.text("what"), reason=fields.text("reason"), source=fields.text("source"))


class _Fields:
    """Typed access to one JSON object of the catalog; every failure names the entry and the field."""

    def __init__(self, label: str, raw: Any, required: set[str], optional: set[str] | None = None) -> None:
        self.label = label
        if not isinstance(raw, dict):
            raise CatalogError(label, None, f"must be a JSON object, not {type(raw).__name__}")
        allowed = required | (optional or set())
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise CatalogError(label, unknown[0], "unknown field")
        missing = sorted(required - set(raw))
        if missing:
            raise CatalogError(label, missing[0], "missing")
        self._raw: dict[str, Any] = raw

    def fail(self, name: str, problem: str) -> CatalogError:
        return CatalogError(self.label, name, problem)

    def value(self, name: str) -> Any:
        return self._raw.get(name)

    def text(self, name: str) -> str:
        value = self._raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(name, f"must be a non-empty string, got {value!r}")
        return value

    def optional_text(self, name: str) -> str | None:
        return None if self._raw.get(name) is None else self.text(name)

    def license(self, name: str) -> str | None:
        if (value := self.optional_text(name)) is not None and not _LICENSE_RE.fullmatch(value):
            raise self.fail(name, f"must be a Hub license id such as 'apache-2.0' or 'cc-by-nc-nd-4.0', got {value!r}")
        return value

    def choice(self, name: str, allowed: tuple[str, ...], default: str | None = None) -> str:
        value = self._raw.get(name, default)
        if not isinstance(value, str) or value not in allowed:
            raise self.fail(name, f"{value!r} is not one of {', '.join(allowed)}")
        return value

    def repo_id(self, name: str) -> str:
        value = self.text(name)
        try:
            split_repo_id(value)
        except RepoNameError as exc:
            raise self.fail(name, str(exc)) from exc
        return value

    def list_of(self, name: str) -> list[Any]:
        value = self._raw.get(name, [])
        if not isinstance(value, list):
            raise self.fail(name, f"must be a list, got {type(value).__name__}")
        return value

    def repo_id_list(self, name: str) -> list[str]:
        items = self.list_of(name)
        for item in items:
            if not isinstance(item, str):
                raise self.fail(name, f"items must be repo ids, got {item!r}")
            try:
                split_repo_id(item)
            except RepoNameError as exc:
                raise self.fail(name, str(exc)) from exc
        return items

    def optional_bool(self, name: str) -> bool | None:
        value = self._raw.get(name)
        if value is not None and not isinstance(value, bool):
            raise self.fail(name, f"must be true, false or null, got {value!r}")
        return value

    def optional_positive_int(self, name: str) -> int | None:
        value = self._raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(name, f"must be a positive integer or null, got {value!r}")
        return value

    def optional_object(self, name: str) -> dict[str, Any] | None:
        value = self._raw.get(name)
        if value is not None and not isinstance(value, dict):
            raise self.fail(name, f"must be a JSON object or null, got {type(value).__name__}")
        return value

    def optional_sha(self, name: str) -> str | None:
        value = self._raw.get(name)
        if value is not None and not (isinstance(value, str) and COMMIT_SHA.fullmatch(value)):
            raise self.fail(name, f"must be a 40-hex commit sha or null, got {value!r}")
        return value

    def sha_list(self, name: str) -> list[str]:
        items = self.list_of(name)
        for item in items:
            if not (isinstance(item, str) and COMMIT_SHA.fullmatch(item)):
                raise self.fail(name, f"items must be 40-hex commit shas, got {item!r}")
        return items

    def parse_date(self, name: str, value: Any) -> date:
        if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
            raise self.fail(name, f"must be a date YYYY-MM-DD, got {value!r}")
        try:
            return date.fromisoformat(value)
        except ValueError as exc:
            raise self.fail(name, f"{value!r} is not a calendar date") from exc

    def release(self) -> tuple[date | None, str | None, str | None]:
        raw_date = self._raw.get("released")
        precision = self._raw.get("released_precision")
        note = self.optional_text("released_note")
        if raw_date is None:
            if precision is not None:
                raise self.fail("released_precision", "must be null when released is null")
            return None, None, note
        released = self.parse_date("released", raw_date)
        precision = self.choice("released_precision", RELEASE_PRECISIONS)
        if precision == "month" and released.day != 1:
            raise self.fail("released", "a month-precision date must be the first day of its month")
        return released, precision, note

    def replacements(self, name: str) -> list[str]:
        items = self.list_of(name)
        for item in items:
            match = _REPLACEMENT_RE.match(item) if isinstance(item, str) else None
            if match is None:
                raise self.fail(name, f"items must read 'YYYY-MM-DD: what changed' or 'undated: …', got {item!r}")
            if match.group("when") != "undated":
                self.parse_date(name, match.group("when"))
        return items
