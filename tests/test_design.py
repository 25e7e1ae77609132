"""docs/design.md says where things are: every module it names exists, every module of registry/ is named in it,
and its list of the modules over 400 lines is the list the tree has.

A name in backticks is read in its place: a table row whose first cell names a folder (`store/`) and the section
heading above it (`## registry/`) say where `events.py` is; a name that is still not found there must end the path
of exactly one file (`store/mappers.py`, `recording.py`). Fenced diagrams are pictures, not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT

DOC = Path("docs") / "design.md"
# What counts as a module of the project, as tests/test_layers.py reads it.
PACKAGES = ("bench", "drafters", "dashboard", "verifier", "registry", "migrations")
MAX_LINES = 400
LONG_MODULES_PHRASE = "stay over 400 lines"
SKIPPED_FOLDERS = {".venv", "__pycache__", "node_modules", "build", "dist"}  # build outputs (.gitignore) hold copies


@dataclass(frozen=True)
class Mention:
    token: str  # as written between backticks: `events.py`, `store/`, `registry/hub/__init__.py`
    line: int
    places: tuple[str, ...]  # the folders it is read in, most specific first ("" last: the repository root)


def python_files(root: Path) -> set[str]:
    """Every .py file of the tree as a path relative to `root` (hidden folders and virtual environments left out)."""
    return {path.relative_to(root).as_posix() for path in root.rglob("*.py")
            if not any(part.startswith(".") or part in SKIPPED_FOLDERS for part in path.relative_to(root).parts)}


def mentions(doc: str) -> list[Mention]:
    found: list[Mention] = []
    section = ""
    fenced = False
    for number, line in enumerate(doc.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if heading := re.match(r"#+\s+(\S+)", line):
            section = heading.group(1) if heading.group(1).endswith("/") else ""
            continue
        rows: list[str] = []
        if line.startswith("|"):
            first = line.split("|")[1]
            rows = [folder if folder.startswith(section) else section + folder
                    for folder in re.findall(r"`([^`\s]+/)`", first)]
        places = tuple(dict.fromkeys([*rows, section, ""]))
        found += [Mention(token, number, places) for token in re.findall(r"`([^`\s]+(?:\.py|/))`", line)]
    return found


def folders(files: set[str]) -> set[str]:
    return {"/".join(f.split("/")[:n]) + "/" for f in files for n in range(1, f.count("/") + 1)}


def resolve(mention: Mention, files: set[str], folders: set[str]) -> list[str]:
    """The files (or folders) a mention can mean: the one in its place, else every path it ends."""
    known = folders if mention.token.endswith("/") else files
    for place in mention.places:
        if place + mention.token in known:
            return [place + mention.token]
    return sorted(path for path in known if path == mention.token or path.endswith("/" + mention.token))


def named(root: Path, doc: str) -> tuple[set[str], list[str]]:
    """What the doc names (files and folders), and a problem for each `*.py` it names that is not one file."""
    files = python_files(root)
    every_folder = folders(files)
    out: set[str] = set()
    problems = []
    for mention in mentions(doc):
        meant = resolve(mention, files, every_folder)
        if len(meant) == 1:
            out.add(meant[0])
        elif mention.token.endswith(".py"):
            problems.append(f"{DOC}:{mention.line}: `{mention.token}` " + (
                "is no file" if not meant else f"could be any of {', '.join(meant)} (write its folder)"))
    return out, problems


def unnamed_modules(root: Path, doc: str, package: str = "registry") -> list[str]:
    """The modules of `package` the doc never names; a package's `__init__.py` is named by its folder."""
    known, _ = named(root, doc)
    return sorted(path for path in python_files(root) if path.startswith(package + "/") and path not in known
                  and not (path.endswith("/__init__.py") and path.removesuffix("__init__.py") in known))


def long_modules(root: Path) -> set[str]:
    return {path for path in python_files(root) if path.split("/")[0] in PACKAGES
            and len((root / path).read_text().splitlines()) > MAX_LINES}


def listed_long_modules(root: Path, doc: str) -> set[str]:
    """The modules named in the one paragraph (or list item) of the doc that says which stay over 400 lines."""
    blocks = [b for b in re.split(r"\n\s*\n|\n(?=- )", doc) if LONG_MODULES_PHRASE in " ".join(b.split())]
    assert len(blocks) == 1, f"{DOC} says which modules {LONG_MODULES_PHRASE} in {len(blocks)} places, not one"
    files = python_files(root)
    return {path for token in re.findall(r"`([^`\s]+\.py)`", blocks[0])
            for path in resolve(Mention(token, 0, ("",)), files, set())}


def test_every_module_the_design_names_exists() -> None:
    assert named(REPO_ROOT, (REPO_ROOT / DOC).read_text())[1] == []


def test_every_registry_module_is_named_in_the_design() -> None:
    assert unnamed_modules(REPO_ROOT, (REPO_ROOT / DOC).read_text()) == []


def test_the_design_lists_the_modules_over_400_lines() -> None:
    assert listed_long_modules(REPO_ROOT, (REPO_ROOT / DOC).read_text()) == long_modules(REPO_ROOT)


def plant(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


TREE = {
    "registry/store/__init__.py": "",
    "registry/store/events.py": "",
    "registry/watch/events.py": "",
    "registry/watch/poller.py": "X = 1\n" * 401,
    "registry/reports.py": "",
}
TABLE = "## registry/\n\n| module | holds |\n| --- | --- |\n"


def test_the_checks_fail_on_a_missing_module_an_unnamed_one_and_a_wrong_count(tmp_path: Path) -> None:
    root = plant(tmp_path, TREE)
    doc = ("# Design\n\n" + TABLE + "| `store/` | the one class (`__init__.py`), `events.py`, `gone.py` |\n"
           "| `reports.py` | what the CLI prints; `events.py` |\n\n"
           "```\nwatch/units.py in a diagram is a picture\n```\n\n"
           "- `registry/reports.py` and `registry/store/events.py` stay over 400 lines.\n")
    assert named(root, doc)[1] == [
        "docs/design.md:7: `gone.py` is no file",
        "docs/design.md:8: `events.py` could be any of registry/store/events.py, registry/watch/events.py (write its "
        "folder)",
    ]
    assert unnamed_modules(root, doc) == ["registry/watch/events.py", "registry/watch/poller.py"]
    assert listed_long_modules(root, doc) != long_modules(root) == {"registry/watch/poller.py"}


def test_the_checks_pass_where_the_doc_says_where_everything_is(tmp_path: Path) -> None:
    root = plant(tmp_path, TREE)
    doc = (TABLE + "| `store/` | the one class, `events.py` |\n| `watch/` | `poller.py`, `events.py` |\n"
           "| `reports.py` | what the CLI prints |\n\n- `watch/poller.py` and no other module stay over 400 lines.\n")
    assert named(root, doc)[1] == []
    assert unnamed_modules(root, doc) == []
    assert listed_long_modules(root, doc) == long_modules(root)
