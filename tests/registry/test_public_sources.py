"""The product cites public sources only (issue 28): no catalog entry, packaged data file or string the product can
print names a file of the workspace's reference material or an issue of this project's own tracker. The public
lists are data with their sources, and `drafters catalog lists` reports the catalog's coverage of each."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import registry
from registry.domain.catalog import load_catalog_data, parse_catalog
from registry.domain.public_lists import PublicListsError, coverage, load_public_lists, parse_public_lists
from tests.support.cli import drafters

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(registry.__file__).parent / "data"
# The workspace's background notes (never public) and this project's issue numbers ("issue 21", "issue #13").
REFERENCE_FILES = ("catalog-gaps.md", "dflash-format.md", "drafters.md", "hub-protocol.md", "machine-notes.md",
                   "specdec.md", "transformers-notes.md")
NOT_PUBLIC = re.compile("|".join(re.escape(name) for name in REFERENCE_FILES) + r"|\bissue #?\d+|§|\bthe reference\b",
                        re.IGNORECASE)
PRODUCT_PACKAGES = ("registry", "drafters", "dashboard", "verifier")


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")


def non_public(document: Any, where: str) -> list[str]:
    return [f"{at}: {text}" for at, text in _strings(document, where) if NOT_PUBLIC.search(text)]


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.json")))
def test_no_packaged_data_names_a_non_public_source(name: str) -> None:
    document = json.loads((DATA / name).read_text(encoding="utf-8"))
    assert non_public(document, name) == []


def test_the_check_catches_each_kind_of_non_public_source() -> None:
    for text in ("drafters.md §2 row 4", "hub-protocol.md §9 (sha)", "repo id: issue 13 (checked)", "Issue #21 says 10",
                 "specdec.md: vLLM v0.20.1+", "not named in the reference"):
        assert non_public({"source": text}, "x"), text
    assert non_public({"source": "https://github.com/z-lab/dflash/issues/121; https://huggingface.co/x/y"}, "x") == []


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_no_string_the_product_can_print_names_a_non_public_source() -> None:
    """Every string literal of the product (docstrings aside, which only developers read): `drafters launch` once
    printed 'specdec.md' as a version source."""
    offending = []
    for package in PRODUCT_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = _docstrings(tree)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                        and NOT_PUBLIC.search(node.value)):
                    offending.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert offending == []


def test_every_catalog_source_is_a_url() -> None:
    catalog = load_catalog_data()
    for entry in [*catalog.targets, *catalog.drafters, *catalog.not_listed]:
        assert "https://" in entry.source, entry


# --------------------------------------------------------------------------------------------- public lists


def test_the_public_lists_are_pinned_to_a_commit() -> None:
    lists = load_public_lists()
    assert [len(p.ids) for p in lists] == [27, 15, 24, 15]  # speculators, SpecBundle, EAGLE-3, z-lab README
    for public in lists:
        assert re.search(r"/blob/[0-9a-f]{40}/", public.url), public.name
        assert all(re.search(r"/blob/[0-9a-f]{40}/", s) for s in public.sources), public.name


def test_the_catalog_holds_every_public_list_id_or_says_why_not() -> None:
    rows = coverage(load_catalog_data(), load_public_lists())
    assert [(r.held, r.total) for r in rows] == [(26, 27), (15, 15), (24, 24), (15, 15)]
    [speculators] = [r for r in rows if r.missing]
    [(peagle, reason)] = [(m.repo_id, m.reason) for m in speculators.missing]
    assert peagle == "RedHatAI/Qwen3-8B-speculator.peagle" and reason and "P-EAGLE" in reason


def test_coverage_reports_a_missing_id_and_ignores_case() -> None:
    document = json.loads((DATA / "catalog.json").read_text(encoding="utf-8"))
    document["drafters"] = [d for d in document["drafters"] if d["repo_id"] != "AngelSlim/Qwen3-4B_eagle3"]
    lists = parse_public_lists({"schema_version": 1, "lists": [
        {"name": "a list", "url": "https://example.org/list",
         "ids": ["AngelSlim/Qwen3-4B_eagle3", "z-lab/qwen3-8b-dflash-b16"]}]})
    [row] = coverage(parse_catalog(document), lists)
    assert (row.held, row.total, [m.repo_id for m in row.missing]) == (1, 2, ["AngelSlim/Qwen3-4B_eagle3"])
    assert row.missing[0].reason is None


@pytest.mark.parametrize(("change", "message"), [
    ({"schema_version": 2}, "schema_version"),
    ({"lists": []}, "non-empty"),
    ({"lists": [{"name": "x", "url": "http://example.org", "ids": ["a/b"]}]}, "https URL"),
    ({"lists": [{"name": "x", "url": "https://example.org", "ids": ["not a repo"]}]}, "not a repo id"),
    ({"lists": [{"name": "x", "url": "https://example.org", "ids": ["a/b", "a/b"]}]}, "twice"),
])
def test_malformed_public_lists_are_refused(change: dict[str, Any], message: str) -> None:
    document = {"schema_version": 1, "lists": [{"name": "x", "url": "https://example.org", "ids": ["a/b"]}], **change}
    with pytest.raises(PublicListsError, match=message):
        parse_public_lists(document)


def test_catalog_lists_command() -> None:
    shown = drafters("catalog", "lists", "--json")
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)
    assert body["schema_version"] >= 1
    rows = {r["name"]: r for r in body["lists"]}
    speculators = rows["vllm-project/speculators: supported models"]
    assert (speculators["held"], speculators["total"]) == (26, 27)
    assert speculators["url"].startswith("https://github.com/vllm-project/speculators/blob/c05b95b3")
    assert speculators["missing"][0]["repo_id"] == "RedHatAI/Qwen3-8B-speculator.peagle"
    table = drafters("catalog", "lists")
    assert table.returncode == 0, table.stderr
    assert "26/27 in the catalog" in table.stdout and "missing RedHatAI/Qwen3-8B-speculator.peagle" in table.stdout


def test_find_answers_for_the_targets_the_public_lists_name(db_env: dict[str, str]) -> None:
    """`find` said "not in the registry" for these before the lists' drafters were catalogued."""
    assert drafters("catalog", "load", env=db_env).returncode == 0
    for target, expected in {
        "Qwen/Qwen3-30B-A3B-Instruct-2507": {"RedHatAI/Qwen3-30B-A3B-Instruct-2507-speculator.eagle3",
                                             "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex"},
        "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": {
            "lmsys/SGLang-EAGLE3-Qwen3-Next-80B-A3B-Instruct-FP8-perfect-blend-regenerated"},
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct": {"RedHatAI/Llama-4-Maverick-17B-128E-Instruct-speculator.eagle3",
                                                          "nvidia/Llama-4-Maverick-17B-128E-Eagle3"},
        "zai-org/GLM-5.1": {"z-lab/GLM-5.1-FP8-DFlash"},
    }.items():
        found = drafters("find", target, "--json", env=db_env)
        assert found.returncode == 0, (target, found.stderr)
        assert expected <= {r["drafter_repo_id"] for r in json.loads(found.stdout)["drafters"]}, target
