"""The compatibility pre-check of the harness, in the PyTorch engine: an incompatible pair is refused from its
folders, with the pair module's reasons, before any weight is loaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from registry.domain import pair
from verifier.engines import pytorch
from verifier.harness.contract import IncompatiblePair
from verifier.harness.pair_check import folder_side, refuse_incompatible
from registry.domain.measurement import RunSettings

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def config_folder(tmp_path: Path, name: str, fixture: str) -> Path:
    """A model folder with only a config.json: no tokenizer, no weights."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copyfile(CONFIGS / fixture, folder / "config.json")
    return folder


def test_an_incompatible_pair_is_refused_before_the_target_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = config_folder(tmp_path, "qwen3-4b", "Qwen__Qwen3-4B.json")  # hidden_size 2560
    drafter = config_folder(tmp_path, "dflash-8b", "z-lab__Qwen3-8B-DFlash-b16.json")  # drafts for 4096

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the target was loaded before the pair was judged")

    monkeypatch.setattr(pytorch, "load_target", no_load)
    with pytest.raises(IncompatiblePair) as refused:
        pytorch.TorchEngine.load(target, drafter, RunSettings(device="cpu"))
    expected = pair.judge(folder_side(drafter), folder_side(target))
    assert expected.verdict == "incompatible"
    assert refused.value.reasons == expected.reasons
    assert any("hidden_size 2560 != 4096" in reason for reason in refused.value.reasons)


def test_a_compatible_pair_passes_with_its_method(tmp_path: Path) -> None:
    target = config_folder(tmp_path, "qwen3-8b", "Qwen__Qwen3-8B.json")
    drafter = config_folder(tmp_path, "dflash-8b", "z-lab__Qwen3-8B-DFlash-b16.json")
    assert refuse_incompatible(target, drafter) == "dflash"
    # A requested method is the method judged and returned.
    assert refuse_incompatible(target, drafter, "dflash2") == "dflash2"
