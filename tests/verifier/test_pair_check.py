"""The harness's compatibility pre-check in both engines: an incompatible pair is refused from its folders, with the
pair module's reasons and one message, before the PyTorch engine loads a weight or the llama.cpp engine looks for
llama-server (so no server runs here)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from registry.domain import pair
from registry.domain.measurement import RunSettings
from verifier.engines import pytorch
from verifier.engines.llamacpp import engine as llamacpp
from verifier.harness.contract import IncompatiblePair
from verifier.harness.pair_check import folder_side, refuse_incompatible

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def config_folder(tmp_path: Path, name: str, fixture: str) -> Path:
    """A model folder with only a config.json: no tokenizer, no weights."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copyfile(CONFIGS / fixture, folder / "config.json")
    return folder


def _never(what: str) -> Callable[..., Any]:
    def called(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"{what} before the pair was judged")

    return called


@pytest.mark.parametrize(
    "module, first_step, load",
    [
        (pytorch, "load_target", lambda target, drafter: pytorch.TorchEngine.load(target, drafter, RunSettings())),
        (llamacpp, "find_server",
         lambda target, drafter: llamacpp.load_llamacpp_engine(target, drafter, RunSettings())),
    ],
    ids=["pytorch", "llama.cpp"],
)
def test_both_engines_refuse_an_incompatible_pair_before_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: Any, first_step: str, load: Callable[[Path, Path], Any]
) -> None:
    target = config_folder(tmp_path, "qwen3-4b", "Qwen__Qwen3-4B.json")  # hidden_size 2560
    drafter = config_folder(tmp_path, "dflash-8b", "z-lab__Qwen3-8B-DFlash-b16.json")  # drafts for 4096
    monkeypatch.setattr(module, first_step, _never(first_step))

    with pytest.raises(IncompatiblePair) as refused:
        load(target, drafter)
    expected = pair.judge(folder_side(drafter), folder_side(target))
    assert expected.verdict == "incompatible"
    assert refused.value.reasons == expected.reasons
    assert str(refused.value) == str(IncompatiblePair(expected.reasons))  # one message, whichever engine
    assert any("hidden_size 2560 != 4096" in reason for reason in refused.value.reasons)


def test_a_compatible_pair_passes_with_its_method(tmp_path: Path) -> None:
    target = config_folder(tmp_path, "qwen3-8b", "Qwen__Qwen3-8B.json")
    drafter = config_folder(tmp_path, "dflash-8b", "z-lab__Qwen3-8B-DFlash-b16.json")
    assert refuse_incompatible(target, drafter) == "dflash"
    assert refuse_incompatible(target, drafter, "dflash2") == "dflash2"  # a requested method is the one judged
