"""Converting a pair to GGUF the way llama.cpp documents: `convert_to_gguf` / `cached_gguf` (a DFlash, DSpark or
EAGLE-3 drafter with `--target-model-dir`, since it has no embeddings or tokenizer of its own), the publisher's own
code refused, and the converter's refusals reported in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from registry.domain import pair
from registry.domain.llama_commands import CONVERTER, EAGLE3_CONVERTER_KEY, NEEDS_TARGET_DIR, converter_args, \
    eagle3_converter_layers
from registry.errors import Failed, UserError
from registry.processes import killed_with_parent
from verifier.build_cache import cached_build
from verifier.engines.llamacpp.gguf import GGUF_ARCHITECTURE_METHODS, GgufInfo, gguf_info, read_gguf_metadata
from verifier.engines.llamacpp.install import last_lines, llama_cpp_source
from registry.local import LocalRepoError, read_config
from verifier.folders import LoadError, file_sha256, weight_files

# Hugging Face architectures llama.cpp converts with its Gemma-4 vocabulary reader (tokenizer.json only).
GEMMA4_ARCHITECTURES = frozenset({"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
                                  "Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM"})


OUTTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


class ConversionFailed(UserError, RuntimeError):
    """convert_hf_to_gguf.py refused a folder; the message names what it refused."""


class ConverterKilled(Failed, RuntimeError):
    """convert_hf_to_gguf.py was killed by a signal (the out-of-memory killer sends SIGKILL): nothing about the
    folder was refused, so a job retries it (`retry`), and the command exits 1, not 2."""

    retry = True


def convert_to_gguf(
    model_dir: Path,
    out_file: Path,
    *,
    source: Path,
    target_dir: Path | None = None,
    outtype: str = "f32",
    timeout_s: float = 1800.0,
) -> GgufInfo:
    """Run llama.cpp's convert_hf_to_gguf.py on `model_dir` (safetensors only; never the network)."""
    weight_files(Path(model_dir))  # refuses folders that only have pickle weights, which the converter would load
    for folder in (model_dir, target_dir):
        if folder is not None:
            refuse_publisher_code(Path(folder))
    # The converter's own gguf-py, never another installed `gguf`; and no network, whatever the folder says.
    environment = {**os.environ, "PYTHONPATH": str(source / "gguf-py"), "HF_HUB_OFFLINE": "1",
                   "TRANSFORMERS_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="gguf-convert-") as scratch:
        staged = with_eagle3_target_layers(with_tokenizer_json(Path(model_dir), Path(scratch) / "model"),
                                           Path(scratch) / "eagle3")
        staged_target = None
        if target_dir is not None:
            staged_target = str(with_tokenizer_json(Path(target_dir), Path(scratch) / "target"))
        # The arguments `drafters launch` prints (registry.domain.llama_commands), with this machine's paths.
        command = [sys.executable, str(source / CONVERTER),
                   *converter_args(str(staged), str(out_file), outtype=outtype, target_dir=staged_target)]
        try:
            # The converter goes with us, even when we are killed with SIGKILL (`up`'s worker runs it too).
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=environment,
                                    check=False, preexec_fn=killed_with_parent)  # noqa: PLW1509 - only prctl
        except subprocess.TimeoutExpired:
            raise ConversionFailed(
                f"convert_hf_to_gguf.py did not finish {Path(model_dir).name} in {timeout_s:.0f} s"
            ) from None
    if result.returncode < 0:
        raise ConverterKilled(f"llama.cpp's convert_hf_to_gguf.py was killed by {signal_name(-result.returncode)} "
                              f"converting {Path(model_dir).name} (the out-of-memory killer sends SIGKILL)")
    if result.returncode != 0 or not Path(out_file).is_file():
        raise ConversionFailed(
            f"llama.cpp's convert_hf_to_gguf.py refused {Path(model_dir).name}: {converter_refusal(result.stderr)}"
        )
    return gguf_info(Path(out_file))


def run_converter(args: list[str]) -> int:
    """`drafters convert-hf-to-gguf ARGS`: llama.cpp's convert_hf_to_gguf.py of the installed build with `args`
    unchanged (the conversions `drafters launch` prints); every model folder among them is refused first if it
    carries the publisher's own code, which the converter would run. Returns the converter's exit status."""
    for arg in args:
        if Path(arg).is_dir():
            refuse_publisher_code(Path(arg))
    source = llama_cpp_source()
    environment = {**os.environ, "PYTHONPATH": str(source / "gguf-py")}
    result = subprocess.run([sys.executable, str(source / CONVERTER), *args], env=environment, check=False,
                            preexec_fn=killed_with_parent)  # noqa: PLW1509 - only prctl
    return result.returncode


def signal_name(number: int) -> str:
    """`signal 9 (SIGKILL)`: the number always, the name where this platform has one."""
    try:
        return f"signal {number} ({signal.Signals(number).name})"
    except ValueError:
        return f"signal {number}"


def refuse_publisher_code(folder: Path) -> None:
    """Refuse a folder that carries the publisher's own code: convert_hf_to_gguf.py loads tokenizers with
    `trust_remote_code=True`, so an `auto_map` in config.json or tokenizer_config.json, or any *.py file, would run.
    The PyTorch path refuses `auto_map` the same way (verifier.loading.refuse_remote_code)."""
    for name in ("config.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise LoadError(f"{folder}: {name} is not readable JSON ({error.__class__.__name__})") from None
        if isinstance(document, dict) and "auto_map" in document:
            raise LoadError(f"{folder}: {name} points at the publisher's own code (auto_map); llama.cpp's converter "
                            "would run it, and the verifier never runs remote code")
    scripts = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.py"))
    if scripts:
        raise LoadError(f"{folder} holds Python files ({', '.join(scripts[:3])}); llama.cpp's converter could run "
                        "them, and the verifier never runs remote code")


def with_tokenizer_json(folder: Path, scratch: Path) -> Path:
    """`folder` itself, or for a Gemma-4 folder with only a SentencePiece `tokenizer.model` a copy under `scratch`
    (links to its files) plus the `tokenizer.json` transformers derives from it.

    llama.cpp reads Gemma-4 vocabularies (targets, assistants, and DFlash drafters through their target) from
    tokenizer.json only, which every published Gemma-4 ships. The derived file lists the same pieces under the same
    ids; its text segmentation may differ, which never matters here: prompts reach llama-server as token ids."""
    if (folder / "tokenizer.json").is_file() or not (folder / "tokenizer.model").is_file():
        return folder
    try:
        architectures = set(read_config(folder).get("architectures") or ())
    except LocalRepoError:  # the converter refuses an unreadable config with its own message
        return folder
    if not architectures & GEMMA4_ARCHITECTURES:
        return folder
    from transformers import AutoTokenizer

    staged = scratch / folder.name
    staged.mkdir(parents=True)
    for path in folder.iterdir():
        if path.is_file():
            (staged / path.name).symlink_to(path.resolve())
    AutoTokenizer.from_pretrained(folder).backend_tokenizer.save(str(staged / "tokenizer.json"))
    return staged


def eagle3_target_layers(folder: Path) -> list[int] | None:
    """The fused hidden-state indices llama.cpp's converter must be told for an EAGLE-3 head whose config keeps them
    where the converter does not look; None when it already reads the same ones (or the folder is not EAGLE-3).
    The rule is `registry.domain.llama_commands.eagle3_converter_layers`, the one `drafters launch` prints."""
    try:
        return eagle3_converter_layers(read_config(folder))
    except LocalRepoError:
        return None  # the converter refuses an unreadable config with its own message


def with_eagle3_target_layers(folder: Path, scratch: Path) -> Path:
    """`folder` itself, or a copy under `scratch` (links to its files) whose config.json also carries the top-level
    `eagle_aux_hidden_state_layer_ids` the converter reads (see `eagle3_target_layers`)."""
    layers = eagle3_target_layers(folder)
    if layers is None:
        return folder
    staged = scratch / folder.name
    staged.mkdir(parents=True)
    for path in folder.iterdir():
        if path.is_file() and path.name != "config.json":
            (staged / path.name).symlink_to(path.resolve())
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config[EAGLE3_CONVERTER_KEY] = layers
    (staged / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return staged


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?::\s*(.*))?$")
_FRAME_LINE = re.compile(r'^\s*File "(.+)", line (\d+), in ')


def converter_refusal(stderr: str) -> str:
    """What the converter refused, from its traceback: the exception, and for a bare assertion the failing line."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    for index in range(len(lines) - 1, -1, -1):
        match = _EXCEPTION_LINE.match(lines[index].strip())
        if match is None:
            continue
        name, message = match.groups()
        where = ""
        frames = [(i, _FRAME_LINE.match(line)) for i, line in enumerate(lines[:index])]
        frames = [(i, m) for i, m in frames if m is not None]
        if frames:
            frame_index, frame = frames[-1]
            code = lines[frame_index + 1].strip() if frame_index + 1 < index else ""
            parts = Path(frame.group(1)).parts
            short = "/".join(parts[-2:]) if len(parts) >= 2 else frame.group(1)
            where = f" at {short}:{frame.group(2)}" + (f" (`{code}`)" if code and not message else "")
        return f"{name}: {message}{where}" if message else f"{name}{where}"
    return last_lines(stderr, 2) or "no error message"


def _content_key(folder: Path) -> str:
    """sha256 over every file's name and content: the tokenizer matters to a GGUF as much as the weights."""
    lines = sorted(f"{path.name}:{file_sha256(path)}" for path in folder.iterdir()
                   if path.is_file() and not path.name.startswith("."))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def cached_gguf(
    model_dir: Path,
    cache_root: Path,
    *,
    source: Path,
    build: int,
    target_dir: Path | None = None,
    outtype: str = "f32",
    config: dict[str, Any] | None = None,
) -> GgufInfo:
    """The GGUF of `model_dir` under `cache_root`, converted once per content, target, build and outtype.
    `config`: the folder's config.json as already read (a verify's pre-check), else read here."""
    model_dir = Path(model_dir)
    name = f"gguf-{model_dir.resolve().name}-{outtype}"
    file_name = f"model-{outtype}.gguf"
    settings = {"model": _content_key(model_dir), "target": _content_key(target_dir) if target_dir else None,
                "build": build, "outtype": outtype}
    layers = eagle3_converter_layers(config) if config is not None else eagle3_target_layers(model_dir)
    if layers is not None:  # GGUFs converted before the layers were passed on read other target layers
        settings["eagle3_target_layers"] = layers
    folder = cached_build(
        cache_root,
        name,
        lambda out: (out.mkdir(parents=True, exist_ok=True),
                     convert_to_gguf(model_dir, out / file_name, source=source, target_dir=target_dir,
                                     outtype=outtype)),
        source_files=(),
        settings=settings,
    )
    return gguf_info(folder / file_name)


def convert_pair(
    target_dir: Path, drafter_dir: Path | None, out_dir: Path, *, outtype: str = "f32", source: Path | None = None
) -> tuple[GgufInfo, GgufInfo | None]:
    """`out_dir/<folder name>-<outtype>.gguf` for the target and its drafter, as llama.cpp documents the conversion."""
    for folder in (target_dir, drafter_dir):
        if folder is not None:
            refuse_publisher_code(Path(folder))  # before anything is fetched or converted
    source = source or llama_cpp_source()
    target_dir, out_dir = Path(target_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = convert_to_gguf(target_dir, out_dir / f"{target_dir.resolve().name}-{outtype}.gguf", source=source,
                             outtype=outtype)
    if drafter_dir is None:
        return target, None
    drafter_dir = Path(drafter_dir)
    method = method_of(drafter_dir)
    drafter = convert_to_gguf(drafter_dir, out_dir / f"{drafter_dir.resolve().name}-{outtype}.gguf", source=source,
                              outtype=outtype, target_dir=target_dir if method in NEEDS_TARGET_DIR else None)
    return target, drafter


def method_of(drafter: Path, override: str | None = None) -> str:
    if override:
        return override
    if drafter.is_file():
        architecture = read_gguf_metadata(drafter, ("general.architecture",)).get("general.architecture")
        return GGUF_ARCHITECTURE_METHODS.get(str(architecture), pair.DEFAULT_METHOD)
    return pair.method_to_run(read_config(drafter))
