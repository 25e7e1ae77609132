"""The harness's compatibility pre-check: made once per measurement, before any engine loads a weight (the PyTorch
engine, llama.cpp, the curve job, and a verify through either), from the folders as `drafters check` reads them,
with the pair module's reasons and one message; and a drafter's config.json read once per verify."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from registry.domain import pair
from registry.domain.measurement import RunSettings
from registry.local import LocalRepoError, read_local_repo
from registry.store import Store
from tests.support.file_reads import count_reads
from verifier import curve_job, jobs
from verifier.curve_job import CurveRequest
from verifier.engines import pytorch
from verifier.engines.llamacpp import engine as llamacpp
from verifier.harness import run as harness
from verifier.harness.contract import IncompatiblePair
from verifier.harness.pair_check import check_pair
from verifier.jobs import VerifyRequest
from verifier.prompts import bundled_set

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
FAST = RunSettings(max_new_tokens=8, repeats=1, warmup=0, device="cpu", cost_repeats=1)


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


def _refuse_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every engine's loader, and the first step of each, fails the test if it runs."""
    monkeypatch.setattr(pytorch.TorchEngine, "load", _never("TorchEngine.load"))
    monkeypatch.setattr(pytorch, "load_target", _never("load_target"))
    monkeypatch.setattr(llamacpp, "load_llamacpp_engine", _never("load_llamacpp_engine"))
    monkeypatch.setattr(llamacpp, "find_server", _never("find_server"))
    monkeypatch.setattr(curve_job, "load_llamacpp_engine", _never("load_llamacpp_engine"))


def _paths(store: Store | None) -> dict[str, Callable[[Path, Path], Any]]:
    sets = [bundled_set("code")]
    return {
        "pytorch": lambda target, drafter: pytorch.run_pair(target, drafter, sets, FAST),
        "llama.cpp": lambda target, drafter: llamacpp.run_llamacpp_pair(target, drafter, sets, FAST),
        "curve job": lambda target, drafter: curve_job.run_curve(
            store, CurveRequest(target=str(target), drafter=str(drafter), prompt_sets=("code",)), target, drafter),
        "verify pytorch": lambda target, drafter: jobs.run_engine(
            VerifyRequest(target=str(target), drafter=str(drafter), settings=FAST)),
        "verify llama.cpp": lambda target, drafter: jobs.run_engine(
            VerifyRequest(target=str(target), drafter=str(drafter), settings=FAST, engine="llamacpp")),
    }


@pytest.mark.parametrize("path", ["pytorch", "llama.cpp", "curve job", "verify pytorch", "verify llama.cpp"])
def test_every_engine_path_refuses_an_incompatible_pair_before_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: Store, path: str
) -> None:
    target = config_folder(tmp_path, "qwen3-4b", "Qwen__Qwen3-4B.json")  # hidden_size 2560
    drafter = config_folder(tmp_path, "dflash-8b", "z-lab__Qwen3-8B-DFlash-b16.json")  # drafts for 4096
    _refuse_loading(monkeypatch)

    with pytest.raises(IncompatiblePair) as refused:
        _paths(store)[path](target, drafter)
    expected = pair.judge(read_local_repo(drafter).side(), read_local_repo(target).side())  # as `drafters check`
    assert expected.verdict == "incompatible"
    assert refused.value.reasons == expected.reasons
    assert str(refused.value) == str(IncompatiblePair(expected.reasons))  # one message, whichever engine
    assert any("hidden_size 2560 != 4096" in reason for reason in refused.value.reasons)


def test_the_harness_checks_the_pair_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = config_folder(tmp_path, "qwen3-8b", "Qwen__Qwen3-8B.json")
    drafter = config_folder(tmp_path, "dflash-8b", "z-lab__Qwen3-8B-DFlash-b16.json")
    checks: list[Path] = []
    real = harness.check_pair

    def counted(target_dir: Path, drafter_dir: Path | None, method: str | None = None) -> Any:
        checks.append(target_dir)
        return real(target_dir, drafter_dir, method)

    monkeypatch.setattr(harness, "check_pair", counted)
    # The engines are handed the checked pair and check nothing themselves: a loader that stops the run at once.
    monkeypatch.setattr(pytorch, "load_target", _never("load_target"))
    with pytest.raises(AssertionError, match="load_target before"):
        pytorch.run_pair(target, drafter, [bundled_set("code")], FAST)
    assert checks == [target]


def test_a_compatible_pair_passes_with_its_method(tmp_path: Path) -> None:
    target = config_folder(tmp_path, "qwen3-8b", "Qwen__Qwen3-8B.json")
    drafter = config_folder(tmp_path, "dflash-8b", "z-lab__Qwen3-8B-DFlash-b16.json")
    assert check_pair(target, drafter).method == "dflash"
    assert check_pair(target, drafter, "dflash2").method == "dflash2"  # a requested method is the one judged
    assert check_pair(target, None).method is None and check_pair(target, None).drafter is None


def test_an_unreadable_folder_fails_as_drafters_check_says_it(tmp_path: Path) -> None:
    target = config_folder(tmp_path, "qwen3-8b", "Qwen__Qwen3-8B.json")
    drafter = tmp_path / "empty"
    drafter.mkdir()
    for folder in (drafter, tmp_path / "missing"):
        with pytest.raises(LocalRepoError) as checked:
            check_pair(target, folder)
        with pytest.raises(LocalRepoError) as read:
            read_local_repo(folder)
        assert str(checked.value) == str(read.value)
    (drafter / "config.json").write_text('{"hidden_size": ')
    with pytest.raises(LocalRepoError, match="config.json: config is not valid JSON"):
        check_pair(target, drafter)


def test_a_verify_reads_the_drafters_config_once(monkeypatch: pytest.MonkeyPatch, tiny_target_dir: Path,
                                                 tiny_dflash_dir: Path) -> None:
    """Pre-check, draft length and the method's builder all take the config the pre-check read (issue 36: it was
    read 4 times per DFlash verify: the pre-check, the draft length, the layout and the z-lab builder)."""
    reads = count_reads(monkeypatch, tiny_dflash_dir / "config.json")
    run = pytorch.run_pair(tiny_target_dir, tiny_dflash_dir, [bundled_set("code")], FAST)
    assert run.method == "dflash" and run.lossless is True
    assert len(reads) == 1
