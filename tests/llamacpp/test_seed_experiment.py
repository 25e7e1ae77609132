"""The seed's experiment in llama.cpp: a DFlash drafter against Gemma-4's own assistant drafter (MTP), both on the
same tiny Gemma-4 target, through `drafters compare --engine llamacpp` and real llama-servers."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.llamacpp import skip_unless_wanted
from tests.tiny_models import cache_root
from verifier.engines.llamacpp.convert import convert_pair
from verifier.engines.llamacpp.gguf import read_gguf_metadata
from tests.support.cli import drafters

skip_unless_wanted()


def _json_documents(text: str) -> list[Any]:
    """`compare --json` prints one JSON document per run, one after the other."""
    decoder, documents, index = json.JSONDecoder(), [], 0
    while index < len(text):
        if text[index].isspace():
            index += 1
            continue
        document, index = decoder.raw_decode(text, index)
        documents.append(document)
    return documents


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return drafters(*args, env=env, timeout=900)


def test_the_tiny_gemma4_pair_converts_with_its_full_attention_head_dim(tmp_path: Path, llama_source: Path) -> None:
    from verifier.tiny.gemma4 import TARGET_GEOMETRY, cached_gemma4_assistant, cached_gemma4_target

    target_dir = cached_gemma4_target(cache_root())
    assistant_dir = cached_gemma4_assistant(cache_root(), target_dir, trained=True)
    target, assistant = convert_pair(target_dir, assistant_dir, tmp_path, source=llama_source)

    assert target.architecture == "gemma4"
    assert assistant is not None and assistant.architecture == "gemma4-assistant"
    metadata = read_gguf_metadata(target.path, ("gemma4.attention.key_length", "gemma4.attention.key_length_swa"))
    assert metadata == {"gemma4.attention.key_length": TARGET_GEOMETRY.head_dim,
                        "gemma4.attention.key_length_swa": TARGET_GEOMETRY.head_dim}
    assert not (target_dir / "tokenizer.json").exists()  # derived for the conversion only, never left in the folder


def test_dflash_against_the_gemma4_assistant_on_one_target_in_llama_cpp(tmp_path: Path, llama_source: Path) -> None:
    from verifier.tiny.dflash import cached_dflash_drafter
    from verifier.tiny.gemma4 import cached_gemma4_assistant, cached_gemma4_target

    target = cached_gemma4_target(cache_root())
    dflash = cached_dflash_drafter(cache_root(), target, trained=True)
    assistant = cached_gemma4_assistant(cache_root(), target, trained=True)
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_LLAMA_CPP_DIR": str(llama_source),
           "DRAFTERS_MODELS_DIR": str(cache_root()), "DRAFTERS_LLAMACPP_THREADS": "1"}

    result = _cli(env, "compare", str(target), str(dflash), str(assistant), "--engine", "llamacpp", "--sets", "chat",
                  "--repeats", "1", "--max-new-tokens", "48", "--device", "cpu", "--json")

    assert result.returncode == 0, result.stderr + result.stdout
    runs = {run["method"]: run for run in _json_documents(result.stdout)}
    assert sorted(runs) == ["dflash", "gemma4-assistant"]
    for run in runs.values():
        assert run["status"] == "ok", run["failure_reason"]
        assert (run["engine"], run["engine_version"]) == ("llama.cpp", "b11434")
        assert run["target"] == str(target)
        assert run["lossless"] is True  # greedy: each pair's output is the target-only llama-server's
        assert run["overall"]["acceptance"]["tau"] >= 1.0 and run["overall"]["tokens_per_s"]["median"] > 0
    assert runs["dflash"]["drafter"] == str(dflash) and runs["gemma4-assistant"]["drafter"] == str(assistant)

    stored = _cli(env, "runs", "--json")
    assert stored.returncode == 0, stored.stderr
    stored_runs = {run["run_id"]: run for run in json.loads(stored.stdout)["items"]}
    assert set(stored_runs) == {run["run_id"] for run in runs.values()}
    assert {run["engine"] for run in stored_runs.values()} == {"llama.cpp"}
    assert all(run["lossless"] is True and run["overall"]["acceptance"]["tau"] >= 1.0
               for run in stored_runs.values())
