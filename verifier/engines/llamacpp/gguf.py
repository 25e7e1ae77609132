"""GGUF files: the few metadata keys the engine needs (read natively, without gguf-py), and what a file is.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from verifier.engines.llamacpp.server import ServerFailed
from verifier.folders import file_sha256


# GGUF general.architecture of a drafter given as a .gguf file → drafter method.
GGUF_ARCHITECTURE_METHODS = {"dflash": "dflash", "eagle3": "eagle3", "gemma4-assistant": "gemma4-assistant"}


# llama_ftype values of GGUF `general.file_type` (gguf-py LlamaFileType).
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4",
}


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


def gguf_info(path: Path) -> GgufInfo:
    path = Path(path)
    try:
        metadata = read_gguf_metadata(path, ("general.architecture", "general.file_type"))
    except (OSError, ValueError, struct.error) as error:
        raise ServerFailed(f"{path.name} cannot be read as GGUF: {error}") from None
    file_type = metadata.get("general.file_type")
    return GgufInfo(
        path=path,
        sha256=file_sha256(path),
        size_bytes=path.stat().st_size,
        architecture=metadata.get("general.architecture"),
        file_type=FILE_TYPES.get(file_type, f"ftype {file_type}") if isinstance(file_type, int) else None,
    )
