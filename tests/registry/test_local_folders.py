"""One rule of "folder or repo id" (`registry.local.looks_like_folder`) for every layer that asks: `drafters check`,
`verify`'s folder resolution, the run tables, pricing, doctor (and the dashboard's labels); one reader of a folder,
failing with one error and the same words whoever reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.domain.names import repo_org
from registry.local import LocalRepoError, looks_like_folder, read_config, read_local_repo
from verifier.pair_folders import fetched, resolve_folder


@pytest.mark.parametrize(
    ("ref", "folder"),
    [
        ("Qwen/Qwen3-8B", False),  # a repo id
        ("Qwen", False),  # an id without an org is no path either
        ("/data/models/tiny-qwen3-target-0a1b", True),  # written as a path: a folder, on any machine
        ("~/models/qwen3", True),
        ("./qwen3", True),
        ("../qwen3", True),
        ("", False),
        ("   ", False),
    ],
)
def test_a_string_is_a_folder_when_written_as_a_path(ref: str, folder: bool) -> None:
    assert looks_like_folder(ref) is folder


def test_an_existing_directory_is_a_folder_however_it_is_written(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert looks_like_folder("org/name") and not looks_like_folder("org/other")


def test_verify_resolves_by_the_same_rule(tmp_path: Path) -> None:
    """A path that is no folder is never looked up as a repo id in the Hugging Face cache (it was, for ./x)."""
    for ref in ("./no-such-folder", str(tmp_path / "gone")):
        with pytest.raises(FileNotFoundError, match="neither a model folder nor a repo id"):
            resolve_folder(ref, None)
    assert resolve_folder(str(tmp_path), None) == tmp_path
    assert fetched(None, str(tmp_path / "gone"), None) is None  # type: ignore[arg-type]  # a path: no store read


def test_one_reader_one_error_the_same_words(tmp_path: Path) -> None:
    missing, empty, broken = tmp_path / "missing", tmp_path / "empty", tmp_path / "broken"
    empty.mkdir()
    broken.mkdir()
    (broken / "config.json").write_text("[1, 2]")
    for folder, words in ((missing, "is not a folder"), (empty, "has no config.json")):
        for reader in (read_local_repo, read_config):
            with pytest.raises(LocalRepoError, match=words) as raised:
                reader(folder)
            assert str(raised.value) == f"{folder} {words}"
    repo = read_local_repo(broken)  # `drafters check` states an unusable config as the side's problem
    assert repo.config is None and repo.side().problem == "config is a JSON array, not an object"
    with pytest.raises(LocalRepoError) as raised:
        read_config(broken)  # the verifier's readers refuse it, in the same words
    assert str(raised.value) == f"{broken / 'config.json'}: config is a JSON array, not an object"
    with pytest.raises(LocalRepoError) as usable:
        repo.usable_config()
    assert str(usable.value) == str(raised.value)


def test_an_event_about_a_folder_is_filed_under_no_org() -> None:
    """The org a regression or doctor event is filed under: a repo id's, never a folder's ("/models" was org "")."""
    assert repo_org("z-lab/Qwen3-8B-DFlash-b16") == "z-lab"
    assert [repo_org(ref) for ref in ("/models", "./draft", "http://127.0.0.1:8080", "gpt2")] == [None] * 4
