"""The llama.cpp commands `drafters launch` prints, executed as printed on a tiny pair: the GGUF conversions, then
llama-server with the drafter; it starts, answers /health, completes one prompt, and its draft counters move.

Only the program paths are filled in (the converter of the installed build, the installed llama-server) and the
server is kept on a free loopback port with one thread; every flag of the launch command is passed unchanged.

The prompt is one the tiny pairs were trained for, sent as the verifier sends it (the target's chat template, as token
ids): a raw "def fibonacci(n):" without the template is outside what the tiny EAGLE-3 head learned, and PyTorch's own
EAGLE-3 loop accepts none of its drafts there either (the same 27 drafts, 0 accepted, as llama-server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from registry.domain.launch import DraftLength, PairFacts, launch_command
from tests.llamacpp import skip_unless_wanted
from tests.tiny_models import cache_root
from verifier.methods.eagle3.config import SPECULATORS_LAYOUT
from verifier.engines.llamacpp.install import ServerBinary
from verifier.engines.llamacpp.server import free_port
from verifier.prompts import bundled_set, encode_prompt

skip_unless_wanted()


def _prompt_ids(target: Path) -> list[int]:
    """The first chat prompt in the verifier's encoding (verifier.engines.llamacpp sends token ids, never text)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(target, local_files_only=True)
    return encode_prompt(bundled_set("chat").prompts[0], tokenizer)


def _run_launch(pair: PairFacts, draft_length: int, work: Path, binary: ServerBinary, source: Path) -> dict:
    launch = launch_command(pair, "llamacpp", DraftLength(draft_length, "test"), local=True)
    assert launch.supported, launch.reason
    env = {**os.environ, "PYTHONPATH": str(source / "gguf-py"), "HF_HUB_OFFLINE": "1"}
    for step in launch.steps:
        assert step[:2] == ("python", "convert_hf_to_gguf.py"), step  # local pairs: nothing to download
        done = subprocess.run([sys.executable, str(source / "convert_hf_to_gguf.py"), *step[2:]], cwd=work, env=env,
                              capture_output=True, text=True, timeout=900, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    assert launch.argv[0] == "llama-server"
    port = free_port()
    server = subprocess.Popen([str(binary.path), *launch.argv[1:], "--host", "127.0.0.1", "--port", str(port),
                               "-t", "1", "-td", "1", "-c", "512", "--no-warmup"],
                              cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, server.stdout.read().decode(errors="replace")[-2000:]  # type: ignore[union-attr]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "llama-server was not ready in 300 s"
            time.sleep(0.1)
        answer = httpx.post(f"http://127.0.0.1:{port}/completion", timeout=300, json={
            "prompt": _prompt_ids(Path(pair.target)), "n_predict": 32, "temperature": 0.0, "cache_prompt": False}).json()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return answer


def test_the_printed_draft_lm_command_serves_with_drafts(
    tmp_path: Path, server_binary: ServerBinary, llama_source: Path, qwen3_target: Path, draft_lm: Path
) -> None:
    pair = PairFacts(str(qwen3_target), None, str(draft_lm), None, "draft-lm")
    answer = _run_launch(pair, 4, tmp_path, server_binary, llama_source)
    timings = answer["timings"]
    assert answer["content"] and timings["predicted_n"] > 0
    assert timings["draft_n"] > 0 and timings["draft_n_accepted"] > 0, timings
    assert (tmp_path / f"{qwen3_target.name}.gguf").is_file() and (tmp_path / f"{draft_lm.name}.gguf").is_file()


# The printed EAGLE-3 commands (documented conversion with --target-model-dir, --spec-type draft-eagle3) draft but
# accept nothing on the tiny heads of either layout, in bf16 or f32, while the verifier's own conversion of the same
# head accepts (tests/llamacpp/test_eagle3_agreement.py, τ 2.8): open in issue 23; strict, so a fix shows.
EAGLE3_ACCEPTS_NOTHING = pytest.mark.xfail(strict=True, reason="printed llama.cpp EAGLE-3 commands accept no draft")


@pytest.mark.parametrize("method", ["dflash", pytest.param("eagle3", marks=EAGLE3_ACCEPTS_NOTHING)])
def test_the_printed_block_and_head_commands_serve_with_drafts(
    method: str, tmp_path: Path, server_binary: ServerBinary, llama_source: Path, qwen3_target: Path
) -> None:
    """The methods whose conversion needs the target (`--target-model-dir`): DFlash and an EAGLE-3 head."""
    from verifier.tiny.dflash import cached_dflash_drafter
    from verifier.tiny.eagle3 import cached_eagle3_head

    if method == "dflash":
        drafter = cached_dflash_drafter(cache_root(), qwen3_target, trained=True)
        block_size: int | None = int(json.loads((drafter / "config.json").read_text())["block_size"])
    else:
        drafter = cached_eagle3_head(cache_root(), qwen3_target, trained=True, layout=SPECULATORS_LAYOUT)
        block_size = None
    pair = PairFacts(str(qwen3_target), None, str(drafter), None, method, block_size=block_size)
    answer = _run_launch(pair, (block_size - 1) if block_size else 3, tmp_path, server_binary, llama_source)
    timings = answer["timings"]
    assert answer["content"] and timings["predicted_n"] > 0
    assert timings["draft_n"] > 0 and timings["draft_n_accepted"] > 0, timings
