"""The harness's compatibility pre-check in the llama.cpp engine: an incompatible pair is refused from its folders
before llama-server is looked for or a weight converted, with the same message as the PyTorch engine's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from registry.domain.measurement import RunSettings
from tests.llamacpp import skip_unless_wanted
from verifier.engines.llamacpp import engine as llamacpp_engine
from verifier.harness.contract import IncompatiblePair
from verifier.harness.pair_check import refuse_incompatible

skip_unless_wanted()

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def config_folder(tmp_path: Path, name: str, fixture: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    shutil.copyfile(CONFIGS / fixture, folder / "config.json")
    return folder


def test_an_incompatible_pair_is_refused_before_llama_server_is_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = config_folder(tmp_path, "qwen3-4b", "Qwen__Qwen3-4B.json")
    drafter = config_folder(tmp_path, "dflash-8b", "z-lab__Qwen3-8B-DFlash-b16.json")

    def no_server() -> None:
        raise AssertionError("llama-server was looked for before the pair was judged")

    monkeypatch.setattr(llamacpp_engine, "find_server", no_server)
    with pytest.raises(IncompatiblePair) as refused:
        llamacpp_engine.load_llamacpp_engine(target, drafter, RunSettings(device="cpu"))
    with pytest.raises(IncompatiblePair) as by_the_harness:
        refuse_incompatible(target, drafter)
    # The PyTorch engine raises the harness's refusal too (tests/verifier/test_pair_check.py): one message.
    assert str(refused.value) == str(by_the_harness.value)
    assert any("hidden_size 2560 != 4096" in reason for reason in refused.value.reasons)
