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
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from registry.domain.launch import UNSUPPORTED_LAYOUTS, DraftLength, PairFacts, launch_command
from registry.domain.llama_commands import CONVERTER_COMMAND, SERVER_PROGRAM, eagle3_converter_layers
from tests.llamacpp import skip_unless_wanted
from tests.tiny_models import cache_root
from verifier.engines.llamacpp.gguf import read_gguf_metadata
from verifier.engines.llamacpp.server import free_port
from registry.local import read_config
from verifier.methods.eagle3.config import SPECULATORS_LAYOUT, YUHUILI_LAYOUT, parse_eagle3_config
from verifier.prompts import bundled_set, encode_prompt

skip_unless_wanted()


def _prompt_ids(target: Path) -> list[int]:
    """The first chat prompt in the verifier's encoding (verifier.engines.llamacpp sends token ids, never text)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(target, local_files_only=True)
    return encode_prompt(bundled_set("chat").prompts[0], tokenizer)


def _program(name: str) -> str:
    """A printed program as the README's install puts it on PATH: the console scripts of this environment."""
    path = Path(sys.executable).parent / name
    assert path.is_file(), f"{name} is not installed next to {sys.executable}"
    return str(path)


def _run_launch(pair: PairFacts, draft_length: int | None, work: Path, source: Path) -> dict:
    """Every printed command run as printed: `drafters convert-hf-to-gguf …` (llama.cpp's converter of the
    installed build, here the cached sdist through DRAFTERS_LLAMA_CPP_DIR), then `llama-cpp-server …` (the llamacpp
    extra's console script); only the port and this machine's thread and context limits are added."""
    measured = DraftLength(draft_length, "test") if draft_length is not None else None
    launch = launch_command(pair, "llamacpp", measured, local=True)
    assert launch.supported, launch.reason
    env = {**os.environ, "DRAFTERS_LLAMA_CPP_DIR": str(source), "HF_HUB_OFFLINE": "1"}
    for step in launch.steps:
        assert step[:2] == CONVERTER_COMMAND or step[:2] == ("python", "-c"), step  # local pairs: no download
        program = [_program(step[0])] if step[:2] == CONVERTER_COMMAND else [sys.executable]
        done = subprocess.run([*program, *step[1:]], cwd=work, env=env, capture_output=True, text=True, timeout=900,
                              check=False)
        assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    assert launch.argv[0] == SERVER_PROGRAM and launch.argv[3] == "--"
    port = free_port()
    # The wrapper starts llama-server as its child: a session of their own, so that both stop together.
    server = subprocess.Popen([_program(SERVER_PROGRAM), *launch.argv[1:], "-t", "1", "-td", "1", "-c", "512",
                               "--no-warmup"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**env, "LLAMA_HOST": "127.0.0.1", "LLAMA_PORT": str(port)},
                              start_new_session=True)
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
            "prompt": _prompt_ids(Path(pair.target)), "n_predict": 32, "temperature": 0.0,
            "cache_prompt": False}).json()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    answer["launch"] = launch
    return answer


def test_the_printed_draft_lm_command_serves_with_drafts(
    tmp_path: Path, llama_source: Path, qwen3_target: Path, draft_lm: Path
) -> None:
    pair = PairFacts(str(qwen3_target), None, str(draft_lm), None, "draft-lm")
    answer = _run_launch(pair, None, tmp_path, llama_source)  # llama-server's own default length, as printed
    timings = answer["timings"]
    assert answer["content"] and timings["predicted_n"] > 0
    assert timings["draft_n"] > 0 and timings["draft_n_accepted"] > 0, timings
    assert (tmp_path / f"{qwen3_target.name}.gguf").is_file() and (tmp_path / f"{draft_lm.name}.gguf").is_file()


@pytest.mark.parametrize(("method", "layout"), [("dflash", None), ("eagle3", SPECULATORS_LAYOUT),
                                               pytest.param("eagle3", YUHUILI_LAYOUT, id="eagle3-yuhuili")])
def test_the_printed_block_and_head_commands_serve_with_drafts(
    method: str, layout: str | None, tmp_path: Path, llama_source: Path, qwen3_target: Path
) -> None:
    """The methods whose conversion needs the target (`--target-model-dir`): DFlash and an EAGLE-3 head in either
    layout (yuhuili's keeps its layer ids where llama.cpp's converter does not look: the printed commands pass them)."""
    from verifier.tiny.dflash import cached_dflash_drafter
    from verifier.tiny.eagle3 import cached_eagle3_head

    if method == "dflash":
        drafter = cached_dflash_drafter(cache_root(), qwen3_target, trained=True)
        block_size: int | None = int(json.loads((drafter / "config.json").read_text())["block_size"])
        pair = PairFacts(str(qwen3_target), None, str(drafter), None, method, block_size=block_size)
    else:
        head = cached_eagle3_head(cache_root(), qwen3_target, trained=True, layout=layout)
        # A copy, as `hf download --local-dir` makes one: the printed steps may write into the head's config.
        drafter = Path(shutil.copytree(head, tmp_path / head.name))
        block_size = None
        # What the registry passes (registry.calibration.launch_inputs): the rule applied to the head's config.
        layers = eagle3_converter_layers(read_config(head))
        pair = PairFacts(str(qwen3_target), None, str(drafter), None, "eagle3",
                         eagle3_layers=tuple(layers) if layers is not None else None, drafter_config_read=True)
    answer = _run_launch(pair, None, tmp_path, llama_source)  # the trained block / llama-server's default, as printed
    timings = answer["timings"]
    assert answer["content"] and timings["predicted_n"] > 0
    assert timings["draft_n"] > 0 and timings["draft_n_accepted"] > 0, timings
    if method == "dflash":
        assert block_size is not None and answer["launch"].draft_length == block_size - 1
    if method != "dflash":
        # The head reads the target layers it was trained on (the verifier's conversion writes the same ones).
        written = read_gguf_metadata(tmp_path / f"{drafter.name}.gguf", ("eagle3.target_layers",))
        target_layers = read_config(qwen3_target)["num_hidden_layers"]
        trained = parse_eagle3_config(read_config(head)).hidden_state_indices(target_layers)
        assert written["eagle3.target_layers"] == list(trained) == [1, 2, 3]


def test_the_eagle3_layouts_launch_refuses_are_the_ones_the_converter_lacks(llama_source: Path) -> None:
    """The converter of the build the tests run is the oracle for UNSUPPORTED_LAYOUTS: the architectures it maps
    include the EAGLE-3 layouts the printed commands run, and none of DeepSpec's."""
    mapped = "".join(path.read_text() for path in sorted((llama_source / "conversion").glob("*.py")))
    for architecture in ("LlamaForCausalLMEagle3", "Eagle3Speculator"):  # yuhuili / SpecForge, speculators
        assert f'"{architecture}"' in mapped, architecture
    refused = [reason for (engine, method, _), reason in UNSUPPORTED_LAYOUTS.items()
               if (engine, method) == ("llamacpp", "eagle3")]
    assert len(refused) == 2
    for architecture in ("Qwen3Eagle3Model", "Gemma4Eagle3Model"):
        assert architecture not in mapped and any(architecture in reason for reason in refused)
